"""Budget-matched evidence verdicts (tmem.evaluation.matched): a fixed-budget baseline re-run at the other side's
message count per question, its context cut at B like any, and `run --json` carrying the matched pair beside the
unmatched one with the reading "more evidence, not better evidence" when a win is gone at equal budget."""
import json

import pandas as pd
import pytest
from mini_corpus import mini_db

from tmem.analysis import significance as sig
from tmem.analysis.funnel import stage_sets
from tmem.api import open_scope
from tmem.cli import main as cli
from tmem.evaluation import matched
from tmem.pipeline.methods import get_method
from tmem.store import Store


def test_which_methods_have_a_fixed_budget():
    assert all(matched.fixed_budget(n) for n in ("flat", "bm25", "embedding", "global-control", "tmem-reranked",
                                                  "bm25-forest", "no-discovery"))
    assert not any(matched.fixed_budget(n) for n in ("full", "no-structuring", "untyped-full", "unknown"))


def test_at_budget_sets_k_for_seeds_and_final_k_for_a_rerank():
    flat = matched.at_budget(get_method("flat"), 75)
    assert flat.config.retrieval.k == 75 and flat.final_k == 0
    control = matched.at_budget(get_method("global-control"), 75)
    assert control.config.retrieval.k == get_method("global-control").config.retrieval.k and control.final_k == 75


def test_the_reading_of_a_win_at_equal_budget():
    assert matched.verdict(sig.WIN, sig.INCONCLUSIVE) == matched.MORE_NOT_BETTER
    assert matched.verdict(sig.WIN, sig.WIN) == matched.HOLDS
    assert matched.verdict(sig.INCONCLUSIVE, sig.WIN) == ""


def test_matched_rows_show_the_baseline_as_many_messages_as_the_other_side(tmp_path, monkeypatch, offline):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    store = Store(mini_db(tmp_path))
    scope = open_scope(store, "mini", store.questions("mini")[0].scope)
    from tmem.pipeline.run import run_question

    questions = [q for q in store.questions("mini") if q.type == "knowledge_update"][:3]
    traces = {(q.scope, q.id): run_question(q, scope, get_method("full").config, offline, corpus="mini",
                                            variant="full") for q in questions}
    rows = matched.matched_rows(store, "mini", traces, "flat", "full", lambda s, i: store.gold("mini", s, i),
                                lambda name: scope, offline)
    assert list(rows["variant"].unique()) == ["flat@full"]
    for row in rows.to_dict("records"):
        shown = stage_sets(traces[(row["scope"], row["question_id"])])["after_compression"]
        assert row["messages"] == len(shown)
        # the same BM25 ranking, n deep: the matched trace's evidence is BM25 top-n
        again = matched.context_trace(traces[(row["scope"], row["question_id"])].question, scope,
                                      matched.at_budget(get_method("flat"), len(shown)), offline, "mini")
        assert len(again.evidence_ids) == len(shown)
        assert row["units_in_context"] == sum(bool(set(u) & stage_sets(again)["after_compression"])
                                              for u in store.gold("mini", row["scope"], row["question_id"]).evidence)
    store.close()


@pytest.mark.integration
def test_run_json_carries_the_matched_pair_beside_the_unmatched_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    db = mini_db(tmp_path)
    assert cli(["run", "--db", str(db), "--corpus", "mini", "--out", str(tmp_path / "run"), "--offline", "--quiet",
                "--variants", "full,flat,no-structuring", "--limit", "6", "--json"]) == 0
    captured = capsys.readouterr()
    pairs = {p["baseline"]: p for p in json.loads(captured.out)["comparisons"]}
    m = pairs["flat"]["matched"]
    assert m["method"] == "flat@full" and m["budget"] == "messages" and m["measure"] == "evidence"
    assert m["outcome"] in (sig.WIN, sig.LOSS, sig.INCONCLUSIVE, sig.NO_DATA) and m["n"] > 0
    assert m["reading"] == matched.verdict(pairs["flat"]["measures"]["evidence"][0]["outcome"], m["outcome"])
    assert "matched" not in pairs["no-structuring"], "a method without a fixed budget is not re-run"
    assert "at equal budget: flat@full" in captured.err


@pytest.fixture
def frame():
    rows = []
    for i in range(10):
        key = {"scope": "s", "question_id": f"q{i}", "qtype": "t"}
        rows += [{**key, "variant": "full", "evidence_complete": i < 8},
                 {**key, "variant": "flat", "evidence_complete": False},
                 {**key, "variant": "flat@full", "evidence_complete": i < 7, "messages": 70}]
    return pd.DataFrame(rows)


