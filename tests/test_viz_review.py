"""The view-models phase 2 wires into Compare and Failures: significance rows and whiskers, stale counts,
annotation text and filters, the what-if table and curve. Pure functions over hand-made rows."""
import pandas as pd

from tmem.analysis import significance as sig
from tmem.analysis.stale import ROLLBACK_MISSED, STALE
from tmem.analysis.whatif_k import UnitRank, k_curve
from tmem.viz.batch import annotations as notes_view
from tmem.viz.batch import review, significance
from tmem.viz.question import whatif


def _rows():
    out = []
    for i in range(20):  # full right on 0..15, flat on 0..3 and 16: 12 gains, 1 loss
        for variant, right in (("full", i < 16), ("flat", i < 4 or i == 16)):
            out.append({"scope": "s", "question_id": f"q{i}", "variant": variant,
                        "qtype": "knowledge_update" if i % 2 else "temporal", "correct": right,
                        "evidence_complete": right, "units": 1, "units_recovered": int(right),
                        "stale": variant == "flat" and i == 5, "stale_detail": "says March 3",
                        "rollback": None, "rollback_detail": None})
    return pd.DataFrame(out)


def test_comparison_rows_carry_figures_text_and_the_colour_class():
    rows = significance.comparison_rows(_rows(), "flat", "full", "evidence")
    overall = rows.iloc[0]
    assert overall["group"] == "overall" and overall["n"] == 20
    assert overall["Δ"] == "+55.0 pp" and overall["outcome"] == sig.WIN
    assert overall["colour"] == significance.COLOURS[sig.WIN]
    assert overall["95% CI"].startswith("[+") and overall["McNemar p"] == f"{sig.mcnemar_exact(12, 1):.3f}"
    assert list(rows["group"]) == ["overall", "knowledge_update", "temporal"]
    for r in rows.to_dict("records"):  # the colour of a per-type row follows its Holm-adjusted p (issue 39)
        p = r["p_mcnemar"] if r["group"] == "overall" else r["p_holm"]
        assert (r["outcome"] == sig.WIN) == (r["ci_low"] > 0 and p < sig.ALPHA)
    assert rows.iloc[1]["Holm p"] == sig.p_text(rows.iloc[1]["p_holm"]) and overall["Holm p"] == "—"
    assert significance.outcome_style(sig.INCONCLUSIVE) == "color: #868e96"
    assert "font-weight" in significance.outcome_style(sig.LOSS)


def test_the_overall_row_alone_is_the_overall_row_of_all_groups():
    """Compare's equal-budget table needs the overall rows only (it bootstrapped every question type too): asked
    for them alone, they are exactly the first rows of the full table."""
    full = significance.comparison_rows(_rows(), "flat", "full", "evidence")
    alone = significance.comparison_rows(_rows(), "flat", "full", "evidence", by_type=False)
    assert list(alone["group"]) == ["overall"] and len(full) == 3
    assert pd.isna(alone.loc[0, "p_holm"]) and pd.isna(full.loc[0, "p_holm"])  # Holm adjusts the types only
    pd.testing.assert_frame_equal(alone.drop(columns="p_holm"), full.head(1).drop(columns="p_holm"))


def test_whiskers_are_escaped_and_static():
    rows = significance.comparison_rows(_rows().replace({"temporal": "<b>x</b>"}), "flat", "full", "accuracy")
    svg = significance.whisker_svg(rows)
    assert svg.startswith("<svg") and "<b>x" not in svg and "&lt;b&gt;x" in svg and "<script" not in svg
    assert svg.count("<circle") == 3 and "&lt;b&gt;x&lt;/b&gt; (n=10)" in svg  # one dot per group, n in its label


def test_stale_counts_and_rows():
    frame = _rows()
    counts = review.counts_table(frame, ["full", "flat"]).set_index("variant")
    assert counts.loc["flat", STALE] == 1 and counts.loc["full", STALE] == 0
    assert counts.loc["full", ROLLBACK_MISSED] == 0
    assert counts.loc["full", "evidence complete"] == "16 of 20 (80.0%)"
    flagged = review.category_rows(frame, STALE)
    assert list(flagged["why"]) == ["says March 3"]
    assert review.review_text(flagged.iloc[0].to_dict()) == STALE
    # the Failures flag names the rule that fired (issue 39); its why names the edge, the slot and the reference
    assert review.review_text({**flagged.iloc[0].to_dict(), "stale_rule": "forest rule"}) == f"{STALE} (forest rule)"
    assert review.evidence_text(None) == "—" and review.evidence_text(True) == "complete"
    assert "superseded" in review.explain(STALE)


