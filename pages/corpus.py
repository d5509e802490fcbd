"""Corpus view: import a corpus (upload or server path), see its counts, channels, topics and people, the
message-volume timeline, and browse or search the scope's messages with their metadata."""
from __future__ import annotations

import dataclasses
import time

import streamlit as st

from pages._callouts import failure_callout
from pages._links import open_question
from pages._shell import ctx
from pages._widgets import export_buttons, messages, shared, text_table
from tmem import api
from tmem.viz import corpus as view
from tmem.viz.safe import md, shorten

GROUP_WIDTH = 360  # px: channels, topics, people side by side in a 1600-px window, one under another at 1100


def import_summary(c, name: str, fmt: str, seconds: float, notes: list[str]) -> None:
    """What the last import loaded, a way into its first question, and the importer's notes (folded)."""
    counts = api.explorer.corpus_counts(c, name)
    st.success(f"**Imported {md(name)}** ({md(fmt)}) in {seconds:.1f} s: " + ", ".join(
        f"{value:,} {label.replace('_', ' ')}" for label, value in counts.items()), icon=":material/task_alt:")
    first = next(iter(api.explorer.questions(c, corpus=name)), None)
    left = right = st.container(horizontal=True)
    if first is not None:
        if left.button(f"Open its first question: {shorten(first.text, 60)}", icon=":material/arrow_forward:",
                       key="open_first", type="primary"):
            st.session_state.pop("import_done", None)
            open_question(dataclasses.replace(c, corpus=name), first.scope, first.id)
    else:
        left.caption("No questions in this corpus: type your own on the Question page.")
    if right.button("Dismiss", key="import_dismiss"):
        st.session_state.pop("import_done", None)
        st.rerun()
    if notes:
        with st.expander(f"Import notes ({len(notes)})", icon=":material/info:"):
            st.markdown("\n".join(f"- {md(note)}" for note in notes))


def message_page(found, total: int, search: tuple):
    """The page of the found messages the table shows (view.PAGE_ROWS rows, the page number in the URL as `mpage`),
    with a caption saying which rows these are. Every message stays reachable: the search and filters run over all
    of them, the pages step through the rest, and the exports hold every found row. A changed `search` (the text
    and filters) starts again at page 1."""
    pages = view.page_count(len(found))
    seen = st.session_state.get("_page_search", search)  # a link's page survives the first run
    st.session_state["_page_search"] = search
    if seen != search or st.session_state.get("mpage", 1) > pages:
        st.session_state["mpage"] = 1
    if pages == 1:
        st.caption(f"{len(found):,} of {total:,} messages")
        return found
    left, right = st.columns([1, 5], vertical_alignment="bottom")
    page = left.number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, step=1, key="mpage",
                             bind="query-params")
    first, last = (page - 1) * view.PAGE_ROWS + 1, min(page * view.PAGE_ROWS, len(found))
    right.caption(f"{len(found):,} of {total:,} messages; rows {first:,}–{last:,} shown, {view.PAGE_ROWS} a page (the "
                  "search and filters cover every message; CSV and JSON export every row found)")
    return view.page_of(found, page)


