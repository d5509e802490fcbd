"""tmem.viz.batch.tables: failure counts and filters, per-type accuracy with deltas, per-question changes, heat-map."""
from __future__ import annotations

import pandas as pd
import pytest

from tmem.analysis.funnel import ANCHOR_MISS, COMPRESSED_AWAY
from tmem.store import Store
from tmem.viz.batch import compare, tables


def _row(variant, qid, correct, qtype="knowledge_update", failure=None, status="ok", units=2, found=2):
    base = dict.fromkeys(Store.RUN_RESULT_COLUMNS)
    base.update(run_id="r", corpus="c", variant=variant, config_hash="h", backend="b", scope="s", question_id=qid,
                qtype=qtype, status=status, correct=correct, failure=failure, units=units, units_recovered=found)
    return base


@pytest.fixture
def results():
    return pd.DataFrame([
        _row("flat", "q1", False, failure=ANCHOR_MISS, found=0),
        _row("flat", "q2", True),
        _row("flat", "q3", False, qtype="temporal", failure=COMPRESSED_AWAY, found=1),
        _row("full", "q1", True),
        _row("full", "q2", False, failure=COMPRESSED_AWAY),
        _row("full", "q3", False, qtype="temporal", failure=COMPRESSED_AWAY),
        _row("full", "q4", None, status="error"),
    ])


def test_verdicts(results):
    assert list(tables.verdicts(results)) == ["wrong", "correct", "wrong", "correct", "wrong", "wrong", "error"]


def test_failure_counts_in_pipeline_order(results):
    counts = tables.failure_counts(results)
    # a memory system's own recall comes first (its first stage), then T-Mem's stages in pipeline order
    assert list(counts)[:3] == ["not recalled by the memory system", ANCHOR_MISS, "window miss"]
    assert counts[ANCHOR_MISS] == 1 and counts[COMPRESSED_AWAY] == 3
    assert counts["correct"] == 2 and counts["error"] == 1


@pytest.mark.parametrize("category,expected", [(COMPRESSED_AWAY, 3), ("correct", 2), ("error", 1), (None, 7)])
def test_failure_view_filters_on_a_clicked_count(results, category, expected):
    assert len(tables.failure_view(results, category)) == expected


def test_filter_results(results):
    assert len(tables.filter_results(results, variant="full", verdict="wrong")) == 2
    assert len(tables.filter_results(results, qtype="temporal")) == 2
    assert len(tables.filter_results(results, scope="other")) == 0


def test_per_question_changes(results):
    aligned = compare.per_question(results, "flat", "full").set_index("question_id")
    assert aligned.loc["q1", "change"] == "improved"
    assert aligned.loc["q2", "change"] == "regressed"
    assert aligned.loc["q3", "change"] == "unchanged"
    assert aligned.loc["q4", "change"] == "missing"
    # empty cells read "—" (a correct answer has no failure)
    assert aligned.loc["q1", "failure (full)"] == "—"
    assert "None" not in aligned.astype(str).to_string() and "nan" not in aligned.astype(str).to_string()


def test_heatmap(results):
    matrix = compare.heatmap_frame(results, ["flat", "full"])
    assert matrix.loc["s / q1", "flat"] == 0 and matrix.loc["s / q1", "full"] == 1
    assert "s / q4" not in matrix.index  # no variant has a verdict for it (an error row has none)
    changed = compare.heatmap_frame(results, ["flat", "full"], only_changed=True)
    assert set(changed.index) == {"s / q1", "s / q2"}
    html = compare.heatmap_html(matrix)
    assert html.count("<tr>") == matrix.shape[0] + 1 and html.count("title=") == matrix.size  # a cell per pair
    assert 'title="s / q1 · flat: wrong">wrong</td>' in html and 'title="s / q1 · full: correct">correct</td>' in html


def test_failure_view_reads_without_python_syntax_and_dashes_fill_gaps():
    rows = pd.DataFrame([_row("flat", "q1", False, failure=ANCHOR_MISS)])
    rows["failure_detail"] = "unit ['m1', 'm2'] not among the anchors"
    view = tables.failure_view(rows, None)
    assert view.loc[0, "failure_detail"] == "unit m1 / m2 not among the anchors" and view.loc[0, "error"] == "—"
    shown = tables.dashes(pd.DataFrame({"a": [1.0, None], "b": ["x", ""], "c": [1, 2]}))
    assert list(shown["a"]) == ["1", "—"] and list(shown["b"]) == ["x", "—"] and shown["c"].dtype.kind == "i"


def test_a_shared_opening_is_folded_so_the_column_shows_what_differs():
    """Issue 42, item 8: Failures cut every question at "On what date (YYYY-MM-DD) was t…"."""
    from tmem.viz.batch.tables import distinct_heads

    texts = ["On what date (YYYY-MM-DD) was the launch decided?", "On what date (YYYY-MM-DD) was the DB picked?",
             "Who owns the pager?", "On what date (YYYY-MM-DD) was the launch decided?"]
    assert distinct_heads(texts) == ["On what … launch decided?", "On what … DB picked?", "Who owns the pager?",
                                     "On what … launch decided?"]
    assert distinct_heads(["Who is it?", "Who is he?"]) == ["Who is it?", "Who is he?"]  # too short a run to fold
