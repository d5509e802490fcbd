"""Paired significance (tmem.analysis.significance): exact McNemar and the paired bootstrap, with expectations
computed by hand, and the rule that an interval spanning 0 is never a win."""
import math

import numpy as np
import pandas as pd
import pytest

from tmem.analysis import significance as sig


def test_mcnemar_exact_by_hand():
    # b = 3, c = 10: n = 13, tail = C(13,0)+C(13,1)+C(13,2)+C(13,3) = 1+13+78+286 = 378; p = 2*378/2^13
    assert sig.mcnemar_exact(3, 10) == pytest.approx(756 / 8192)
    assert sig.mcnemar_exact(10, 3) == sig.mcnemar_exact(3, 10)
    assert sig.mcnemar_exact(0, 5) == pytest.approx(2 / 32)  # 2 * C(5,0) / 2^5
    assert sig.mcnemar_exact(2, 2) == 1.0  # 2 * (1+4+6)/16 > 1: capped
    assert sig.mcnemar_exact(0, 0) == 1.0  # no discordant pair: no evidence of a difference
    with pytest.raises(ValueError):
        sig.mcnemar_exact(-1, 2)


def test_mcnemar_matches_scipy_binomtest():
    from scipy.stats import binomtest

    for b, c in ((3, 10), (0, 7), (12, 30), (25, 25), (1, 0)):
        assert sig.mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue)


def test_bootstrap_of_a_degenerate_sample_has_a_zero_width_interval():
    assert sig.bootstrap_ratio_delta([1, 1, 1]) == (1.0, 1.0, 1.0)
    assert sig.bootstrap_ratio_delta([0, 0, 0, 0]) == (0.0, 0.0, 0.0)
    # recall: every question recovers the same share more (1 of 2 units, 2 of 4): every resample gives 0.5
    assert sig.bootstrap_ratio_delta([1, 2], [2, 4]) == (0.5, 0.5, 0.5)
    assert all(math.isnan(v) for v in sig.bootstrap_ratio_delta([]))


def test_bootstrap_of_two_questions_by_hand():
    # d = (1, 0): a resample of 2 is (1,1) -> 1, (0,0) -> 0 (each p = 1/4) or mixed -> 0.5 (p = 1/2), so the
    # 2.5 % and 97.5 % quantiles of 2000 resamples are 0 and 1
    delta, low, high = sig.bootstrap_ratio_delta([1, 0], rng=np.random.default_rng(0))
    assert (delta, low, high) == (0.5, 0.0, 1.0)
    # recall, 2 units each: recovered differences 2 and 0 -> 4/4, 0/4 or 2/4
    assert sig.bootstrap_ratio_delta([2, 0], [2, 2], rng=np.random.default_rng(0)) == (0.5, 0.0, 1.0)


def test_bootstrap_is_seeded_and_covers_the_delta():
    d = [1] * 12 + [0] * 30 + [-1] * 6
    first = sig.bootstrap_ratio_delta(d, rng=np.random.default_rng(5))
    assert first == sig.bootstrap_ratio_delta(d, rng=np.random.default_rng(5))
    delta, low, high = first
    assert delta == pytest.approx(6 / 48) and low < delta < high
    # the normal approximation of the mean difference: sd = sqrt((18/48) - (6/48)^2) / sqrt(48) ~ 0.0857
    assert high - low == pytest.approx(2 * 1.96 * 0.0857, abs=0.04)


@pytest.mark.parametrize("n, low, high, p, expected", [
    (10, 0.05, 0.3, 0.01, sig.WIN), (10, -0.3, -0.05, 0.01, sig.LOSS),
    (10, -0.05, 0.3, 0.01, sig.INCONCLUSIVE),  # spans 0: never a win
    (3, 1.0, 1.0, 0.25, sig.INCONCLUSIVE),  # 3 of 3 gained: the bootstrap is sure, McNemar is not
    (10, 0.0, 0.0, 1.0, sig.INCONCLUSIVE), (10, 0.1, 0.2, None, sig.WIN),  # recall: no McNemar
    (0, math.nan, math.nan, None, sig.NO_DATA)])
def test_outcome(n, low, high, p, expected):
    assert sig.outcome(n, low, high, p) == expected


def _rows(outcomes, variant, qtype="t"):
    return [{"scope": "s", "question_id": f"q{i}", "variant": variant, "qtype": qtype, "correct": c,
             "evidence_complete": c, "units": 2, "units_recovered": 2 * int(bool(c))}
            for i, c in enumerate(outcomes)]


