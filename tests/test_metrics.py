"""Key-evidence recall (paper App. A.4, Eq. 9-10) and accuracy, checked against values computed by hand."""
import math

import pytest

from tmem.evaluation.metrics import (
    Prices,
    Recall,
    accuracy_by_type,
    is_abstention,
    micro_recall,
    percentile,
    question_recall,
    recall_eligible,
    units_recovered,
)
from tmem.types import Gold, Question


def q(qid, qtype="multi_hop"):
    return Question(qid, "s", f"question {qid}?", None, qtype)


def test_a_unit_is_recovered_by_its_canonical_message_or_an_alternative():
    gold = Gold("q1", "x", (("m1", "m1b"), ("m2",), ("m3",)))
    assert units_recovered(gold, ["m1b", "m9"]) == 1  # the alternative counts (Eq. 9)
    assert units_recovered(gold, ["m1", "m1b", "m2"]) == 2  # both messages of one unit count once
    assert units_recovered(gold, []) == 0


def test_micro_recall_weights_questions_by_their_units():
    """q1: 3 units, 2 found; q2: 1 unit, 1 found -> micro 3/4 = 0.75 (the macro mean would be (2/3 + 1) / 2)."""
    g1 = Gold("q1", "x", (("a",), ("b",), ("c",)))
    g2 = Gold("q2", "y", (("d",),))
    total = micro_recall([(g1, ["a", "b", "z", "z"]), (g2, ["d"])])
    assert (total.recovered, total.units, total.questions) == (3, 4, 2)
    assert total.recall == pytest.approx(0.75)
    assert total.messages == 4 and total.mean_messages == 2.0  # duplicates counted once: {a, b, z} + {d}
    assert total.as_dict() == {"recall": 0.75, "questions": 2, "units": 4, "mean_messages": 2.0,
                               "chain_recall": None, "chains": 0}  # no question with a gold UPDATE chain


def test_complete_chain_recall_needs_every_state_of_the_chain():
    """Exp-5: a chain of original -> revision -> rollback counts only when all three were retrieved."""
    from tmem.analysis.chains import gold_chain

    gold = Gold("q", "x", (("m0",), ("m9",)))
    edges = [("r1", "m0", "UPDATE"), ("r2", "r1", "UPDATE"), ("m9", "r2", "UPDATE"), ("x", "m9", "EXPAND")]
    chain = gold_chain(gold, edges)
    assert chain == (("m0",), ("m9",), ("r1",), ("r2",))  # the two states and the revisions between them
    whole = question_recall(gold, ["m0", "r1", "r2", "m9"], chain)
    part = question_recall(gold, ["m0", "r1", "m9"], chain)  # every gold unit, but not the whole chain
    assert (whole.chains, whole.chains_complete) == (1, 1) and (part.chains, part.chains_complete) == (1, 0)
    assert part.recall == 1.0 and (whole + part).chain_recall == 0.5
    assert gold_chain(Gold("q", "x", (("a",),)), edges) is None  # no chain, no superseded state: not counted
    assert gold_chain(Gold("q", "x", (("a",), ("b",)), superseded="old"), ()) == (("a",), ("b",))


def test_question_recall_and_sum():
    r = question_recall(Gold("q", None, (("a",), ("b",))), ["b"]) + Recall(1, 1, 1, 3)
    assert (r.recovered, r.units, r.questions, r.messages) == (2, 3, 2, 4)


def test_empty_recall_is_nan_not_zero():
    assert math.isnan(Recall(0, 0, 0, 0).recall)
    assert Recall(0, 0, 0, 0).as_dict()["recall"] is None


@pytest.mark.parametrize("qtype,answer,expected", [
    ("abstention", "anything", True),
    ("adversarial", None, True),
    ("multi_hop", "There is no information available in the conversation to answer this question.", True),
    ("multi_hop", "March 17", False),
])
def test_abstention_questions_are_recognised(qtype, answer, expected):
    assert is_abstention(q("x", qtype), Gold("x", answer, (("m",),))) is expected


def test_recall_eligibility_needs_evidence_and_no_abstention():
    assert recall_eligible(q("a"), Gold("a", "x", (("m",),)))
    assert not recall_eligible(q("a"), Gold("a", "x", ()))
    assert not recall_eligible(q("a"), None)
    assert not recall_eligible(q("a", "abstention"), Gold("a", "x", (("m",),)))


def test_accuracy_by_type_by_hand():
    rows = [{"qtype": "temporal", "correct": True}, {"qtype": "temporal", "correct": False},
            {"qtype": "multi_hop", "correct": True}, {"qtype": "multi_hop", "correct": None},  # not judged
            {"qtype": None, "correct": False}]
    acc = accuracy_by_type(rows)
    assert list(acc) == ["multi_hop", "temporal", "untyped", "overall"]
    assert (acc["temporal"].correct, acc["temporal"].judged) == (1, 2)
    assert acc["multi_hop"].value == 1.0
    assert (acc["overall"].correct, acc["overall"].judged) == (2, 4) and acc["overall"].value == 0.5


def test_percentile_and_prices():
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([1.0], 95) == 1.0
    assert math.isnan(percentile([], 50))
    assert not Prices().configured
    assert Prices(2.0, 8.0).cost(1_000_000, 500_000) == pytest.approx(6.0)
