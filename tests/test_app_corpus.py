"""AppTest: the Corpus page (counts, channels/topics/people, volume, search, import, open a question)."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.app  # every test here runs the explorer under AppTest

CORPUS = "pages/corpus.py"


def _messages(at):
    return next(d.value for d in at.dataframe if "text" in d.value.columns and "reply_to" in d.value.columns)


def test_renders_counts_and_overview(app):
    at = app(CORPUS, corpus="golden", scope="golden")
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["messages"] == "59" and metrics["questions"] == "2" and metrics["evidence units"] == "1"
    channels = next(d.value for d in at.dataframe if "channel" in d.value.columns and "messages" in d.value.columns)
    assert set(channels["channel"]) == {"#release", "#marketing", "#random", "#general"}
    volume = next(m.value for m in at.markdown if "messages per period" in m.value)
    assert "#release: " in volume and "#marketing: " in volume, "the message-volume chart, by channel"


def test_demo_corpus_renders(app):
    at = app(CORPUS)
    assert not at.exception and at.metric


def test_search_and_filters_change_the_list(app):
    at = app(CORPUS, corpus="golden", scope="golden")
    assert len(_messages(at)) == 59
    at.text_input(key="search").set_value("go-live").run()
    assert list(_messages(at)["id"]) == ["m04"]
    at.text_input(key="search").set_value("").run()
    at.selectbox(key="ch").set_value("#release").run()
    assert set(_messages(at)["channel"]) == {"#release"}


def test_filters_from_url(app):
    at = app(CORPUS, corpus="golden", scope="golden", search="launch", tp="launch")
    found = _messages(at)
    assert len(found) and set(found["topic"]) == {"launch"}


def test_volume_stacking_follows_the_control(app):
    at = app(CORPUS, corpus="golden", scope="golden")
    at.button_group(key="by").set_value("topic").run()
    volume = next(m.value for m in at.markdown if "messages per period" in m.value)
    assert "· launch: " in volume and "· newsletter: " in volume and "#release: " not in volume


def test_import_by_path_adds_and_selects_the_corpus(app, tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_IMPORT_DIRS", str(tmp_path))  # server paths are off unless allowed
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"m{i}", "text": f"hello {i}", "timestamp": f"2025-01-0{i + 1}T10:00",
                                          "channel": "#a", "scope": "s"}) for i in range(3)))
    at = app(CORPUS, corpus="golden")
    at.text_input[0].set_value("tiny")  # the form's fields: name, then path
    next(t for t in at.text_input if t.label.startswith("…or a file")).set_value(str(path))
    next(b for b in at.button if b.label == "Import").click().run()
    assert not at.exception
    assert "tiny" in at.selectbox(key="corpus").options and at.selectbox(key="corpus").value == "tiny"
    assert {m.label: m.value for m in at.metric}["messages"] == "3"


def test_import_errors_are_shown(app, tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_IMPORT_DIRS", str(tmp_path))  # server paths are off unless allowed
    path = tmp_path / "bad.jsonl"
    path.write_text("{not json")
    at = app(CORPUS, corpus="golden")
    at.text_input[0].set_value("bad")
    next(t for t in at.text_input if t.label.startswith("…or a file")).set_value(str(path))
    next(b for b in at.button if b.label == "Import").click().run()
    assert any("Import failed" in e.value for e in at.error)
    assert "bad" not in at.selectbox(key="corpus").options


def test_import_errors_quoting_the_file_are_shown_escaped(app, tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_IMPORT_DIRS", str(tmp_path))  # server paths are off unless allowed
    """Importer messages quote file content: a Markdown image there must stay text, never make the browser fetch."""
    image = "![x](http://127.0.0.1:9/pixel.png)"
    path = tmp_path / "evil.jsonl"
    path.write_text(json.dumps({"id": "m1", "text": "hi", "timestamp": f"not a time {image}", "scope": "s"}))
    at = app(CORPUS, corpus="golden")
    at.text_input[0].set_value("evil")
    next(t for t in at.text_input if t.label.startswith("…or a file")).set_value(str(path))
    next(b for b in at.button if b.label == "Import").click().run()
    error = next(e.value for e in at.error if "Import failed" in e.value)
    assert "pixel" in error, "the message quotes the file (else this test checks nothing)"
    assert image not in error and "](http" not in error and "\\!\\[x\\]" in error


def test_an_import_ends_with_a_summary_notes_and_its_first_question(app, tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_IMPORT_DIRS", str(tmp_path))
    path = tmp_path / "small.jsonl"
    lines = [{"id": f"m{i}", "text": f"we chose plan {i}", "timestamp": f"2025-01-0{i + 1}T10:00", "scope": "s",
              "reply_to": "m9" if i == 2 else None} for i in range(3)]  # m9 does not exist: cleared, with a note
    lines += [{"kind": "question", "scope": "s", "id": "qa", "text": "Which plan did we choose?", "type": "single_hop",
               "gold_answer": "plan 2", "gold_evidence": [["m2"]]}]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    at = app(CORPUS, corpus="golden")
    at.text_input[0].set_value("small")
    next(t for t in at.text_input if t.label.startswith("…or a file")).set_value(str(path))
    next(b for b in at.button if b.label == "Import").click().run()
    assert not at.exception
    summary = next(s.value for s in at.success if "Imported" in s.value).replace("\\", "")
    assert "small" in summary and "3 messages" in summary and "1 questions" in summary and "jsonl" in summary
    notes = [e for e in at.expander if e.label.startswith("Import notes")]
    assert len(notes) == 1 and "m9" in notes[0].markdown[0].value
    at.button(key="open_first").click().run()
    assert not at.exception
    assert at.session_state["q"] == "qa" and at.selectbox(key="corpus").value == "small"
    assert "Which plan did we choose?" in " ".join(m.value for m in at.markdown)



def test_a_large_scope_sends_one_page_and_every_message_stays_reachable(app):
    """The demo's scope holds 3,000 messages: the table gets 200 of them a page (not the whole scope on every load),
    the page number walks through the rest in order, and the search still covers every message."""
    at = app(CORPUS)
    total = int({m.label: m.value for m in at.metric}["messages"].replace(",", ""))
    assert total > 2 * 200, "the demo scope is larger than two pages (else this test checks nothing)"
    first = _messages(at)
    assert len(first) == 200
    last_page = -(-total // 200)
    assert at.number_input(key="mpage").max == last_page
    at.number_input(key="mpage").set_value(last_page).run()
    last = _messages(at)
    assert len(last) == total - 200 * (last_page - 1) and not set(last["id"]) & set(first["id"])
    assert f"rows {200 * (last_page - 1) + 1:,}–{total:,} shown" in " ".join(c.value for c in at.caption)
    wanted = last["id"].iloc[-1]  # a message only the last page showed: the search finds it from anywhere
    at.text_input(key="search").set_value(wanted).run()
    assert wanted in list(_messages(at)["id"]) and not at.number_input  # one page of results: no page control


def test_a_link_keeps_its_page_and_a_new_filter_starts_at_page_one(app):
    at = app(CORPUS, mpage="3")
    assert at.number_input(key="mpage").value == 3, "a link names the page"
    assert "rows 401–600 shown" in " ".join(c.value for c in at.caption)
    channels = next(d.value for d in at.dataframe if "channel" in d.value.columns and "messages" in d.value.columns)
    busiest, count = channels["channel"].iloc[0], int(channels["messages"].iloc[0])
    assert count > 200, "the busiest channel fills more than a page (else this test checks nothing)"
    at.selectbox(key="ch").set_value(busiest).run()
    assert at.number_input(key="mpage").value == 1 and at.number_input(key="mpage").max == -(-count // 200)
    shown = _messages(at)
    assert len(shown) == 200 and set(shown["channel"]) == {busiest}
    assert f"{count:,} of " in " ".join(c.value for c in at.caption)


def test_an_order_sorts_every_message_found_not_only_the_page_shown(app):
    """A column header sorts only the 200 rows a page holds; the Order control sorts every message found before
    the pages are cut, so the newest message of the scope heads page 1 and the oldest ends the last page."""
    at = app(CORPUS)
    oldest_first = _messages(at)
    assert list(oldest_first["timestamp"]) == sorted(oldest_first["timestamp"])
    at.selectbox(key="order").set_value("newest first").run()
    assert not at.exception and at.number_input(key="mpage").value == 1, "a new order starts at page 1"
    newest_first = _messages(at)
    assert list(newest_first["timestamp"]) == sorted(newest_first["timestamp"], reverse=True)
    assert not set(newest_first["id"]) & set(oldest_first["id"]), "page 1 now holds the scope's other end"
    at.number_input(key="mpage").set_value(at.number_input(key="mpage").max).run()
    assert _messages(at)["timestamp"].min() == oldest_first["timestamp"].min()
    at.selectbox(key="order").set_value("author").run()
    authors = list(_messages(at)["author"].fillna("\uffff"))
    assert authors == sorted(authors) and at.number_input(key="mpage").value == 1


def test_sort_messages_by_hand():
    import pandas as pd

    from tmem.viz import corpus as view

    frame = pd.DataFrame({"id": ["a", "b", "c", "d"], "author": ["kim", None, "al", "kim"],
                          "timestamp": pd.to_datetime(["2024-01-02", "2024-01-01", "2024-01-03", "2024-01-01"])})
    assert list(view.sort_messages(frame, "oldest first")["id"]) == ["b", "d", "a", "c"]  # ties: stored order
    assert list(view.sort_messages(frame, "newest first")["id"]) == ["c", "a", "b", "d"]
    assert list(view.sort_messages(frame, "author")["id"]) == ["c", "d", "a", "b"]  # no author last