def test_a_win_that_vanishes_at_equal_budget_reads_more_evidence_not_better(frame):
    both = frame[frame["variant"] != "flat@full"]
    unmatched = sig.paired_deltas(both, "full", "flat", "evidence", by_type=False)[0]
    assert unmatched.outcome == sig.WIN  # 8 of 10 gained
    pair = matched.matched_pair(both, frame[frame["variant"] == "flat@full"], "full", "flat", unmatched.outcome)
    assert pair["delta"] == pytest.approx(0.1) and pair["outcome"] == sig.INCONCLUSIVE
    assert pair["reading"] == matched.MORE_NOT_BETTER and pair["mean_messages"] == 70


@pytest.mark.parametrize("name", ["full", "flat"])
def test_methods_at_two_budgets_share_their_early_stages_and_get_each_its_own_context(golden_scope, offline, name):
    """tmem.evaluation.figures counts evidence at B = 8,192 and B = 1,500 from one run of the stages before
    compression (`context_traces`): each context must be the one a run at that budget alone gives. At B = 300 the
    golden question's context (~1,000 tokens, full and flat) loses messages, so the budget is seen, not ignored."""
    from dataclasses import replace

    from tmem.demo.golden import QUESTION

    method = get_method(name)
    at = [replace(method, config=method.config.with_("compression", budget_tokens=b)) for b in (8192, 300)]
    shared = matched.context_traces(QUESTION, golden_scope, at, offline, "golden")
    alone = [matched.context_trace(QUESTION, golden_scope, m, offline, "golden") for m in at]
    assert [stage_sets(t) for t in shared] == [stage_sets(t) for t in alone]
    assert [(t.context, t.flat_context) for t in shared] == [(t.context, t.flat_context) for t in alone]
    assert stage_sets(shared[1])["after_compression"] < stage_sets(shared[0])["after_compression"]
    with pytest.raises(ValueError, match="differ only in compression"):
        matched.context_traces(QUESTION, golden_scope, [method, method.with_k(12)], offline, "golden")


def test_full_and_no_compression_share_their_early_stages_and_get_each_its_own_context(golden_scope, offline):
    """Methods that differ in their names and compression settings (full, no-compression: tmem.evaluation.figures
    counts both at two budgets) run the stages before compression once; each context is the one it gets alone, and
    the two modes give two contexts at B = 300 (the mode is seen, not shared)."""
    from dataclasses import replace

    from tmem.demo.golden import QUESTION

    at = [replace(m, config=m.config.with_("compression", budget_tokens=b))
          for m in (get_method("full"), get_method("no-compression")) for b in (8192, 300)]
    shared = matched.context_traces(QUESTION, golden_scope, at, offline, "golden")
    alone = [matched.context_trace(QUESTION, golden_scope, m, offline, "golden") for m in at]
    assert [t.variant for t in shared] == ["full", "full", "no-compression", "no-compression"]
    assert [(stage_sets(t), t.context, t.flat_context) for t in shared] == \
        [(stage_sets(t), t.context, t.flat_context) for t in alone]
    assert shared[1].context != shared[3].context


def test_recorded_early_stages_are_used_instead_of_running_them_when_whole(golden_scope, offline, monkeypatch):
    """`recorded` (a batch's records of the stages before compression) gives the contexts running them gives, and
    none of those stages runs; records missing a stage are not used (the stages run)."""
    from dataclasses import replace

    from tmem.demo.golden import QUESTION
    from tmem.pipeline import stages as stage_module

    full = get_method("full")
    at = [replace(full, config=full.config.with_("compression", budget_tokens=b)) for b in (8192, 300)]
    ctx, earlier, recorded = stage_module.Context(full, offline), stage_module.Earlier(), {}
    for name in ("seed_retrieval", "discovery", "structuring"):
        out = stage_module.STAGE_FUNCTIONS[name](QUESTION, golden_scope, ctx, earlier)
        recorded[name], earlier = json.loads(json.dumps(out.to_record())), earlier.then(out)
    ran = matched.context_traces(QUESTION, golden_scope, at, offline, "golden")
    run_early = dict(stage_module.STAGE_FUNCTIONS)
    for name in recorded:
        monkeypatch.setitem(stage_module.STAGE_FUNCTIONS, name, lambda *a, stage=name: pytest.fail(f"{stage} ran"))
    reused = matched.context_traces(QUESTION, golden_scope, at, offline, "golden", recorded=recorded)
    assert [(stage_sets(t), t.context, t.nodes) for t in reused] == [(stage_sets(t), t.context, t.nodes) for t in ran]
    monkeypatch.setitem(stage_module.STAGE_FUNCTIONS, "seed_retrieval", run_early["seed_retrieval"])
    monkeypatch.setitem(stage_module.STAGE_FUNCTIONS, "discovery", run_early["discovery"])
    with pytest.raises(pytest.fail.Exception, match="structuring ran"):
        matched.context_traces(QUESTION, golden_scope, at, offline, "golden",
                               recorded={k: v for k, v in recorded.items() if k != "discovery"})
