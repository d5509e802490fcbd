"""The first screen's evidence card (tmem.viz.question.evidence_card): the verdict, the gold units each stage found,
the decisive recovered message; plain lines for a small model's answer and a stale answer; machine-made ids named
by author and time."""
from __future__ import annotations

from datetime import datetime

import pytest

from tmem.analysis.stale import STALE, Finding
from tmem.types import Answer, Gold
from tmem.viz.question import evidence_card as ec


def test_the_curated_question_card_names_the_stages_and_the_decisive_message(demo_traces):
    traces, gold, _ = demo_traces
    card = ec.evidence_card(traces["full"], gold, offline=True)
    assert card.verdict == "complete" and card.headline == "Evidence complete: both gold units reached the answer model"
    assert dict(card.steps) == {"BM25 anchors": "1 of 2", "discovery windows": "2 of 2", "forest": "2 of 2",
                                "answer context": "2 of 2"}
    assert [d.message_id for d in card.decisive] == ["Msg_2100"]
    assert "BM25 missed it" in card.decisive[0].how and "Msg_1497 → UPDATE → Msg_2100" in card.decisive[0].how
    assert "plumbing" not in card.note and not card.missing
    flat = ec.evidence_card(traces["flat"], gold, offline=True)
    assert dict(flat.steps)["forest"] == "off" and dict(flat.steps)["discovery windows"] == "off"
    assert dict(flat.steps)["answer context"] == "1 of 2", "a flat list is an answer context too, never off"


def test_no_gold_evidence_is_not_scored(demo_traces):
    traces, _, _ = demo_traces
    card = ec.evidence_card(traces["full"], Gold("q", "x", ()), offline=True)
    assert card.verdict is None and not card.steps and "Not scored" in card.headline


@pytest.mark.parametrize(("mid", "made"), [("Msg_2100", False), ("m04", False), ("D1_3", False), ("D1:3", False),
                                          ("random/1747299960.000000", True), ("1747299960.000000", True),
                                          ("#tmem-2024-03-01T10:00:00-alice", True)])
def test_machine_made_ids(mid, made):
    assert ec.machine_made(mid) is made


def test_a_machine_made_id_is_named_by_author_and_time():
    when = datetime(2025, 5, 15, 9, 6)
    assert ec.message_name("random/1747299960.000000", "ana", when) == "ana · May 15 09:06"
    assert ec.message_name("Msg_7", "ana", when) == "Msg_7"
    assert ec.message_name("random/1747299960.000000", None, None) == "random/1747299960.000000"


def test_a_small_models_answer_is_said_plainly():
    label = "recorded:qwen2.5-coder-1.5b-instruct-q4_k_m@http://127.0.0.1:1/v1 [temperature=0.2]"
    line = ec.small_model_line(Answer("forest", "x", label, False, "h", 1), False)
    assert line.startswith("A 1.5B model answered (its recorded replies, replayed)") and line.endswith("was wrong.")
    assert "qwen2.5-coder-1.5b-instruct-q4_k_m" in line and "@" not in line
    assert ec.small_model_line(Answer("forest", "x", "offline:extractive-answerer", True, "h", 1), False) is None
    assert ec.small_model_line(Answer("forest", "x", "openai:gpt-4o-mini", False, "h", 1), False) is None
    assert ec.model_size("llama-3.1-70b-instruct") == "70B" and ec.model_size("smollm2-135m") is None


def test_a_stale_answer_names_the_state_repeated_and_what_replaced_it():
    texts = {"m1": "We ship on Friday with the old installer.", "m2": "Change of plan: we ship on Monday instead."}
    line = ec.stale_line(Finding(STALE, "d", ("m1", "m2"), "forest UPDATE"), None, texts)
    assert "repeats m1" in line and "which m2 replaced" in line and "Monday" in line
    gold = Gold("q", "Monday", (("m2",),), superseded="Friday")
    line = ec.stale_line(Finding(STALE, "d", (), "gold superseded"), gold, texts)
    assert "superseded state “Friday”" in line and "replaced by “Monday”" in line
    # the rule that fired and the reference chain it read (issue 39)
    found = Finding(STALE, "d", ("m1", "m2"), "forest UPDATE", "forest rule", "reference: full variant's forest")
    assert ec.stale_line(found, None, texts).endswith("(forest rule; reference: full variant's forest).")
    found = Finding(STALE, "d", (), "gold superseded", "gold rule", "reference: gold chain")
    assert "replaced by “Monday” (gold rule; reference: gold chain)." in ec.stale_line(found, gold, texts)
