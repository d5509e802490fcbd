"""tmem.viz.progress: the words of a batch run's progress and the first screen of a running question."""
from __future__ import annotations

from datetime import datetime

from tmem.evaluation.batch.jobs import Progress
from tmem.types import Anchor, Gold, Message
from tmem.viz import progress as view


def test_clock():
    assert [view.clock(s) for s in (None, 4.4, 65, 3725)] == ["—", "4 s", "1 min 05 s", "1 h 02 min"]


def test_eta_waits_for_a_rate_worth_quoting():
    assert view.eta(10, 0.25) == 30  # a quarter in 10 s -> 30 s to go
    assert view.eta(10, 0) is None and view.eta(10, 1) is None
    assert view.eta_suffix(10, 0.25) == " — 10 s so far, about 30 s to go"
    assert view.eta_suffix(0.3, 0.5).endswith("estimating the time left…")  # under a second: no guess
    assert view.eta_suffix(5, 0.05).endswith("estimating the time left…")  # the quick first stages only
    assert view.eta_suffix(42, 1.0) == " — 42 s so far, storing the result…"  # done: no estimate left to make


def test_progress_line():
    running = Progress("running", 30, 120, "flat", ("full",), 60, 180, "running flat (1 of 2 variants stored)")
    assert view.progress_line("demo-offline", running) == (
        "Batch demo-offline: running flat (1 of 2 variants stored) — 30/120 question-stages (25%), 1 min 00 s so "
        "far, about 3 min 00 s to go")
    done = Progress("done", 120, 120, None, ("full", "flat"), 200, None, "done: 2 of 2 variants stored")
    assert view.progress_line("x", done) == "Batch x: done: 2 of 2 variants stored in 3 min 20 s"


def test_seed_preview_marks_gold_and_counts_units():
    t = datetime(2024, 5, 1, 9, 30)
    messages = {f"m{i}": Message(f"m{i}", "s", "word " * (40 if i == 2 else 2), t, author="Ann") for i in range(4)}
    anchors = [Anchor("m2", 3.5, 2), Anchor("m1", 7.25, 1), Anchor("m3", 1.0, 3)]
    gold = Gold("q", "a", (("m1",), ("m0", "m3"), ("m9",)))
    assert view.seed_units(anchors, gold) == (2, 3)  # units 1 and 2 have a message among the anchors
    assert view.seed_units(anchors, None) == (0, 0)
    table = view.seed_table(anchors, messages, gold, top=2, width=20)
    assert list(table.index) == [1, 2] and list(table["gold"]) == ["✓", ""]
    assert table.loc[1, "BM25"] == "7.25" and table.loc[1, "time"] == "2024-05-01 09:30"
    assert table.loc[2, "text"] == "word " * 3 + "word" + "…" and len(table.loc[2, "text"]) == 20
