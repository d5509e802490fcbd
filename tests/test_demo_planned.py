"""The demo's gold links are the generator's planned edges (tmem.demo.planned): the rules by hand, the shipped
corpus's edges in a fresh database, the Structuring page scoring the curated question's forest against them on a
first start, and `fit-relation` refusing every corpus the generator wrote (tmem.demo.provenance)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from conftest import start_app

from tmem import api
from tmem.cli import main as cli
from tmem.demo import CURATED_QUESTION, DEMO_CORPUS, DEMO_JSONL, PLANNED_EDGES, generated_corpus
from tmem.demo.generator import planned_sidecar
from tmem.demo.planned import PlannedEdge, planned_edge
from tmem.store import CorpusData, Store

pytestmark = pytest.mark.skipif(not DEMO_JSONL.exists(), reason="no demo corpus in data/")


def decision(kind: str, earlier: tuple[int, ...]):
    return SimpleNamespace(kind=kind, proposal=0, confirm=2, earlier=earlier)


def test_the_planned_edge_rules_by_hand():
    revise = decision("revise", (0, 2))
    # draft: (kind, reply) -> the edge: a proposal roots the tree; discussion and confirmation expand it; the
    # challenge (no reply) expands the confirmed state; a pile-on expands what it replies to; the update
    # UPDATEs the confirmation; an acknowledgement expands the update
    drafts = {0: ("propose", None), 1: ("discuss", None), 2: ("confirm", None), 3: ("challenge", None),
              4: ("pile_on", 3), 5: ("update_plain", 3), 6: ("ack", 5)}
    expected = {0: (None, "ROOT"), 1: (0, "EXPAND"), 2: (0, "EXPAND"), 3: (2, "EXPAND"), 4: (3, "EXPAND"),
                5: (2, "UPDATE"), 6: (5, "EXPAND")}
    for index, (kind, reply) in drafts.items():
        edge = planned_edge(index, kind, revise, reply, chatter_roots=False)
        assert (edge.parent, edge.relation) == expected[index], (index, kind)
    # a rollback: its first revision UPDATEs the confirmation, the trouble report expands that revision, and the
    # rollback UPDATEs the revision it takes back (not the confirmation)
    rollback = decision("rollback", (3,))
    assert planned_edge(3, "revise", rollback, None, False) == PlannedEdge(3, 2, "UPDATE", "revise")
    assert planned_edge(4, "trouble", rollback, None, False) == PlannedEdge(4, 3, "EXPAND", "trouble")
    assert planned_edge(7, "rollback", rollback, 4, False) == PlannedEdge(7, 3, "UPDATE", "rollback")
    # chatter outside a decision: a reply expands its target; alone, a ROOT only with chatter_roots
    assert planned_edge(9, "chatter", None, 8, False) == PlannedEdge(9, 8, "EXPAND", "chatter reply")
    assert planned_edge(9, "chatter", None, None, False) is None
    assert planned_edge(9, "status", None, None, True) == PlannedEdge(9, None, "ROOT", "status (no reply)")


def test_a_fresh_database_holds_the_demo_with_its_planned_edges(tmp_path):
    store = api.open_store(tmp_path / "first.duckdb")
    scope, _ = CURATED_QUESTION
    edges = store.gold_edges(DEMO_CORPUS, scope)
    by_child = {c: (p, r) for c, p, r in edges}
    assert len(edges) == len(by_child) == 3000  # one gold edge per message (chatter that replies to nothing: ROOT)
    assert by_child["Msg_2100"] == ("Msg_1497", "UPDATE")  # the curated revision UPDATEs the decision it replaces
    assert by_child["Msg_2094"] == ("Msg_1497", "EXPAND") and by_child["Msg_2104"] == ("Msg_2100", "EXPAND")
    assert sum(r == "UPDATE" for _, r in by_child.values()) == 30  # 30 planned changes, as the generator counts
    assert store.counts(DEMO_CORPUS)["gold_links"] == sum(p is not None for p, _ in by_child.values())
    assert generated_corpus(store, DEMO_CORPUS) == "it is the generated demo corpus"  # noted as such on load
    store.close()


@pytest.mark.app
def test_structuring_scores_the_curated_forest_against_the_planned_edges_on_first_start(tmp_path, monkeypatch):
    """A first start: the first screen runs the curated question and stores its trace; Structuring then scores
    that forest against the planned edges and says where the gold comes from."""
    monkeypatch.setenv("TMEM_DB", str(tmp_path / "first.duckdb"))
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    at = start_app()  # the first screen
    assert not at.exception
    at.switch_page("pages/structuring.py")
    at.run()
    assert not at.exception
    assert any(PLANNED_EDGES in i.value for i in at.info)
    summary, _confusion, edges = [d.value for d in at.dataframe][:3]  # the confusion over the corpus between
    scope, qid = CURATED_QUESTION
    row = summary[(summary["question"] == qid) & (summary["variant"] == "full")].iloc[0]
    assert row["scope"] == scope and row["scored"] == len(edges) > 10
    assert row["edges right"] == (edges["right"] == "✓").sum()
    chain = edges[edges["child"] == "Msg_2100"].iloc[0]  # the decisive revision: expected as planned
    assert (chain["expected"], chain["expected parent"]) == ("UPDATE", "Msg_1497")
    assert any(PLANNED_EDGES in c.value and "edges right" in c.value for c in at.caption)


# ----------------------------------------------------------------------------------------- never fitted on
def fit(db, corpus, capsys, out):
    code = cli(["fit-relation", "--db", str(db), "--corpus", corpus, "--out", str(out), "--offline",
                "--embedder", "lexical"])
    return code, capsys.readouterr().err.strip()


def test_fit_relation_refuses_the_demo_corpus(tmp_path, capsys):
    db = tmp_path / "d.duckdb"
    api.open_store(db).close()  # the demo, as a first start loads it
    code, err = fit(db, DEMO_CORPUS, capsys, tmp_path / "w.json")
    assert code == 1 and len(err.splitlines()) == 1
    assert err == ("error: --corpus demo: it is the generated demo corpus; its gold edges are the generator's plan: "
                   "scored, never fitted on")
    assert not (tmp_path / "w.json").exists()
    # the same file imported by path under another name is the generator's too
    assert cli(["import", "jsonl", str(DEMO_JSONL), "--db", str(db), "--corpus", "renamed"]) == 0
    capsys.readouterr()
    code, err = fit(db, "renamed", capsys, tmp_path / "w.json")
    assert code == 1 and "generated demo corpus (demo.jsonl)" in err and "never fitted on" in err


def test_fit_relation_refuses_a_corpus_the_generator_wrote(tmp_path, capsys):
    """`python -m tmem demo --out FOLDER` marks the folder; a GroupMemBench import of it, or of its domain file deep
    inside, is refused. A hand-made corpus with gold edges is not."""
    folder, db = tmp_path / "gen", tmp_path / "d.duckdb"
    assert cli(["demo", "--seed", "3", "--messages", "600", "--out", str(folder)]) == 0
    assert json.loads((folder / "tmem-demo.json").read_text())["generator"] == "tmem.demo"
    assert (folder / "gold_edges.jsonl").exists()  # the planned edges travel with it, as a typed-edge sidecar
    assert cli(["import", "groupmembench", str(folder), "--db", str(db), "--corpus", "gen-dev"]) == 0
    capsys.readouterr()
    code, err = fit(db, "gen-dev", capsys, tmp_path / "w.json")
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith("error: --corpus gen-dev: it was written by the demo generator (marked by ")
    assert str(folder / "tmem-demo.json") in err and not (tmp_path / "w.json").exists()
    store = Store(db)
    assert store.counts("gen-dev")["gold_links"] > 0
    store.replace_corpus("hand", CorpusData(store.messages("gen-dev", "Technology")[:5]), format="test",
                         source=str(tmp_path / "elsewhere"))
    assert generated_corpus(store, "hand") is None
    store.close()


def test_the_scripts_sidecar_holds_the_shipped_edges():
    """The sidecar demo_gold_edges.py writes is planned_sidecar's lines (a test reaches no script, as the architecture
    test checks); with chatter roots they are exactly the shipped demo's gold links."""
    _, edges = planned_sidecar(7, 3000, 1, chatter_roots=True)
    shipped = [json.loads(line) for line in DEMO_JSONL.read_text().splitlines() if '"kind": "link"' in line]
    assert len(edges) == 3000
    assert sorted((e["child"], e["parent"] or e["child"], e["relation"]) for e in edges) == \
        sorted((s["child_id"], s["parent_id"], s["relation"]) for s in shipped)
