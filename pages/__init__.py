"""The explorer's pages. A file here is a page when tmem/viz/navigation.py lists it (app.py draws the navigation
from that list); a file whose name starts with `_` is the shared Streamlit layer the pages import, one concern
each: the sidebar shell and the context it builds (_shell), known failures as callouts (_callouts), tables and
URL-synced widgets (_widgets), opening a question (_links), stored runs and the background batch (_runs), and the
parts of one page (_question_*, _verdict_rows, _batch_cost).

A helper's name, without its leading `_`, must not be a page's: Streamlit's legacy pages-folder mode (a server's
first session, see pages/_shell.py) makes every file here a page named that way, and two pages of one name stop
its navigation (tests/test_architecture.py checks both rules).
"""
