"""A budget cap (`--max-cost`, `--max-tokens`) stops a run cleanly: no call past the cap is sent, the records so
far are kept, a rerun continues; the spend meter gives tokens and cost so far (spend.json) per stage. Also: a
question's next stage starts as soon as its own record of the stage before exists (the latency floor)."""
import json

import pytest
from mini_corpus import mini_db

from tmem.cli import main as cli
from tmem.evaluation.batch import run as batch_module
from tmem.evaluation.batch.records import OK, read_records
from tmem.evaluation.batch.spend import spend_note
from tmem.evaluation.scripted_server import FaultServer, scripted_reply
from tmem.models.llm.budget_cap import Budget, BudgetExceeded, Prices, Spent
from tmem.pipeline.methods import get_method
from tmem.pipeline.stages import plan


def test_a_reservation_must_fit_what_is_left_and_is_settled_by_what_was_spent():
    budget = Budget(Prices(1.0, 2.0), max_cost=0.01)  # 10,000 prompt tokens, or 5,000 completion tokens
    held = budget.reserve("relation", 3000, 2000)  # worst case 0.007 USD
    with pytest.raises(BudgetExceeded, match="--max-cost 0.01 USD reached"):
        budget.reserve("relation", 1000, 1500)  # 0.007 + 0.004 > 0.01 while the first is in flight
    budget.settle(held, 3000, 100, 1)  # it spent 0.0032
    budget.reserve("answer", 1000, 1000)  # fits now
    snap = budget.snapshot()
    assert snap["total"]["prompt_tokens"] == 3000 and snap["stages"]["structuring"]["calls"] == 1
    with pytest.raises(ValueError, match="--max-cost needs prices"):
        Budget(Prices(), max_cost=1.0)
    earlier = Budget(max_tokens=100, earlier=Spent(60, 30, 2))  # a resumed run keeps to the cap of the whole run
    with pytest.raises(BudgetExceeded, match="--max-tokens 100"):
        earlier.reserve("judge", 5, 10)
    assert Budget().reserve("judge", 10**9, 10**9)  # no cap: metered only


@pytest.fixture
def mini(tmp_path):
    return mini_db(tmp_path)


@pytest.mark.integration
def test_an_online_run_stops_at_its_token_cap_and_resumes(mini, tmp_path, monkeypatch, capsys):
    server = FaultServer(default=("reply", scripted_reply), counted_usage=True)
    for k, v in {"TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": server.base_url, "TMEM_EMBEDDER": "lexical",
                 "TMEM_LLM_API_KEY_ENV": "TMEM_TEST_API_KEY", "TMEM_TEST_API_KEY": "sk-x"}.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "run"
    base = ["run", "--db", str(mini), "--corpus", "mini", "--variants", "full", "--limit", "4", "--out", str(out),
            "--quiet", "--price-input", "1", "--price-output", "4"]
    try:
        assert cli(base + ["--max-tokens", "100000"]) == 1  # incomplete: not a valid report yet
        printed = capsys.readouterr().out
        assert "STOPPED: budget cap --max-tokens 100000 reached" in printed
        spent = json.loads((out / "spend.json").read_text())
        total = spent["total"]
        assert 0 < total["prompt_tokens"] + total["completion_tokens"] <= 100000  # never past the cap
        served = sum(r.get("messages") is not None for r in server.requests)
        assert served == total["calls"]  # every call sent is metered, and the refused ones were never sent
        assert spent["stopped"] and "model calls so far" in spend_note(out) and "100,000 token cap" in spend_note(out)
        kept = read_records(out / "full" / "discovery.jsonl")
        assert kept.latest and all(r["status"] == OK for r in kept.latest.values())  # what was done is kept
        assert cli(base) == 0  # a rerun without the cap completes the run
        for stage in plan(get_method("full")):
            log = read_records(out / "full" / f"{stage}.jsonl")
            assert len(log.latest) == 4 and set(log.counts.values()) == {1}, stage
        again = json.loads((out / "spend.json").read_text())
        assert again["earlier_passes"]["calls"] == total["calls"] and again["total"]["calls"] > total["calls"]
        assert json.loads((out / "summary.json").read_text())["spent"]["stages"]["discovery"]["cost_usd"] > 0
    finally:
        server.close()


