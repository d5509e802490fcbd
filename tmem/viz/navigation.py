"""The explorer's pages, in navigation order: (page file, title, URL path, default). Data only (no streamlit), so
app.py can draw the navigation before the library loads, and a page opened by the server's first session (which
Streamlit runs without app.py, see pages/_shell.py) can draw the same one."""
from __future__ import annotations

PAGES: tuple[tuple[str, str, str, bool], ...] = (
    ("pages/corpus.py", "Corpus", "corpus", False),
    ("pages/question.py", "Question", "question", True),
    ("pages/failures.py", "Failures", "failures", False),
    ("pages/compare.py", "Compare", "compare", False),
    ("pages/sweep.py", "Sweep", "sweep", False),
    ("pages/structuring.py", "Structuring", "structuring", False),
    ("pages/recall.py", "Recall", "recall", False),
    ("pages/judge_audit.py", "Judge audit", "judge-audit", False),
    ("pages/settings.py", "Settings", "settings", False),
)
