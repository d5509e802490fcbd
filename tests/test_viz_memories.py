"""A baseline's context on the Question view (issue 40): what the memory system recalled, the gold its sources
hold, what it cost, and T-Mem's stages it lacks shown as "not part of this system", never as lost evidence.
A hand-built trace with hand-computed expectations, then the page on a stored one (AppTest)."""
from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from tmem.analysis.funnel import NOT_PART, RECALL_MISS, first_loss
from tmem.types import (
    Anchor,
    Answer,
    Cut,
    Gold,
    Memory,
    Question,
    StageTrace,
    Trace,
    Usage,
    Verdict,
)
from tmem.viz.question import answers as answer_view
from tmem.viz.question import evidence, memories
from tmem.viz.question.evidence_card import evidence_card

SYSTEM = "adaptation of HippoRAG 2 (test)"


def memory_trace() -> Trace:
    """m1 a message; a fact derived from m2 and m3; a summary with no sources; m9 cut at B."""
    items = (Memory(1, "Launch moved to Oct 1.", ("m1",), "passage", False, 0.9),
             Memory(2, "The team agreed on vendor B.", ("m2", "m3"), "fact", True, 0.7),
             Memory(3, "Planning went on for weeks.", (), "summary", True, None),
             Memory(4, "Budget is 40k.", ("m9",), "passage", False, 0.2, in_context=False))
    ids = ("m1", "m2", "m3", "m9")
    stage = StageTrace("memory", 0.5, {"ingestion_prompt_tokens": 1200, "ingestion_completion_tokens": 300,
                                       "ingestion_calls": 12, "ingestion_cached_calls": 2, "ingestion_reused": 1},
                       Usage(40, 5, 2, 0, "server"), f"{SYSTEM}; construction m; embedder e", False)
    return Trace(Question("q", "s", "When is the launch?"), "hipporag2", "h", "c",
                 anchors=tuple(Anchor(i, 1.0, r) for r, i in enumerate(ids, start=1)), evidence_ids=ids,
                 cuts=(Cut("m9", "flat", 0, 20, "cut at B"),),
                 answers=(Answer("flat", "Oct 1", "openai:m", False, "p", 30),),
                 verdicts=(Verdict("flat", False, "", "j", False),),
                 stages=(stage, StageTrace("answer", 0.1, {}, Usage(), "openai:m", False)), memories=items)


GOLD = Gold("q", "Oct 8", (("m2",), ("m9",), ("m7",)))


def test_the_funnel_counts_the_systems_recall_and_says_what_it_lacks():
    table = evidence.funnel_table(memory_trace(), GOLD).set_index("stage")
    assert table.loc["anchors", "label"] == f"recalled by {SYSTEM}"
    assert table.loc["anchors", "units"] == 2  # m2 and m9 are sources; m7 is not
    for stage in ("windows", "selected", "forest"):
        assert NOT_PART in table.loc[stage, "label"] and pd.isna(table.loc[stage, "units"])
    assert table.loc["after_compression", "units"] == 1  # m9's line was cut at B
    assert table.loc["after_compression", "change"] == -1  # against the recall, not a stage it does not have
    assert answer_view.stages_not_part(memory_trace()) == {"windows", "selected", "forest"}
    assert answer_view.stages_off(memory_trace()) == frozenset()


def test_a_unit_the_system_did_not_recall_is_its_miss_not_an_anchor_miss():
    lost = first_loss(memory_trace(), GOLD, {})
    assert lost.category == RECALL_MISS and "['m7']" in lost.detail and SYSTEM in lost.detail


def test_the_card_names_the_system_and_what_it_cannot_credit():
    card = evidence_card(memory_trace(), GOLD, offline=True)
    assert card.verdict == "partial"
    assert card.steps == ((f"recalled by {SYSTEM}", "2 of 3"), ("discovery windows", NOT_PART),
                          ("forest", NOT_PART), ("answer context", "1 of 3"))
    assert f"what {SYSTEM} put in front of the answer model" in card.note
    assert "1 item in the context is text the system derived with no source message ids" in card.note


