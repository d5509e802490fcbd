"""Budget-matched recall (tmem.evaluation.budget_recall): every method at T-Mem's own message count, the
recall-vs-messages curve, and the dev/test split, on the golden conversation by hand."""
import json

import pytest

from tmem.cli import main as cli
from tmem.evaluation.budget_recall import CURVE, MATCHED, BudgetRecall, budget_recall
from tmem.evaluation.metrics import Recall
from tmem.types import Gold


@pytest.fixture
def golden_store(tmp_path, monkeypatch):
    from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE
    from tmem.store import CorpusData, Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    store = Store(tmp_path / "g.duckdb")
    store.replace_corpus("golden", CorpusData(MESSAGES, [QUESTION], [(SCOPE, GOLD)]), format="test")
    return store


def _run(store, budgets=(12, 36, 48)):
    from tmem.evaluation.recall import eligible_items, memo_roles
    from tmem.models.factory import build_roles

    roles = memo_roles(build_roles(store=store))
    return budget_recall(store, "golden", 36, budgets, roles, eligible_items(store, "golden"))


def test_golden_budget_matched_by_hand(golden_store):
    """At k = 36, R'(q) = 36 anchors + m04 (test_evaluation_recall's hand count): 37 messages. BM25 and the embedding
    top-37 lists still miss m04 (it shares no word with the question); the global control, reranked to 37, keeps
    it (m04 keeps KEY m01's score). On the curve, T-Mem cut to 12 keeps m04 for the same reason, and at B = 48
    T-Mem has only its 37 messages."""
    result = _run(golden_store)
    matched, curve = result.total(["golden"])
    got = {n: (r.recovered, r.units, r.messages) for n, r in matched.items()}
    assert got == {"tmem": (1, 1, 37), "bm25@tmem": (0, 1, 37), "embedding@tmem": (0, 1, 37),
                   "global-control@tmem": (1, 1, 37)}
    assert {(v, b): (r.recovered, r.messages) for (v, b), r in curve.items()} == {
        ("bm25", 12): (0, 12), ("bm25", 36): (0, 36), ("bm25", 48): (0, 48),
        ("embedding", 12): (0, 12), ("embedding", 36): (0, 36), ("embedding", 48): (0, 48),
        ("tmem", 12): (1, 12), ("tmem", 36): (1, 36), ("tmem", 48): (1, 37),
        ("global-control", 12): (1, 12), ("global-control", 36): (1, 36), ("global-control", 48): (1, 37)}


def test_a_curve_prefix_is_the_rerank_to_that_budget(golden_store):
    """The curve cuts one best-first order instead of reranking per budget: the same set as the control run with
    final_k = B (what `run --variants global-control` does at k = B is a different seed depth, not this)."""
    from dataclasses import replace

    from tmem.api import open_scope
    from tmem.evaluation.budget_recall import question_budget_sets
    from tmem.models.factory import build_roles
    from tmem.pipeline.methods import get_method
    from tmem.pipeline.stages import Context, Earlier, retrieve_seeds, run_discovery

    roles = build_roles(store=golden_store)
    scope = open_scope(golden_store, "golden", "golden")
    question = golden_store.questions("golden")[0]
    contexts = {}

    def ctx_for(name, depth):
        method = (replace(get_method("global-control", depth), final_k=10 ** 9) if name == "global-control-all"
                  else get_method({"tmem": "full"}.get(name, name), depth))
        return contexts.setdefault((name, depth), Context(method, roles, golden_store))

    _, curve = question_budget_sets(question, scope, 36, (12, 20), ctx_for)
    seeds = retrieve_seeds(question, scope, ctx_for("bm25", 36), Earlier())
    for b in (12, 20):
        cut = replace(get_method("global-control", 36), final_k=b)
        direct = run_discovery(question, scope, Context(cut, roles, golden_store), Earlier.of(seeds)).fields
        assert set(curve[("global-control", b)]) == set(direct["evidence_ids"])
        assert len(curve[("bm25", b)]) == b


def test_dev_and_test_splits_are_the_first_and_second_half_of_the_scopes():
    result = BudgetRecall(36, (12,))
    gold = Gold("q", "a", (("m1",),))
    for i, scope in enumerate(["c0", "c1", "c2", "c3", "c4"]):
        hit = ("m1",) if i < 2 else ("m2",)
        result.add(scope, {n: hit for n in MATCHED}, {(v, 12): hit for v in CURVE}, gold)
    assert result.splits() == {"all": ["c0", "c1", "c2", "c3", "c4"], "dev": ["c0", "c1"], "test": ["c2", "c3", "c4"]}
    body = result.to_json()["splits"]
    assert body["dev"]["matched"]["tmem"]["recall"] == 1.0 and body["test"]["matched"]["tmem"]["recall"] == 0.0
    assert body["all"]["curve"]["bm25"][0] == {"budget": 12, **Recall(2, 5, 5, 5).as_dict()}