def test_annotation_text_filters_and_choices(fresh_store):
    row = {"label": "judge wrong", "note": "fine", "annotated_by": "ana", "annotated_at": "2026-01-02 10:00:00",
           "annotation_run": "r0", "run_id": "r1"}
    assert notes_view.annotation_text(row) == "judge wrong — fine (ana, 2026-01-02, from run r0)"
    assert notes_view.annotation_text({"label": None}) == ""
    frame = pd.DataFrame([{"label": "judge wrong"}, {"label": None}, {"label": "mine"}])
    assert len(notes_view.filter_label(frame, notes_view.NONE)) == 1
    assert len(notes_view.filter_label(frame, "mine")) == 1 and len(notes_view.filter_label(frame, "any")) == 3
    assert notes_view.filter_choices(frame) == ["any", "not annotated", "judge wrong", "mine"]
    fresh_store.save_failure_label("mine", "my own")
    options = notes_view.label_options(fresh_store)
    assert options[-1] == notes_view.NEW_LABEL and "mine" in options and STALE in options


def test_whatif_table_and_curve():
    units = [UnitRank("q1", "s", "t", 0, ("a", "b"), "a", 120, 36, False, True, True),
             UnitRank("q1", "s", "t", 1, ("c",), "c", 3, 36, True, True, True),
             UnitRank("q2", "s", "t", 0, ("d",), None, None, 36, False, False, True)]
    table = whatif.unit_table(units)
    assert list(table.columns) == list(whatif.TABLE_COLUMNS)
    assert table.iloc[0]["found"] == "yes, by discovery" and table.iloc[0]["BM25 rank (= k needed)"] == 120
    assert "never" in set(table["BM25 rank (= k needed)"])
    curve = k_curve(units, ks=(12, 36, 200))
    text = whatif.curve_text(curve)
    assert "66.7% of 3 gold units at k = 36" in text and "k = 120" in text and "1 unit(s)" in text
    svg = whatif.curve_svg(curve)
    assert svg.count("<circle") == 3 and "<script" not in svg  # a point per k


def _primary_rows(measure):
    from tmem.analysis import verdicts as vd

    rows = pd.DataFrame([  # hand-made: 2 answerable questions x 2 variants, one abstention, one error
        {"variant": "a", "scope": "s", "question_id": "q1", "qtype": "t", "status": "ok", "correct": True, "units": 2,
         "units_in_context": 2, "failure": None, "evidence_failure": None, "evidence_failure_detail": None},
        {"variant": "a", "scope": "s", "question_id": "q2", "qtype": "t", "status": "ok", "correct": True, "units": 1,
         "units_in_context": 0, "failure": None, "evidence_failure": "anchor miss",
         "evidence_failure_detail": "unit ['m7'] not among the anchors", "stale": True, "stale_detail": "x"},
        {"variant": "a", "scope": "s", "question_id": "q3", "qtype": "abstention", "status": "ok", "correct": False,
         "units": None, "units_in_context": None, "failure": None, "evidence_failure": None,
         "evidence_failure_detail": None},
        {"variant": "a", "scope": "s", "question_id": "q4", "qtype": "t", "status": "error", "correct": None,
         "units": 1, "units_in_context": 0, "failure": None, "evidence_failure": None,
         "evidence_failure_detail": None, "error": "answer model: down"}])
    return vd.with_primary(rows, measure)


def test_evidence_categories_count_lost_units_not_the_stand_ins_verdict():
    from tmem.analysis import verdicts as vd
    from tmem.viz.batch import review

    rows = _primary_rows(vd.EVIDENCE)
    counts = review.category_counts(rows, vd.EVIDENCE)
    assert counts == {"anchor miss": 1, vd.COMPLETE: 1, vd.NOT_SCORED: 1,
                      "stale — states the superseded state": 1, vd.ERROR: 1}
    assert set(counts) <= set(review.CATEGORY_EXPLAIN) | {"anchor miss"}
    assert list(review.in_category(rows, "anchor miss", vd.EVIDENCE)["question_id"]) == ["q2"]
    table = review.failure_table(rows, vd.EVIDENCE)
    assert list(table["question_id"]) == ["q2", "q4", "q1", "q3"]  # none, error, complete, not scored last
    assert table.loc[0, "failure_detail"] == "unit m7 not among the anchors"
    assert table.loc[0, "evidence in context"] == "0 of 1 units" and table.loc[3, "evidence in context"] == "—"


def test_accuracy_categories_explain_a_wrong_answer_without_gold_evidence():
    from tmem.analysis import verdicts as vd
    from tmem.viz.batch import review

    rows = _primary_rows(vd.ACCURACY)
    counts = review.category_counts(rows, vd.ACCURACY)
    assert counts[review.NO_EVIDENCE_WRONG] == 1 and counts[vd.CORRECT] == 2 and "unattributed" not in counts
    assert review.NO_EVIDENCE_WRONG in review.CATEGORY_EXPLAIN
