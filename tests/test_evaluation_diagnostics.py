"""Diagnostics of structuring against gold edges (tmem/evaluation/diagnostics/confusion.py): the confusion split by
right and wrong parent and the error class of each miss, computed by hand on a tiny revision chain and through
`links`."""
import json
from collections import Counter
from datetime import datetime

import pytest

from tmem.cli import main as cli
from tmem.evaluation.diagnostics.confusion import BUILT_CELLS, by_group, gold_chains, gold_replies, matrix, miss_class
from tmem.evaluation.links import gold_children, score_links
from tmem.models.base import RelationResult
from tmem.types import EXPAND, ROOT, UPDATE, Message, RelationChoice

# a venue revised twice (a -> b -> c), a question about the tip, a return to the first value, a note on it, an aside,
# the return confirmed
CHAIN = [Message(mid, "Offsite", text, datetime(2025, 5, day, 9), author, topic="offsite")
         for mid, day, author, text in [
             ("a", 1, "ana", "The offsite is in Hall A."),
             ("b", 2, "ana", "Hall A is booked, the offsite moves to Hall B."),
             ("c", 3, "ben", "Hall B flooded; we are in Hall C now."),
             ("q", 4, "cat", "Does Hall C have a projector?"),
             ("x", 5, "ana", "Hall C fell through, back to Hall A."),
             ("y", 6, "ben", "Hall A has parking for twenty cars."),
             ("n", 7, "dan", "Who orders lunch?"),
             ("w", 8, "ana", "Hall A it is, final answer.")]]
EDGES = [("a", None, ROOT), ("b", "a", UPDATE), ("c", "b", UPDATE), ("q", "c", EXPAND), ("x", "c", UPDATE),
         ("y", "x", EXPAND), ("n", None, ROOT), ("w", "x", UPDATE)]
# what the scripted role builds, and the class each miss must get (module docstring of diagnostics)
BUILT = {"a": (None, ROOT), "b": (None, ROOT), "c": ("a", UPDATE), "q": ("c", UPDATE), "x": ("c", EXPAND),
         "y": ("c", EXPAND), "n": ("q", EXPAND), "w": ("y", EXPAND)}
EXPECTED_MISS = {"a": None, "b": "rooted-revision", "c": "chain-tip", "q": "false-update", "x": "expand-not-update",
                 "y": "chain-tip", "n": "wrong-parent", "w": "under-reply"}


class ScriptedRole:
    backend, offline = "test:scripted", True

    def label_pairs(self, question, child, candidates, scope):
        parent, relation = BUILT[child.id]
        return RelationResult(choices=() if parent is None else (RelationChoice(parent, relation, 0.9),))


def test_the_chain_of_each_child_is_its_gold_parents_ancestry_and_what_lies_under_them():
    parents = {c: {p} if p else set() for c, p, _ in EDGES}
    chains = gold_chains(parents)
    assert chains["b"] == frozenset() and chains["c"] == {"a"} and chains["x"] == {"a", "b"}
    assert chains["y"] == {"a", "b", "c"} and chains["n"] == frozenset()
    assert gold_chains({"u": {"v"}, "v": {"u"}}) == {"u": frozenset(), "v": frozenset()}  # a cycle ends
    below = gold_replies(parents)
    # under x: y and w; under c: q, x and what is under x; neither counts the child itself or its own subtree
    assert below["w"] == {"y"} and below["y"] == {"w"} and below["q"] == {"x", "y", "w"}
    assert below["x"] == {"q"} and below["b"] == below["c"] == below["n"] == frozenset()


