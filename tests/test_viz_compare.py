"""tmem.viz.batch.compare: only questions every variant answered, n, signed deltas, bars, evidence diff (by hand)."""
from __future__ import annotations

import re
from datetime import datetime

import pandas as pd
import pytest

from tmem.store import Store
from tmem.types import Gold, Question, Trace
from tmem.viz.batch import compare


def _row(variant, qid, correct, qtype="ku", status="ok", units=2, found=2):
    base = dict.fromkeys(Store.RUN_RESULT_COLUMNS)
    base.update(run_id="r", corpus="c", variant=variant, config_hash="h", backend="b", scope="s", question_id=qid,
                qtype=qtype, status=status, correct=correct, units=units, units_recovered=found)
    return base


@pytest.fixture
def results():
    # flat answered q1..q4; full only q1, q2 (+ q3 errored). Compared: q1, q2 only.
    return pd.DataFrame([_row("flat", "q1", False, found=0), _row("flat", "q2", True), _row("flat", "q3", True),
                         _row("flat", "q4", True, qtype="temporal"),
                         _row("full", "q1", True), _row("full", "q2", True, found=1),
                         _row("full", "q3", None, status="error")])


def test_only_questions_every_variant_answered(results):
    assert compare.answered(results, ["flat", "full"]) == {"flat": 4, "full": 2}
    common = compare.common_rows(results, ["flat", "full"])
    assert sorted(set(common["question_id"])) == ["q1", "q2"] and len(common) == 4


def test_summary_deltas_are_signed_points(results):
    table = compare.summary(results, "flat", ["full"]).set_index("question type")
    assert list(table.index) == ["all", "ku"]  # "temporal" had no common question
    assert table.loc["all", "n"] == 2
    assert table.loc["all", "flat acc"] == pytest.approx(0.5) and table.loc["all", "full acc"] == pytest.approx(1.0)
    assert table.loc["all", "Δ acc full"] == "+50.0 pp"
    # recall: flat 0+2 of 4 units, full 2+1 of 4
    assert table.loc["all", "Δ recall full"] == "+25.0 pp"
    assert compare.summary(results, "full", ["flat"]).set_index("question type").loc["all", "Δ acc flat"] == \
        "-50.0 pp"


@pytest.mark.parametrize("delta,text", [(0.0333, "+3.3 pp"), (-0.125, "-12.5 pp"), (0.0, "±0.0 pp"),
                                        (float("nan"), "—")])
def test_signed_pp(delta, text):
    assert compare.signed_pp(delta) == text


def test_delta_colour():
    assert "2b8a3e" in compare.delta_colour("+3.3 pp") and "c92a2a" in compare.delta_colour("-1.0 pp")
    assert compare.delta_colour("±0.0 pp") == "" and compare.delta_colour("—") == ""


def test_bar_chart_groups_one_bar_per_variant(results):
    table = compare.summary(results, "flat", ["full"])
    svg = compare.bar_svg(table, ["flat", "full"])
    bars = re.findall(r"<title>([^<]*) · (\w+): ([\d.]+)%</title>", svg)  # (question type, variant, value)
    assert [b for b in bars if b[1] == "full"] == [(t, "full", "100.0") for t in table["question type"]]
    assert len(bars) == 2 * len(table) and bars[0][:2] == ("all", "flat")  # grouped: flat then full per type
    assert ">all<tspan" in svg and ">n=2</tspan>" in svg


def _trace(ids):
    return Trace(Question("q", "s", "?"), "v", "h", "c", evidence_ids=tuple(ids))


def test_evidence_diff_gold_first_then_gained_then_lost():
    frame = pd.DataFrame({"id": ["a", "b", "c", "d", "e"], "timestamp": [datetime(2025, 1, d) for d in range(1, 6)],
                          "author": ["x"] * 5, "topic": [None] * 5, "text": list("ABCDE")})
    gold = Gold("q", "A", (("d",), ("b",)))
    diff = compare.evidence_diff(_trace(["a", "b", "c"]), _trace(["a", "d", "e"]), gold, frame)
    assert list(zip(diff["change"], diff["message_id"])) == [("gained", "d"), ("lost", "b"), ("gained", "e"),
                                                             ("lost", "c")]
    assert list(diff["gold"]) == [True, True, False, False] and set(diff["topic"]) == {"—"}
    assert compare.evidence_diff(_trace(["a"]), _trace(["a"]), gold, frame).empty


def test_evidence_drives_the_per_question_change_and_the_heatmap():
    from tmem.analysis import verdicts as vd

    rows = pd.DataFrame([
        {"variant": v, "scope": "s", "question_id": q, "qtype": "t", "status": "ok", "correct": c, "units": u,
         "units_in_context": h, "units_recovered": h, "failure": None, "config_hash": "h", "backend": "b"}
        for v, q, c, u, h in [("flat", "q1", True, 2, 0), ("full", "q1", False, 2, 2),
                              ("flat", "q2", True, 2, 2), ("full", "q2", True, 2, 1),
                              ("flat", "q3", False, None, None), ("full", "q3", True, None, None)]])
    aligned = compare.per_question(rows, "flat", "full", vd.EVIDENCE).set_index("question_id")
    assert aligned.loc["q1", "change"] == "improved" and aligned.loc["q2", "change"] == "regressed"
    assert aligned.loc["q3", "change"] == "missing"  # abstention: not scored on evidence
    matrix = compare.heatmap_frame(rows, ["flat", "full"], vd.EVIDENCE)
    assert matrix.loc["s / q1"].tolist() == [0.0, 1.0] and matrix.loc["s / q2"].tolist() == [1.0, 0.5]
    assert "s / q3" not in matrix.index
    table = compare.summary(rows, "flat", ["full"], vd.EVIDENCE).set_index("question type")
    assert table.loc["all", "n"] == 2 and table.loc["all", "Δ evidence full"] == "±0.0 pp"  # 1 of 2 each


def test_identical_variants_are_named_with_why_and_the_demo_says_its_source():
    import pandas as pd

    from tmem.viz.batch.compare import identical_variants, source_note

    rows = pd.DataFrame([{"scope": "s", "question_id": f"q{i}", "variant": v, "evidence_messages": 36 + (v == "full"),
                          "units_in_context": i % 2} for i in range(4) for v in ("flat", "no-discovery", "full")])
    same = identical_variants(rows, ["flat", "no-discovery", "full"])
    assert [(a, b) for a, b, _ in same] == [("flat", "no-discovery")] and "all 4 shared questions" in same[0][2]
    assert source_note("demo", "demo", 48).startswith("generated demo corpus, n = 48 questions")
    assert source_note("locomo", "demo", 48) == ""