def render() -> None:
    c = ctx()
    st.subheader("Corpus")
    formats = api.import_formats()  # {format: (what to upload, file extensions)}
    with st.expander("Import a corpus", expanded=not c.corpus, icon=":material/upload:"):
        fmt = st.selectbox("Format", list(formats), key="import_fmt",
                           help="Importers in tmem.corpora; see docs/corpora.md.")
        hint, types = formats[fmt]
        st.caption(f"**Upload for {fmt}:** {hint}")
        with st.form("import", border=False):
            name = st.text_input("Corpus name", placeholder="e.g. locomo")
            uploads = st.file_uploader("Upload a .zip or the files", type=types, accept_multiple_files=True,
                                       key=f"upload_{fmt}")
            path = st.text_input("…or a file or folder on the server", placeholder="/data/locomo10.json",
                                 help="Off unless the app was started with TMEM_IMPORT_DIRS naming the folders it may "
                                      "read (see docs/corpora.md).")
            go = st.form_submit_button("Import", type="primary")
        if go:
            if not name.strip() or not (uploads or path.strip()):
                st.error("Give a corpus name and a file or a path.")
            else:
                with st.spinner("Importing…"):
                    started = time.perf_counter()
                    try:
                        notes = api.explorer.import_into(c, name.strip(), fmt, path.strip() or None,
                                                  uploads=[(f.name, f.getvalue()) for f in uploads or []])
                    except Exception as exc:  # importer errors name the file, line and field
                        if not failure_callout(exc, "Import failed"):
                            st.error(f"Import failed: {md(str(exc))}")
                    else:
                        st.cache_data.clear()
                        st.session_state["_pending"] = {"corpus": name.strip()}
                        st.session_state["import_done"] = (name.strip(), fmt, time.perf_counter() - started, notes)
                        st.rerun()
    if (done := st.session_state.get("import_done")) and done[0] == c.corpus:  # until another corpus is picked
        import_summary(c, *done)
    if not c.corpus:
        st.info("No corpus yet: import one above.")
        st.stop()
    info, counts = api.explorer.corpus_info(c), api.explorer.corpus_counts(c)
    for col, (label, value) in zip(st.columns(5), counts.items()):
        col.metric(label.replace("_", " "), f"{value:,}")
    st.caption(f"format {md(info['format'])} · source {md(info['source'])} · imported {info['imported_at']}")
    frame = messages(c, c.scope)
    st.markdown(f"**Scope {md(c.scope)}** — {len(frame):,} messages, {frame['timestamp'].min()} → "
                f"{frame['timestamp'].max()}")
    # the scope's overview tables and figure, shared by every session until the corpus is re-imported
    key = (c.database, c.corpus, c.scope, str(info["imported_at"]))
    groups = st.container(horizontal=True, wrap=True, gap="medium")  # three in a row at 1600 px, wrapped at 1100 px
    for label, table in shared("corpus_groups", key, lambda: (
            ("Channels", view.group_counts(frame, "channel")), ("Topics", view.group_counts(frame, "topic")),
            ("People", view.people(frame)))):
        box = groups.container(width=GROUP_WIDTH)
        box.caption(label)
        box.dataframe(table, hide_index=True, height=220)
    st.markdown("**Message volume**")
    a, b = st.columns(2)
    by = a.segmented_control("Stack by", ["channel", "topic", "author"], default="channel", key="by",
                             bind="query-params") or "channel"
    freq = b.segmented_control("Period", ["h", "D", "W"], default="D", key="freq", bind="query-params",
                               format_func={"h": "hour", "D": "day", "W": "week"}.get) or "D"
    # st.markdown, not st.html: st.html's sanitiser drops SVG whole. Every text in it is escaped (view.volume_svg), and
    # it is one line, so Markdown leaves it a raw HTML block
    st.markdown(shared("corpus_volume", (key, by, freq), lambda: view.volume_svg(frame, by, freq)),
                unsafe_allow_html=True)
    st.markdown("**Messages**")
    s1, s2, s3, s4, s5 = st.columns([1.7, 1, 1, 1, 1.3])
    text = s1.text_input("Search text or id", key="search", bind="query-params")
    pick = lambda col, label, key: col.selectbox(label, [None, *sorted(frame[label.lower()].dropna().unique())],
                                                 key=key, bind="query-params", format_func=lambda v: v or "any")
    channel, topic, author = pick(s2, "Channel", "ch"), pick(s3, "Topic", "tp"), pick(s4, "Author", "au")
    order = s5.selectbox("Order", list(view.ORDERS), key="order", bind="query-params",
                         help="Orders every message found, across the pages (a column header sorts the page shown).")
    found = view.sort_messages(view.search_messages(frame, text, channel, topic, author), order)
    shown = message_page(found, len(frame), (text, channel, topic, author, order))
    gaps = shown.columns[shown.isna().any().to_numpy()]  # "—", not nan (vectorised: a scope may hold 10^6 messages)
    text_table(shown.assign(**{g: shown[g].astype(object).where(shown[g].notna(), "—") for g in gaps}), 1, height=360)
    export_buttons(found, f"messages-{c.corpus}-{c.scope}")
    questions = api.explorer.questions(c, c.scope)
    if questions:
        st.markdown("**Questions in this scope** — select one to open it")
        table = view.questions_frame(questions)
        picked = text_table(table, 1, on_select="rerun", selection_mode="single-row", key="q_table", height=240)
        if picked.selection.rows:
            open_question(c, c.scope, table["id"].iloc[picked.selection.rows[0]])


render()