@pytest.mark.integration
def test_a_questions_next_stage_starts_before_the_other_questions_finish_a_stage(mini, tmp_path, monkeypatch):
    """Records in the order they were written: with the flow a later stage's record comes before an earlier stage's
    record of another question; with --stage-barrier never. The records themselves are the same."""
    order = {}
    write = batch_module.BatchRun.write

    def spy(self, method, stage, writer, outcome):
        order.setdefault(self.out.name, []).append(plan(method).index(stage))
        return write(self, method, stage, writer, outcome)
    monkeypatch.setattr(batch_module.BatchRun, "write", spy)
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    for name, extra in (("flow", []), ("barrier", ["--stage-barrier"])):
        assert cli(["run", "--db", str(mini), "--corpus", "mini", "--variants", "full", "--limit", "5", "--out",
                    str(tmp_path / name), "--offline", "--quiet", "--jobs", "2", *extra]) == 0
    assert order["barrier"] == sorted(order["barrier"])
    assert order["flow"] != sorted(order["flow"]) and sorted(order["flow"]) == order["barrier"]
    for stage in plan(get_method("full")):
        a, b = (read_records(tmp_path / n / "full" / f"{stage}.jsonl").latest for n in ("flow", "barrier"))
        assert {k: r["outputs"]["fields"] for k, r in a.items()} == {k: r["outputs"]["fields"] for k, r in b.items()}


# ------------------------------------------------------------- usage a server makes up (issue 44, row 3)
def test_usage_that_is_negative_or_not_finite_is_a_server_fault():
    from tmem.models.llm.budget_cap import usage_counts

    assert usage_counts(12, 0) == (12, 0) and usage_counts(12.0, 3) == (12, 3)
    for bad in (-1, -9_900_000, float("nan"), float("inf"), 1.5, "12", True, None, [3]):
        with pytest.raises(ValueError, match="impossible usage"):
            usage_counts(bad, 0)
        with pytest.raises(ValueError, match="impossible usage"):
            usage_counts(0, bad)


@pytest.mark.integration
def test_a_server_reporting_negative_usage_cannot_lift_the_cap_now_or_after_a_resume(mini, tmp_path, monkeypatch,
                                                                                     capsys):
    """A server that reported -9.9 M prompt tokens drove the meter below zero; resumed against an honest server,
    the run then spent 105,989 tokens under a 30,000 cap. Such a reply is now refused (retried, then the call
    fails), what it cost is counted, and the meter never goes below zero."""
    server = FaultServer(default=("reply", scripted_reply), counted_usage=True)
    for k, v in {"TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": server.base_url, "TMEM_EMBEDDER": "lexical",
                 "TMEM_LLM_API_KEY_ENV": "TMEM_TEST_API_KEY", "TMEM_TEST_API_KEY": "sk-x",
                 "TMEM_LLM_RETRIES": "1"}.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "run"
    base = ["run", "--db", str(mini), "--corpus", "mini", "--variants", "full", "--limit", "4", "--out", str(out),
            "--quiet", "--max-tokens", "30000"]
    try:
        server.usage = {"prompt_tokens": -9_900_000, "completion_tokens": 5, "total_tokens": -9_899_995}
        cli(base)
        total = json.loads((out / "spend.json").read_text())["total"]  # the refused replies' tokens, counted
        assert total["calls"] > 0 and 0 < total["prompt_tokens"] and total["completion_tokens"] >= 0, total
        server.usage = None  # resumed against an honest server, under the same cap
        cli(base)
        total = json.loads((out / "spend.json").read_text())["total"]
        assert total["prompt_tokens"] + total["completion_tokens"] <= 30000, total
    finally:
        server.close()


def test_a_resumed_run_refuses_a_spend_file_whose_total_is_not_a_count(tmp_path):
    from tmem.evaluation.batch.spend import earlier_spend

    assert earlier_spend(tmp_path) == Spent()  # a new folder
    (tmp_path / "spend.json").write_text(json.dumps({"total": {"prompt_tokens": 10, "completion_tokens": 2,
                                                               "calls": 1}}))
    assert earlier_spend(tmp_path) == Spent(10, 2, 1)
    for bad in (-9_900_000, float("nan"), "10", 1.5):
        (tmp_path / "spend.json").write_text(json.dumps({"total": {"prompt_tokens": bad, "completion_tokens": 2,
                                                                   "calls": 1}}))
        with pytest.raises(ValueError, match=r"spend.json: 'total' prompt_tokens must be a count >= 0"):
            earlier_spend(tmp_path)