def test_paired_deltas_pair_questions_and_count_discordant_pairs():
    # baseline right on q0..q3; variant right on q2..q9 (q10 unjudged for the variant: left out)
    base = _rows([True] * 4 + [False] * 7, "flat")
    var = _rows([False, False, True, True] + [True] * 6 + [None], "full")
    frame = pd.DataFrame(base + var)
    overall = sig.paired_deltas(frame, "full", "flat", "accuracy")[0]
    assert overall.n == 10 and (overall.gains, overall.losses) == (6, 2)
    assert overall.baseline == pytest.approx(0.4) and overall.variant == pytest.approx(0.8)
    assert overall.delta == pytest.approx(0.4)
    assert overall.p_mcnemar == pytest.approx(sig.mcnemar_exact(6, 2))  # 0.289: inconclusive although +40 pp
    assert overall.outcome == sig.INCONCLUSIVE
    recall = sig.paired_deltas(frame, "full", "flat", "recall")[0]
    assert recall.n == 11 and recall.p_mcnemar is None  # recall pairs every question with units (q10: 0 units)
    as_json = overall.as_json()
    assert {"delta", "ci_low", "ci_high", "p_mcnemar", "outcome", "n"} <= set(as_json)


def test_groups_are_per_type_and_seeded_independently():
    frame = pd.DataFrame(_rows([True, False, True, False], "a", "x") + _rows([True, True, True, False], "b", "x")
                         + [dict(r, question_id="y" + r["question_id"]) for r in
                            _rows([False, False, True], "a", "y") + _rows([True, True, True], "b", "y")])
    groups = sig.paired_deltas(frame, "b", "a", "evidence")
    assert [g.group for g in groups] == ["overall", "x", "y"] and [g.n for g in groups] == [7, 4, 3]
    only_x = sig.paired_deltas(frame[frame["qtype"] == "x"], "b", "a", "evidence")
    assert (only_x[1].ci_low, only_x[1].ci_high) == (groups[1].ci_low, groups[1].ci_high)


def test_a_missing_column_or_measure_is_one_clear_error():
    frame = pd.DataFrame(_rows([True], "a")).drop(columns="evidence_complete")
    with pytest.raises(ValueError, match="evidence_complete"):
        sig.paired_deltas(frame, "a", "a", "evidence")
    with pytest.raises(ValueError, match="unknown measure"):
        sig.paired_deltas(frame, "a", "a", "f1")


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 of m = 3: 3 * 0.01 = 0.03, 2 * 0.02 = 0.04, 1 * 0.04 = 0.04 (kept monotone)
    assert sig.holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert sig.holm([0.5, 0.3]) == pytest.approx([0.6, 0.6])  # 2 * 0.3 = 0.6, max(0.6, 0.5)
    assert sig.holm([0.9, 0.8, 0.7]) == [1.0, 1.0, 1.0]  # capped at 1
    assert sig.holm([None, 0.02]) == [None, 0.02]  # a group without a test is not in the family


def _five_types(gained_in_first: int) -> pd.DataFrame:
    """Five question types of 8 questions; the variant gains `gained_in_first` questions of the first type only."""
    rows = []
    for t in range(5):
        for i in range(8):
            key = {"scope": "s", "question_id": f"t{t}q{i}", "qtype": f"type{t}"}
            rows.append({**key, "variant": "base", "evidence_complete": False})
            rows.append({**key, "variant": "full", "evidence_complete": t == 0 and i < gained_in_first})
    return pd.DataFrame(rows)


def test_per_type_wins_are_holm_adjusted_and_the_overall_row_is_not():
    # type0: 6 of 8 gained, none lost: McNemar p = 2 / 2^6 = 0.03125, a win alone; Holm over 5 types: 0.156
    deltas = sig.paired_deltas(_five_types(6), "full", "base", "evidence", resamples=200)
    overall, first = deltas[0], deltas[1]
    assert first.group == "type0" and first.p_mcnemar == pytest.approx(2 / 64)
    assert first.p_holm == pytest.approx(5 * 2 / 64) and first.outcome == sig.INCONCLUSIVE
    assert overall.p_holm is None and overall.outcome == sig.WIN  # 6 of 40, p = 0.031: one test, unadjusted
    assert all(d.p_holm == 1.0 for d in deltas[2:])  # no discordant pair: p = 1
    assert first.as_json()["p_holm"] == pytest.approx(0.1562, abs=1e-4)
    # 8 of 8 gained: p = 2 / 256 = 0.0078, Holm 0.039 < 0.05: still a win after the adjustment
    strong = sig.paired_deltas(_five_types(8), "full", "base", "evidence", resamples=200)[1]
    assert strong.p_holm == pytest.approx(5 * 2 / 256) and strong.outcome == sig.WIN