@pytest.mark.parametrize("gold, parents, chain, built_parent, built, expected", [
    (UPDATE, {"b"}, {"a"}, "q", EXPAND, "under-reply"),  # q replies to b (below = {"q"})
    (EXPAND, {"b"}, {"a"}, "q", EXPAND, "under-reply"),
    (UPDATE, {"b"}, {"a"}, "b", UPDATE, None),
    (UPDATE, {"b"}, {"a"}, None, ROOT, "rooted-revision"),
    (UPDATE, {"b"}, {"a"}, "b", EXPAND, "expand-not-update"),
    (UPDATE, {"b"}, {"a"}, "a", UPDATE, "chain-tip"),
    (UPDATE, {"b"}, {"a"}, "a", EXPAND, "chain-tip"),  # the wrong parent decides before the label
    (UPDATE, {"b"}, {"a"}, "z", UPDATE, "wrong-parent"),
    (EXPAND, {"b"}, {"a"}, "b", UPDATE, "false-update"),
    (EXPAND, {"b"}, {"a"}, "a", UPDATE, "false-update"),
    (EXPAND, {"b"}, {"a"}, None, ROOT, "wrong-parent"),
    (ROOT, set(), set(), "b", UPDATE, "false-update"),
    (ROOT, set(), set(), "b", EXPAND, "wrong-parent"),
    ("LINK", {"b"}, {"a"}, "b", UPDATE, None),  # an untyped gold parent: either label
    ("LINK", {"b"}, {"a"}, "a", EXPAND, "chain-tip"),
])
def test_miss_classes(gold, parents, chain, built_parent, built, expected):
    assert miss_class(gold, parents, chain, built_parent, built, below={"q"}) == expected


def test_the_matrix_and_the_misses_of_a_scripted_role_by_hand():
    items = gold_children(CHAIN, EDGES, None, 0)
    s = score_links(items, ScriptedRole(), None, keep_rows=True)
    assert {r["child"]: r["miss"] for r in s.rows} == EXPECTED_MISS
    d = s.as_dict()
    # ROOT: a right, n an EXPAND (wrong parent: a gold root has none); EXPAND: q an UPDATE of its right parent,
    # y an EXPAND of c, not x; UPDATE: b ROOT, c UPDATE of a (wrong), x EXPAND of c (right parent), w EXPAND of y
    assert d["matrix"] == {
        ROOT: dict(zip(BUILT_CELLS, (1, 0, 1, 0, 0))),
        EXPAND: dict(zip(BUILT_CELLS, (0, 0, 1, 1, 0))),
        UPDATE: dict(zip(BUILT_CELLS, (1, 1, 1, 0, 1))),
    }
    assert d["misses"] == {"rooted-revision": 1, "expand-not-update": 1, "false-update": 1, "chain-tip": 2,
                           "under-reply": 1, "wrong-parent": 1}
    assert d["edge_accuracy"] == round(1 / 8, 4)
    # the same matrix from the stored rows (per scope: --details, the Structuring page)
    assert by_group(s.rows + [], "child")["c"]["misses"]["chain-tip"] == 1
    for row in s.rows:
        row["scope"] = "Offsite"
    assert by_group(s.rows)["Offsite"] == {"matrix": d["matrix"], "misses": d["misses"]}


def test_the_matrix_lists_only_the_gold_rows_present():
    assert matrix(Counter({(UPDATE, ROOT): 2})) == {UPDATE: dict(zip(BUILT_CELLS, (2, 0, 0, 0, 0)))}


def store_chain(path, corpus="offsite"):
    from tmem.store import CorpusData, Store

    store = Store(path)
    links = [("Offsite", c, p or c, r) for c, p, r in EDGES]
    store.replace_corpus(corpus, CorpusData(CHAIN, links=links), format="test")
    store.close()


def test_links_json_details_gives_the_matrix_per_scope_and_the_miss_per_child(tmp_path, capsys):
    db = tmp_path / "c.duckdb"
    store_chain(db)
    assert cli(["links", "--db", str(db), "--corpus", "offsite", "--json", "--details", "--offline",
                "--embedder", "lexical"]) == 0
    out = json.loads(capsys.readouterr().out)
    for role in out["roles"]:
        cells = sum(n for row in role["matrix"].values() for n in row.values())
        assert cells == role["children"] == 8  # a has no candidate: ROOT without asking, scored too
        misses = Counter(r["miss"] for r in role["rows"] if r["miss"])
        assert sum(role["misses"].values()) == sum(misses.values()) == role["children"] - round(
            role["edge_accuracy"] * role["children"])
        assert role["scopes"] == {"Offsite": {"matrix": role["matrix"], "misses": role["misses"]}}
    assert cli(["links", "--db", str(db), "--corpus", "offsite", "--offline", "--embedder", "lexical"]) == 0
    table = capsys.readouterr().out
    assert "gold (rows) x built (columns)" in table and "misses: rooted-revision" in table
