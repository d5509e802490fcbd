"""The app's batch form knows the cost before *Start* (an estimate: calls counted, not sent), takes prices and a
cost cap (`--max-cost`) to the child run, and its progress line shows the tokens and cost so far."""
from __future__ import annotations

import json

import pytest

from tmem.evaluation.batch import jobs
from tmem.evaluation.scripted_server import FaultServer, scripted_reply
from tmem.viz.progress import progress_line

FAILURES = "pages/failures.py"


def test_the_cap_and_prices_reach_the_child_run_and_the_progress_line_shows_the_spend(tmp_path):
    job = jobs.BatchJob(tmp_path / "x.duckdb", "c", ("full",), 4, tmp_path / "run",
                        budget={"budget.max_cost": 2.5, "budget.price_input": 1.0, "budget.price_output": 4.0})
    env = job.env()
    assert (env["TMEM_MAX_COST"], env["TMEM_PRICE_INPUT"], env["TMEM_PRICE_OUTPUT"]) == ("2.5", "1.0", "4.0")
    assert job.progress().spend == ""  # nothing sent yet
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "spend.json").write_text(json.dumps({
        "total": {"calls": 12, "prompt_tokens": 34000, "completion_tokens": 1200, "cost_usd": 0.0388},
        "max_cost": 2.5, "max_tokens": None, "stopped": None}))
    line = progress_line("b", job.progress())
    assert "model calls so far: 12, 34,000 prompt + 1,200 completion tokens, 0.0388 USD of the 2.5 USD cap" in line


@pytest.mark.app
def test_the_form_sends_prices_and_the_cap_with_the_batch(app, monkeypatch):
    calls = []
    monkeypatch.setattr(jobs, "start_batch", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setenv("TMEM_PRICE_INPUT", "0.27")
    at = app(FAILURES, corpus="golden")
    assert not at.exception
    at.number_input(key="batch_max_cost").set_value(3.0)
    at.number_input(key="batch_price_out").set_value(1.1)
    at.button(key="batch_start").click().run()
    assert not at.exception
    assert calls[0][1]["budget"] == {"budget.price_input": 0.27, "budget.price_output": 1.1, "budget.max_cost": 3.0}
    at.number_input(key="batch_price_in").set_value(0.0)
    at.number_input(key="batch_price_out").set_value(0.0).run()
    assert any("A cost cap needs prices" in w.value for w in at.warning)


@pytest.mark.app
def test_estimate_before_start_counts_the_sessions_model_calls_without_sending_any(app, monkeypatch):
    server = FaultServer(default=("reply", scripted_reply))
    for k, v in {"TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": server.base_url,
                 "TMEM_LLM_API_KEY_ENV": "TMEM_TEST_API_KEY", "TMEM_TEST_API_KEY": "sk-x",
                 "TMEM_PRICE_INPUT": "1", "TMEM_PRICE_OUTPUT": "2"}.items():
        monkeypatch.setenv(k, v)
    try:
        at = app(FAILURES, corpus="golden")
        assert not at.exception
        at.multiselect[0].set_value(["full"])
        at.radio[0].set_value("session")
        at.button(key="batch_estimate_button").click().run()
        assert not at.exception
        table = at.dataframe[0].value
        total = table[table["variant"] == "total"].iloc[0]
        assert total["calls"] > 0 and total["prompt tok."] > 0 and total["USD"] > 0
        headline = next(c.value for c in at.caption if "Estimate (counted, not sent)" in c.value)
        expected, worst = headline.split("Worst case")  # the expected cost first, the worst case second
        assert "tokens expected" in expected and "USD" in expected and "output limit" in worst
        assert total["completion tok."] < total["(max)"]
        assert {"discovery", "structuring", "answer", "judge"} <= set(table["stage"])
        assert server.requests == []  # counted, not sent
    finally:
        server.close()
