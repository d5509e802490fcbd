"""The Structuring view model's note on who built a forest: an offline stand-in says so, with the figures it earned on
held-out cases (the same figures docs/evaluation.md reports)."""
from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from tmem.types import ROOT, UPDATE, ForestNode, Question, StageTrace, Trace, Usage
from tmem.viz.question.structuring import STAND_IN_QUALITY, stand_in_note

NODES = (ForestNode(1, 0, ROOT, 0, 1, "m1", datetime(2025, 3, 1), "ann", "launch on march 20"),
         ForestNode(2, 1, UPDATE, 1, 1, "m2", datetime(2025, 3, 2), "bob", "launch moved to april 3"))
DOCS = Path(__file__).resolve().parent.parent / "docs" / "evaluation.md"


def _trace(backend: str, offline: bool, nodes=NODES) -> Trace:
    stage = StageTrace("structuring", 0.01, {}, Usage(), backend, offline)
    return Trace(Question("q", "s", "When is the launch?"), "full", "cfg", "c", nodes=nodes, stages=(stage,))


def test_an_offline_forest_names_its_role_as_a_stand_in_with_its_held_out_figures():
    note = stand_in_note(_trace("offline:fitted-relation", True))
    assert note.startswith("The edges were built by offline:fitted-relation, an offline stand-in")
    assert "UPDATE precision 0.520, recall 0.473" in note and "approximate" in note
    masked = stand_in_note(_trace("offline:state-relation; hidden from the role: author", True))
    assert "built by offline:state-relation, an offline" in masked and "a baseline rule" in masked


@pytest.mark.parametrize("trace", [_trace("openai:gpt@https://x/v1 [temperature=0]", False),
                                   _trace("offline:fitted-relation", True, nodes=()),
                                   replace(_trace("offline:fitted-relation", True), stages=())])
def test_no_note_for_a_language_model_or_without_a_forest(trace):
    assert stand_in_note(trace) is None


def test_the_quoted_figures_are_the_ones_the_docs_report():
    """The UI quotes the sealed held-out row of docs/evaluation.md's look for the current version (its cases/test
    row, one cell per role): a re-measured figure must change both."""
    docs = DOCS.read_text(encoding="utf-8")
    look = docs[docs.index("**The look for this version"):docs.index("The look before")]
    cells = re.search(r"^\| cases/test \(\d+\) \|(.*)$", look, re.M).group(1).split("|")
    columns = {"offline:revision-first": 0, "offline:fitted-relation": 1}
    for name, quality in STAND_IN_QUALITY.items():
        precision, recall = re.search(r"precision ([\d.]+), recall ([\d.]+)", quality).groups()
        assert f"{precision}/{recall}" in cells[columns[name]], (name, precision, recall, cells)


def test_the_confusion_the_misses_and_each_child_once():
    from tmem.evaluation.links import LinkScore
    from tmem.viz.question.structuring import confusion_table, edge_table, latest_rows, miss_summary

    frame = confusion_table({"UPDATE": {"ROOT": 2, "UPDATE right parent": 1}, "ROOT": {"ROOT": 3,
                                                                                       "UPDATE right parent": 0}})
    assert list(frame.columns) == ["gold", "ROOT", "UPDATE right parent"] and list(frame["ROOT"]) == [2, 3]
    assert miss_summary({"chain-tip": 1, "rooted-revision": 3, "false-update": 0}) == \
        "Misses by class: rooted-revision 3, chain-tip 1."
    assert miss_summary({"chain-tip": 0}) == "Misses by class: none."
    row = {"child": "m2", "expected_parent": ["m1"], "expected": UPDATE, "built_parent": None, "built": ROOT,
           "confidence": 0.4, "right": False, "miss": "rooted-revision", "reason": ""}
    newer, older = LinkScore("r", rows=[row]), LinkScore("r", rows=[{**row, "built": UPDATE, "right": True,
                                                                      "built_parent": "m1", "miss": None}])
    rows = latest_rows([("s", newer), ("s", older), ("t", older)])  # m2 of scope s once: the first score's
    assert [(r["scope"], r["miss"]) for r in rows] == [("s", "rooted-revision"), ("t", None)]
    edges = edge_table(newer, {})
    assert edges.loc[0, "miss"] == "rooted-revision" and list(edges.columns[:2]) == ["right", "miss"]