def test_cli_prints_the_budget_table_and_writes_the_json(golden_store, tmp_path, capsys):
    db = golden_store.path if hasattr(golden_store, "path") else tmp_path / "g.duckdb"
    golden_store.close()
    out = tmp_path / "recall" / "golden.json"
    assert cli(["recall", "--db", str(db), "--corpus", "golden", "--k", "36", "--budgets", "12,48", "--quiet",
                "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Budget-matched at k = 36, split all" in text and "global-control@tmem" in text and "B=48" in text
    body = json.loads(out.read_text())
    (run,) = body["runs"]
    assert body["corpus"] == "golden" and run["budget"]["budgets"] == [12, 36, 48]  # k itself is always a budget
    assert run["variants"] == run["budget"]["splits"]["all"]["plain"]
    assert run["budget"]["splits"]["all"]["matched"]["bm25@tmem"]["mean_messages"] == 37.0
    assert cli(["recall", "--db", str(db), "--corpus", "golden", "--k", "36", "--budgets", "off", "--json",
                "--quiet"]) == 0
    assert "budget" not in json.loads(capsys.readouterr().out)


def test_the_plain_variants_read_off_the_budget_pass_equal_the_plain_recall(golden_store):
    """`recall` computes the plain table from the budget pass (one pass instead of two): the same figures."""
    from tmem.evaluation.recall import evidence_recall

    plain = evidence_recall(golden_store, "golden", [36])[36]
    read_off = _run(golden_store, budgets=(12, 36, 48)).plain()
    assert {v: (r.recovered, r.units, r.messages) for v, r in read_off.items()} == \
        {v: (r.recovered, r.units, r.messages) for v, r in plain.items()}


def test_tmem_rows_use_vectors_on_demand_and_the_output_says_why_scopes_are_embedded_whole(golden_store,
                                                                                           monkeypatch):
    """Only the dense rows (embedding top-B, the global control) embed a whole scope; T-Mem's rows rank the
    vectors of their windows, on demand, as the pipeline does. The printed table says why the scope was whole."""
    from tmem.evaluation import budget_recall as budget
    from tmem.evaluation.budget_recall import format_budget
    from tmem.pipeline.scope import Scope

    whole: list[str] = []
    vectors = Scope.vectors
    monkeypatch.setattr(Scope, "vectors", lambda self, embedder: whole.append(self.name) or vectors(self, embedder))
    dense_lists = budget.dense_lists
    monkeypatch.setattr(budget, "dense_lists", lambda *args: ((), ()))  # no dense rows: nothing is whole
    result = _run(golden_store)
    assert whole == [] and result.total(["golden"])[0]["tmem"].recovered == 1
    monkeypatch.setattr(budget, "dense_lists", dense_lists)
    result = _run(golden_store)
    assert set(whole) == {"golden"}
    n = golden_store.counts("golden")["messages"]
    assert f"each scope was embedded whole ({n:,} messages in 1 scope(s)" in format_budget(result)
    assert result.to_json()["whole_scope_vectors"]["messages"] == n


def test_why_names_the_units_each_side_found_and_the_rate_each_window_beat(golden_store):
    """The golden question's one unit (m04) is found by both R'(q) and the control at 37 messages (test above):
    neither side alone; every accepted window carries its density against mu (the paper's fixed threshold)."""
    [entry] = _run(golden_store).why
    assert (entry["units"], entry["both"], entry["windows_only"], entry["global_only"]) == (1, 1, [], [])
    assert entry["messages"] == 37 and entry["windows"]
    assert entry["unit"] == "hour"
    assert all(threshold is None and background is None and density > 0.25
               for _, _, density, threshold, background, _ in entry["windows"])


def test_why_splits_units_between_the_two_sides():
    from datetime import datetime

    from tmem.evaluation.budget_recall import why
    from tmem.types import Cluster, Question

    gold = Gold("q", "a", (("m1",), ("m2", "m2b"), ("m3",), ("m4",)))
    matched = {"tmem": ("m1", "m2b", "x"), "global-control@tmem": ("m2", "m3")}
    t = datetime(2025, 1, 1)
    clusters = (Cluster(0, None, ("m1", "x"), t, t, 0.0, 0.5, True, 0.33, 0.15, "conv-1", "message"),
                Cluster(1, None, ("y", "z"), t, t, 5.0, 0.1, False))
    entry = why(Question("q", "s", "?"), gold, matched, {"clusters": clusters, "windows": ()}, "conv-1")
    assert (entry["windows_only"], entry["global_only"], entry["both"]) == (["m1"], ["m3"], 1)
    assert entry["rejected_clusters"] == 1
    assert entry["unit"] == "message" and entry["windows"] == [["conv-1", 2, 0.5, 0.33, 0.15, 0]]
