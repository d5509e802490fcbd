"""View-model builders for the explorer app (`app.py`, `pages/`): pure functions from stored traces, results and
messages to plotly figures, HTML strings and DataFrames. Nothing here imports streamlit, and every piece of HTML
the app shows is built here, with untrusted text (message text, authors, topics, channels, answers) escaped by
`tmem.viz.safe`.
"""
