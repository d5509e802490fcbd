"""tmem.viz.question.evidence: statuses, recovered messages, bands, conversation context, funnel."""
from __future__ import annotations

from tmem.viz.question.evidence import (
    band_messages,
    band_options,
    conversation_around,
    evidence_messages,
    funnel_table,
    recovered_table,
    statuses,
)


def test_statuses(golden_trace):
    trace, gold, _ = golden_trace
    st = statuses(trace, gold)
    assert "m04" in st.recovered and "m04" not in st.anchors and "m04" in st.gold
    assert st.of("m04") == ["recovered", "gold"]
    assert not st.anchors & st.recovered


def test_recovered_table_explains_the_update(golden_trace):
    trace, gold, frame = golden_trace
    table = recovered_table(trace, frame, gold)
    assert set(table["message_id"]) == set(trace.evidence_ids) - {a.message_id for a in trace.anchors}
    row = table.set_index("message_id").loc["m04"]
    assert row["gold"] and row["label"] in ("KEY", "SUPPORT") and row["reason"] and row["rank"] >= 1
    assert row["window"] == 0
    wider = recovered_table(trace, frame, gold, include_rejected=True)
    assert len(wider) >= len(table)


def test_band_messages_follow_the_window(golden_trace):
    trace, gold, frame = golden_trace
    options = band_options(trace)
    accepted = next(f"C{c.cluster_id}" for c in trace.clusters if c.accepted)
    assert "accepted" in options[accepted]
    inside = band_messages(trace, frame, accepted, gold)
    assert "m04" in set(inside["id"]) and set(inside["topic"]) == {"launch"}
    assert "status" in inside.columns
    assert band_messages(trace, frame, "C999", gold).empty


def test_evidence_messages_cover_every_touched_message(golden_trace):
    trace, gold, frame = golden_trace
    listed = set(evidence_messages(trace, frame, gold)["id"])
    assert {a.message_id for a in trace.anchors} <= listed and "m04" in listed


def test_conversation_around(golden_trace):
    trace, gold, frame = golden_trace
    part = conversation_around(frame, "m04", trace, gold, before=2, after=1)
    assert list(part["id"]) == ["m02", "m03", "m04", "m05"]
    assert part.loc[part["focus"], "id"].tolist() == ["m04"]
    mixed = conversation_around(frame, "m04", same_topic=False, before=1, after=1)
    assert len(mixed) == 3
    assert conversation_around(frame, "nope").empty


def test_funnel_table(golden_trace):
    trace, gold, _ = golden_trace
    funnel = funnel_table(trace, gold)
    assert list(funnel["stage"]) == ["gold", "anchors", "windows", "selected", "forest", "after_compression"]
    assert funnel.set_index("stage").loc["anchors", "units"] == 0
    assert funnel.set_index("stage").loc["windows", "change"] == 1
