"""Tables and widgets the pages share: the cached message frames, views shared by every session (`shared`), a table
with its message text on screen, CSV/JSON exports, selections mirrored to the URL. Not a page."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from tmem import api
from tmem.api import ExplorerContext
from tmem.viz.batch import tables
from tmem.viz.safe import spreadsheet_safe


@st.cache_data(show_spinner=False, max_entries=16)
def _frame(db: str, corpus: str, scope: str | None, imported_at: str, _c) -> pd.DataFrame:
    return api.explorer.messages_frame(_c, scope)


def messages(c: ExplorerContext, scope: str | None = None) -> pd.DataFrame:
    """The scope's (or, with scope=None, the corpus') messages, cached until the corpus is re-imported."""
    info = api.explorer.corpus_info(c)
    return _frame(c.database, c.corpus, scope, str(info["imported_at"]), c)


@st.cache_data(show_spinner=False, max_entries=96)
def _shared(name: str, key: tuple, _build):
    return _build()


def shared(name: str, key: tuple, build):
    """`build()`, computed once per `key` for every session of the server (st.cache_data: a new tab, a second user
    and the next rerun read it), so `key` must name everything `build` reads -- the database, corpus, run, its
    stored version (row count and latest time), the gold version, annotations and the widgets' values. Used for the
    tables and figures a page derives from a run's rows: re-deriving them was most of a page's server time on each
    visit (Compare ~0.8 s, Failures ~0.4 s of pandas at an idle machine)."""
    return _shared(name, key, build)


WRAPPED_ROW = 74  # px: three lines of a text cell (the grid wraps a cell's text when its row is that tall)


def text_table(frame: pd.DataFrame, lead: int, order: list[str] | None = None, **kwargs):
    """st.dataframe with its message text on screen at 1100 px: the text columns right after the first `lead`
    columns of `order` (default: the frame's), each large (tables.text_first) and wrapped on three lines (a
    message of the demo fits whole; one line cut most at ~60 characters); the rest scroll to the right."""
    order = tables.text_first(order or list(frame.columns), lead)
    config = {c: st.column_config.TextColumn(width="large") for c in order if c in tables.TEXT_COLUMNS}
    if config:
        kwargs.setdefault("row_height", WRAPPED_ROW)
    return st.dataframe(frame, hide_index=True, column_order=order,
                        column_config=config | kwargs.pop("column_config", {}), **kwargs)


def export_buttons(frame: pd.DataFrame, name: str) -> None:
    """CSV and JSON downloads of a table, each written when its button is clicked (both were built on every rerun:
    ~0.1-0.2 s of Failures' and the Question page's redraw, for files rarely downloaded)."""
    row = st.container(horizontal=True)  # buttons as wide as their labels: columns cut them to "C…" at 1100 px
    frame = frame.copy(deep=False)  # the table as shown now, whatever the caller does with its frame later
    # no cell runs as a formula in a spreadsheet
    row.download_button("CSV", lambda: spreadsheet_safe(frame).to_csv(index=False).encode(), f"{name}.csv",
                        "text/csv", key=f"csv-{name}", icon=":material/download:")
    row.download_button("JSON", lambda: frame.to_json(orient="records", date_format="iso", indent=1).encode(),
                        f"{name}.json", "application/json", key=f"json-{name}", icon=":material/download:")



def offline_label(offline: bool) -> str:
    return " :orange-badge[offline stand-in]" if offline else ""



def synced(widget, label: str, options: list, key: str, default=None, always: bool = False, **kwargs):
    """A selection widget mirrored to query parameter `key` by hand. Used where option labels are not stable ids
    (`bind="query-params"` would put the formatted label in the URL): the URL keeps the option value itself
    (`always`: even when it is the default, so that a link names it)."""
    if key not in st.session_state or (st.session_state[key] is not None and st.session_state[key] not in options):
        raw = st.query_params.get(key)
        st.session_state[key] = raw if raw in options else default
    value = widget(label, options, key=key, **kwargs)
    if value is None or (value == default and not always):
        st.query_params.pop(key, None)
    else:
        st.query_params[key] = str(value)
    return value