def test_the_recalled_items_with_their_sources_gold_and_cost():
    summary = memories.memory_summary(memory_trace(), GOLD)
    assert summary.system == SYSTEM
    assert summary.items == ("4 items: 2 derived by the system, 3 traced to source messages; 3 whole in the answer "
                             "context")
    assert summary.gold.startswith("gold units among the sources of the items in the context: 1 of 3")
    assert "not credited" in summary.gold
    assert summary.cost == ("construction 1,200 prompt + 300 completion tokens over 12 calls (2 from the cache), "
                            "built by an earlier question (paid once per scope); this question's recall: 40 prompt "
                            "+ 5 completion tokens over 2 calls")
    table = memories.memory_table(memory_trace(), GOLD)
    assert list(table["gold"]) == ["", "gold", "", "gold"]
    assert list(table["in context"]) == ["whole", "whole", "whole", "cut at B"]
    assert table.loc[2, "sources"] == "— (no source ids)" and table.loc[1, "kind"] == "fact · derived"


def test_t_mems_own_trace_is_unchanged():
    trace = replace(memory_trace(), stages=(StageTrace("seed_retrieval", 0, {}, Usage(), "b", True),), memories=())
    assert memories.memory_summary(trace, GOLD) is None
    assert first_loss(trace, GOLD, {}).category != RECALL_MISS
    assert "not part" not in " ".join(evidence.funnel_table(trace, GOLD)["label"])


def _store_baseline_trace(app_db) -> str:
    """The golden q1's stored `full` trace re-stored as a memory system's (variant hipporag2): its evidence as the
    system's recalled passages, one derived fact with no sources."""
    from tmem.store import Store

    store = Store(app_db)
    row = store.trace_index("golden").query("variant == 'full' and question_id == 'q1'").iloc[-1]
    trace = store.load_trace("golden", row.scope, row.question_id, row.variant, row.config_hash, row.backend)
    items = tuple(Memory(r, f"passage <b>{r}</b>", (i,), "passage", False, 1.0 / r)
                  for r, i in enumerate(trace.evidence_ids, start=1))
    items += (Memory(len(items) + 1, "A derived fact", (), "fact", True),)
    stage = StageTrace("memory", 0.2, {"ingestion_prompt_tokens": 500, "ingestion_calls": 3}, Usage(),
                       f"{SYSTEM}; construction m; embedder e", False)
    keep = tuple(s for s in trace.stages if s.name in ("answer", "judge"))
    store.save_trace(replace(trace, variant="hipporag2", windows=(), selections=(), decisions=(), edges=(), nodes=(),
                             spans=(), stages=(stage, *keep), memories=items), row.backend)
    store.close()
    return row.config_hash, row.backend


@pytest.mark.app
def test_the_question_page_shows_a_baseline_context_and_no_forest(app, app_db):
    config, backend = _store_baseline_trace(app_db)
    pin = {"corpus": "golden", "scope": "golden", "q": "q1", "variant": "full", "trace_variant": "hipporag2",
           "trace_config": config, "trace_backend": backend}
    at = app("pages/question.py", **pin)
    assert not at.exception
    shown = "\n".join(m.value for m in at.markdown).replace("\\", "")  # the Markdown source: drop its escapes
    assert f"recalled by {SYSTEM}" in shown and NOT_PART in shown
    at.query_params["tab"] = "Recovered"
    at = at.run()
    assert not at.exception
    assert any(f"What {SYSTEM} recalled" in m.value.replace("\\", "") for m in at.markdown)
    table = next(d.value for d in at.dataframe if "sources" in d.value.columns)
    assert table["kind"].iloc[-1] == "fact · derived" and table["sources"].iloc[-1] == "— (no source ids)"
    assert any("construction 500 prompt" in c.value.replace("\\", "") for c in at.caption)
    at.query_params["tab"] = "Forest"
    at = at.run()
    assert any("A forest is not part of this system" in i.value for i in at.info)
