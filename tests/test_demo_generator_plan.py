"""The demo's typed gold edges from the generator's plan (tmem/demo/planned.py through generator.planned_sidecar),
written beside a generated corpus by scripts/demo_gold_edges.py: scored, never fitted on."""
from tmem.demo import generate
from tmem.demo.generator import planned_sidecar as build
from tmem.types import EXPAND, UPDATE


def test_the_demo_gold_edges_follow_the_generator_plan():
    """The same corpus as `generate`, and the curated revision is a gold UPDATE of the decision it replaces (not of
    the objection it replies to); its acknowledgements EXPAND it."""
    data, edges = build(7, 3000, 1)
    assert data.messages == generate(7, 3000, 1).messages
    by_child = {e["child"]: (e["parent"], e["relation"]) for e in edges}
    assert by_child["Msg_2100"] == ("Msg_1497", UPDATE) and by_child["Msg_2094"] == ("Msg_1497", EXPAND)
    assert by_child["Msg_2104"] == ("Msg_2100", EXPAND) and by_child["Msg_2096"] == ("Msg_2094", EXPAND)
    assert sum(r == UPDATE for _, r in by_child.values()) == 30 and len(edges) < len(data.messages) / 3
    _, with_roots = build(7, 3000, 1, chatter_roots=True)
    assert len(with_roots) == len(data.messages)  # every message: a parent, or a root when it replies to nothing
