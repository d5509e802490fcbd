"""Gold structuring edges of GroupMemBench-layout corpora: derived from reply_to / decision annotations, overridden
by a gold_edges.jsonl sidecar inside the imported folder; bad sidecar lines name file, line and field; the
generator's annotations never reach the messages."""
import json

import pytest

from tmem.corpora.groupmembench import load_groupmembench
from tmem.types import CorpusError

RECORDS = [
    {"msg_node": "M1", "content": "Code freeze Thursday 18:00.", "author": "U1", "timestamp": "2025-03-10T09:00:00",
     "reply_to": None, "topic": "freeze", "is_decision_point": True, "decision_type": "new"},
    {"msg_node": "M2", "content": "Thursday is too early?", "author": "U2", "timestamp": "2025-03-11T09:00:00",
     "reply_to": "M1", "topic": "freeze", "is_decision_point": False},
    {"msg_node": "M3", "content": "Freeze moves to Tuesday.", "author": "U1", "timestamp": "2025-03-12T09:00:00",
     "reply_to": "M2", "topic": "freeze", "is_decision_point": True, "decision_type": "changed",
     "decision_change_metadata": "{'original_decision': 'Code freeze Thursday 18:00', 'changed_to': 'Tuesday'}"},
    {"msg_node": "M4", "content": "Lunch?", "author": "U3", "timestamp": "2025-03-12T10:00:00", "reply_to": None,
     "topic": "misc", "is_noise": True},
]


def layout(root, sidecar=None):
    folder = root / "data" / "final" / "Case"
    folder.mkdir(parents=True)
    (folder / "synthetic_domain_channels_rolevariants_Case.json").write_text(json.dumps({"release": RECORDS}))
    if sidecar is not None:
        (root / "gold_edges.jsonl").write_text("".join(json.dumps(line) + "\n" for line in sidecar))
    return root


def test_derived_edges_find_the_original_decision(tmp_path):
    data = load_groupmembench(layout(tmp_path)).data
    assert sorted(data.links) == [("Case", "M1", "M1", "ROOT"), ("Case", "M2", "M1", "EXPAND"),
                                  ("Case", "M3", "M1", "UPDATE"),  # the changed decision's original, not M2
                                  ("Case", "M4", "M4", "ROOT")]  # noise that replies to nothing starts nothing
    fields = {f for m in data.messages for f, v in vars(m).items() if v is not None}
    assert not fields & {"is_decision_point", "decision_type", "decision_change_metadata", "is_noise"}


def test_the_sidecar_overrides_per_child(tmp_path):
    sidecar = [{"scope": "Case", "child": "M3", "parent": "M1", "relation": "UPDATE", "note": "revision"},
               {"scope": "Case", "child": "M4", "parent": None, "relation": "ROOT", "note": "noise"}]
    imported = load_groupmembench(layout(tmp_path, sidecar))
    assert ("Case", "M4", "M4", "ROOT") in imported.data.links and len(imported.data.links) == 4
    assert any("2 hand-annotated gold edge(s)" in n for n in imported.notes)


def test_a_sidecar_beside_a_single_file_is_not_read(tmp_path):
    root = layout(tmp_path, [{"scope": "Case", "child": "M2", "parent": None, "relation": "ROOT"}])
    single = load_groupmembench(root / "data" / "final" / "Case" / "synthetic_domain_channels_rolevariants_Case.json")
    assert ("Case", "M2", "M2", "ROOT") not in single.data.links and ("Case", "M2", "M1", "EXPAND") in single.data.links


@pytest.mark.parametrize("line,message", [
    ({"scope": "Nope", "child": "M1", "parent": None, "relation": "ROOT"}, "field 'scope'"),
    ({"scope": "Case", "child": "M9", "parent": None, "relation": "ROOT"}, "field 'child'"),
    ({"scope": "Case", "child": "M2", "parent": "M1", "relation": "MERGE"}, "field 'relation'"),
    ({"scope": "Case", "child": "M2", "parent": None, "relation": "EXPAND"}, "field 'parent'"),
    ({"scope": "Case", "child": "M1", "parent": "M3", "relation": "EXPAND"}, "is not earlier"),
    # who made the edge is text too (a non-string origin was counted as hand-annotated without a word)
    ({"scope": "Case", "child": "M2", "parent": "M1", "relation": "EXPAND", "origin": {"by": "x"}}, "field 'origin'"),
])
def test_bad_sidecar_lines_name_file_line_and_field(tmp_path, line, message):
    with pytest.raises(CorpusError, match=rf"gold_edges.jsonl:1: .*{message}"):
        load_groupmembench(layout(tmp_path, [line]))


def test_stored_gold_edges_roundtrip(tmp_path):
    from tmem.store import Store

    store = Store(tmp_path / "g.duckdb")
    store.replace_corpus("case", load_groupmembench(layout(tmp_path)).data, format="groupmembench")
    assert sorted(store.gold_edges("case", "Case")) == [("M1", None, "ROOT"), ("M2", "M1", "EXPAND"),
                                                        ("M3", "M1", "UPDATE"), ("M4", None, "ROOT")]
    assert sorted(store.gold_links("case", "Case")) == [("M2", "M1"), ("M3", "M1")]
    assert store.counts("case")["gold_links"] == 2


def test_the_import_note_says_who_made_the_sidecar_edges(tmp_path):
    """Issue 42: a generated corpus's planned edges were announced as "hand-annotated gold edge(s)"."""
    from tmem.corpora.gold_edges import sidecar_note

    path = tmp_path / "gold_edges.jsonl"
    assert sidecar_note(path, 5, 0) == f"{path}: 5 hand-annotated gold edge(s)"
    assert sidecar_note(path, 5, 5) == (f"{path}: 5 gold edge(s) planned by the demo generator (a generated corpus: "
                                        "scored, never fitted on)")
    assert sidecar_note(path, 5, 2).endswith("never fitted on); 3 hand-annotated gold edge(s)")
    assert sidecar_note(path, 0, 0) == f"{path}: 0 hand-annotated gold edge(s)"
