"""Batch runs from the app (tmem.evaluation.batch.jobs): a background `python -m tmem run` per variant
on the app's own database while the app keeps using it, progress read from the run folder, results stored variant by
variant; the Failures page's form starts one; the demo's out-of-the-box batch starts once and can be turned off."""
from __future__ import annotations

import json
import time

import pytest
from waiting import WAIT_S, wait_until

from tmem.evaluation.batch import jobs
from tmem.store import Store


def _wait(job, seconds: float = WAIT_S) -> None:
    try:
        wait_until(lambda: not job.running, "the batch to finish", seconds, every=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {job.progress()}") from None


@pytest.mark.integration  # the app's batch: `tmem run` in child processes (tmem.evaluation.batch.jobs)
def test_a_background_batch_stores_results_while_the_app_keeps_the_database(app_db, tmp_path):
    store = Store(app_db)  # the app's Store: it keeps reading while the child process writes
    before = set(store.run_ids("golden"))
    job = jobs.start_batch(app_db, "golden", ["full", "flat"], 2, backend={"backend.preset": "offline"},
                           out=tmp_path / "run")
    with pytest.raises(ValueError, match="already running"):
        jobs.start_batch(app_db, "golden", ["full"], 2)
    reads = 0
    while job.running:
        assert store.questions("golden") and store.counts("golden")["messages"]  # never "database in use"
        reads += 1
        time.sleep(0.2)
    progress = job.progress()
    assert progress.state == "done", (progress, (tmp_path / "run" / "app-job.log").read_text())
    assert (tmp_path / "run" / jobs.COMPLETE).exists()
    assert progress.done == progress.total == 2 * (6 + 3)  # full: 6 stages; flat: seeds, answer, judge
    assert progress.finished == ("full", "flat") and progress.fraction == 1.0
    new = set(store.run_ids("golden")) - before
    assert len(new) == 1, "one run id for the whole batch (the run folder's run.json)"
    run_id = new.pop()
    rows = store.run_results("golden", run_id)
    assert sorted(rows["variant"].unique()) == ["flat", "full"] and len(rows) == 4
    assert reads > 3
    assert json.loads((tmp_path / "run" / jobs.PLAN).read_text())["variants"] == ["full", "flat"]
    assert jobs.incomplete_note(store, "golden", run_id) == ""  # complete
    store.close()


@pytest.mark.app
def test_an_app_batch_that_stopped_half_way_is_marked_incomplete_where_runs_are_listed(app, app_db):
    """Issue 44: after kill -9 of the app during an app batch, the run showed 3 of 4 variants with no note that it
    was incomplete. The batch's plan (app-job.json) against its stored variants says so, in the Run selector and
    above the tables of Failures and Compare; a batch that is running, or completed, gets no note."""
    run_id = "golden-app-20260101-000000-0123abcd"
    folder = jobs.runs_folder(app_db) / "golden-app-20260101-000000"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "corpus": "golden"}))
    (folder / jobs.PLAN).write_text(json.dumps({"corpus": "golden", "variants": list(jobs.MAIN_VARIANTS)}))
    store = Store(app_db)
    store.save_run_results(store.run_results("golden", "test-run").assign(run_id=run_id).to_dict("records"))
    note = jobs.incomplete_note(store, "golden", run_id)
    assert note.startswith("incomplete: 2 of 4 variants stored (no-discovery, no-structuring missing")
    assert jobs.incomplete_note(store, "golden", "test-run") == ""  # a run from the command line
    store.close()
    for page in ("pages/failures.py", "pages/compare.py"):
        at = app(page, corpus="golden", run=run_id)
        assert not at.exception
        assert f"{run_id} — incomplete: 2 of 4 variants stored" in at.selectbox(key="run").options
        assert any("incomplete: 2 of 4 variants stored" in w.value.replace("\\", "") for w in at.warning), page
    (folder / jobs.COMPLETE).write_text("{}")
    at = app("pages/failures.py", corpus="golden", run=run_id)
    assert run_id in at.selectbox(key="run").options and not any("incomplete" in w.value for w in at.warning)


def test_progress_counts_stage_records_and_gives_an_eta(tmp_path):
    job = jobs.BatchJob(tmp_path / "x.duckdb", "c", ("full", "flat"), 10, tmp_path / "run")
    (tmp_path / "run" / "full").mkdir(parents=True)
    (tmp_path / "run" / "full" / "seed_retrieval.jsonl").write_text("{}\n" * 10)
    (tmp_path / "run" / "full" / "discovery.jsonl").write_text("{}\n" * 14)  # retried lines: capped at 10
    job.started = time.time() - 20
    p = job.progress()
    assert (p.done, p.total, p.state) == (20, 90, "running")  # 10 questions x (6 + 3) stages
    assert p.eta_s == pytest.approx(70, rel=0.05)  # 20 of 90 in 20 s -> 70 s to go


@pytest.mark.integration
def test_a_cancel_that_lands_while_the_child_starts_stops_it(tmp_path, monkeypatch):
    """cancel() between the job's check for a cancel and its child's start found no child to stop: the child ran
    its whole variant and was stored (in the suite, a sleeper child held a test for its 60 s). The cancel is made
    to land there; the child, which would exit 0, must be stopped: nothing stored, the job cancelled."""
    import subprocess
    import sys

    real = subprocess.Popen

    def popen_after_a_cancel(*args, **kwargs):
        job.cancel()  # the user's cancel, while the child is being started
        return real(*args, **kwargs)

    job = jobs.BatchJob(tmp_path / "x.duckdb", "c", ("full",), 1, tmp_path / "run")
    monkeypatch.setattr(jobs.BatchJob, "command", lambda self, variant: [sys.executable, "-c",
                                                                         "import time; time.sleep(30)"])
    monkeypatch.setattr(jobs.subprocess, "Popen", popen_after_a_cancel)
    job.start()
    _wait(job)
    assert job.stored == [] and job.failed == ["full"] and job.progress().state == "cancelled"


def _child_niceness(job) -> int:
    import sys

    job.command = lambda variant: [sys.executable, "-c", "import os; print('niceness', os.nice(0))"]
    job.start()
    _wait(job)
    log = (job.out / "app-job.log").read_text()
    return int(log.split("niceness ")[1].split()[0])


@pytest.mark.integration  # starts a child process through BatchJob.start
def test_a_batch_child_runs_at_the_default_lower_priority_unless_told(tmp_path, monkeypatch):
    """The app's children run at niceness NICE (10) above the app's own; TMEM_BATCH_NICE sets another (the suite
    sets 0, tests/conftest.py); a value that is not a niceness is a warning and the default."""
    import os

    own = os.nice(0)
    monkeypatch.delenv(jobs.NICE_ENV, raising=False)
    assert jobs.NICE == 10
    assert _child_niceness(jobs.BatchJob(tmp_path / "x.duckdb", "c", ("full",), 1, tmp_path / "a")) == min(own + 10, 19)
    monkeypatch.setenv(jobs.NICE_ENV, "3")
    assert _child_niceness(jobs.BatchJob(tmp_path / "x.duckdb", "c", ("full",), 1, tmp_path / "b")) == min(own + 3, 19)
    monkeypatch.setenv(jobs.NICE_ENV, "0")
    assert _child_niceness(jobs.BatchJob(tmp_path / "x.duckdb", "c", ("full",), 1, tmp_path / "c")) == own
    for bad in ("-5", "20", "low"):
        monkeypatch.setenv(jobs.NICE_ENV, bad)
        with pytest.warns(UserWarning, match=rf"TMEM_BATCH_NICE='{bad}': not a niceness from 0 to 19"):
            assert jobs.child_niceness() == 10


def test_unknown_variant_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        jobs.start_batch(tmp_path / "x.duckdb", "c", ["nope"], 1)


def test_the_demo_batch_starts_once_and_can_be_turned_off(app_db, monkeypatch):
    started = []
    monkeypatch.setattr(jobs, "start_batch", lambda *a, **k: started.append((a, k)) or "job")
    store = Store(app_db)
    assert jobs.ensure_demo_batch(store, "golden") is None  # TMEM_DEMO_BATCH=off in the test suite
    monkeypatch.setenv("TMEM_DEMO_BATCH", "on")
    assert jobs.ensure_demo_batch(store, "golden") is None, "golden already has a stored run"
    folder = jobs.runs_folder(app_db) / jobs.DEMO_RUN
    folder.mkdir(parents=True)  # an earlier demo batch that did not complete (the app stopped): resumed
    assert jobs.ensure_demo_batch(store, "golden") == "job"
    (folder / jobs.COMPLETE).write_text("{}")
    assert jobs.ensure_demo_batch(store, "golden") is None, "it completed: never again"
    (folder / jobs.COMPLETE).unlink()
    folder.rmdir()
    store.replace_run_results("test-run", ["full", "flat"], [])
    assert jobs.ensure_demo_batch(store, "golden") == "job", "no stored run at all"
    for (db, corpus, variants, n), kwargs in started:
        assert (str(db), corpus, variants, n) == (str(app_db), "golden", jobs.MAIN_VARIANTS, 2)
        assert kwargs["backend"] == {"backend.preset": "offline"} and kwargs["label"] == jobs.DEMO_RUN
    assert len(started) == 2
    store.close()


def test_offline_batches_drop_the_servers_model_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_ANSWER_MODEL", "gpt-x")
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    offline = jobs.BatchJob(tmp_path / "x.duckdb", "c", ("full",), 1, tmp_path, backend={"backend.preset": "offline"})
    assert "TMEM_ANSWER_MODEL" not in offline.env() and offline.env()["TMEM_BACKEND"] == "offline"
    assert offline.env()["TMEM_EMBEDDER"] == "lexical"  # the embedder is not a model role: kept
    session = jobs.BatchJob(tmp_path / "x.duckdb", "c", ("full",), 1, tmp_path,
                            backend={"roles.judge.model": "m2"})
    assert session.env()["TMEM_ANSWER_MODEL"] == "gpt-x" and session.env()["TMEM_JUDGE_MODEL"] == "m2"


@pytest.mark.app
def test_failures_page_form_starts_a_batch(app, monkeypatch):
    calls = []
    monkeypatch.setattr(jobs, "start_batch", lambda *a, **k: calls.append((a, k)))
    at = app("pages/failures.py", corpus="golden")
    assert not at.exception
    assert any(e.label == "Run a batch" for e in at.expander)
    at.multiselect[0].set_value(["full", "no-discovery"])
    at.number_input[0].set_value(1)
    at.button(key="batch_start").click().run()
    assert not at.exception
    (db, corpus, variants, n), kwargs = calls[0]
    assert (corpus, variants, n, kwargs["limit"]) == ("golden", ["full", "no-discovery"], 1, 1)
    assert kwargs["backend"] == {"backend.preset": "offline"}


@pytest.mark.app
def test_progress_panel_and_show_its_results(app, app_db, tmp_path, monkeypatch):
    import json

    from tmem.api import APP_RUN

    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"run_id": "test-run"}))  # the template database's stored batch run
    job = jobs.BatchJob(app_db.resolve(), "golden", ("full", "flat"), 2, out, label="demo-offline",
                        stored=["full", "flat"])
    job.finished_at = job.started + 75
    monkeypatch.setitem(jobs._JOBS, str(app_db.resolve()), [job])
    at = app("pages/failures.py", corpus="golden", run=APP_RUN)
    assert not at.exception and at.selectbox(key="run").value == APP_RUN
    captions = [c.value.replace("\\", "") for c in at.caption]  # markdown escapes (md)
    assert "Batch demo-offline: done: 2 of 2 variants stored in 1 min 15 s" in captions
    at.button(key="show-demo-offline").click().run()
    assert not at.exception
    assert at.selectbox(key="run").value == "test-run"
    assert not [b for b in at.button if b.key == "show-demo-offline"], "shown: the button goes"


def _progress_texts(at) -> list[str]:
    return [p.proto.text.replace("\\", "") for p in at.get("progress")]  # the Markdown source, unescaped


@pytest.mark.app
def test_failures_opened_while_the_demo_batch_runs_shows_its_progress_from_the_first_draw(app, app_db, tmp_path,
                                                                                         monkeypatch):
    """Issue 43: the app started the demo batch (it has not finished: its run folder holds no result yet), the CLI
    stored a 3-row run meanwhile, and the first page opened is Failures: it shows the batch running with its
    progress beside the CLI's rows, not a silent 3-row table. The batch's child is a sleeper here (the real child is
    `python -m tmem run`, tested above)."""
    import sys

    from tmem.cli import main as cli

    if not Store(app_db).has_corpus("demo"):
        pytest.skip("no demo corpus in data/")
    assert cli(["run", "--db", str(app_db), "--corpus", "demo", "--variants", "bm25", "--limit", "3", "--out",
                str(tmp_path / "cli-run"), "--offline", "--quiet"]) == 0
    (jobs.runs_folder(app_db) / jobs.DEMO_RUN).mkdir(parents=True)  # started before, not complete: it resumes
    monkeypatch.setenv("TMEM_DEMO_BATCH", "on")
    monkeypatch.setattr(jobs.BatchJob, "command",
                        lambda self, variant: [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        at = app("pages/failures.py")
        assert not at.exception
        running = [t for t in _progress_texts(at) if "Batch demo-offline" in t]
        assert running and "running" in running[0] and "question-stages" in running[0], _progress_texts(at)
        assert any(" of 3 rows" in c.value for c in at.caption), "the CLI's run is listed beside it"
    finally:
        for job in jobs.jobs(app_db):
            job.cancel()
            _wait(job)


@pytest.mark.app
def test_a_batch_of_another_corpus_offers_no_results_here(app, app_db, tmp_path, monkeypatch):
    """Issue 42, item 8: the demo's "Show its results" reappeared on other corpora."""
    job = jobs.BatchJob(app_db.resolve(), "demo", ("full",), 2, tmp_path / "run", label="demo-offline",
                        stored=["full"])
    job.finished_at = job.started + 5
    monkeypatch.setitem(jobs._JOBS, str(app_db.resolve()), [job])
    at = app("pages/failures.py", corpus="golden")
    assert not at.exception and not [b for b in at.button if (b.key or "").startswith("show-")]
    assert not [c for c in at.caption if "demo-offline" in c.value]


@pytest.mark.app
def test_the_batch_form_offers_the_sessions_endpoint_once_one_is_applied(app, monkeypatch):
    """Issue 42, item 8: after an endpoint was applied, the batch form's backend stayed on the offline stand-ins."""
    calls = []
    monkeypatch.setattr(jobs, "start_batch", lambda *a, **k: calls.append((a, k)))
    at = app("pages/failures.py", corpus="golden")
    radio = next(r for r in at.radio if r.label == "Backend")
    assert radio.disabled and radio.value == "offline"
    at.session_state["backend_overrides"] = {"backend.preset": "recorded"}  # as Settings' *Apply* leaves it
    at.run()
    radio = next(r for r in at.radio if r.label == "Backend")
    assert not radio.disabled and radio.value == "session"
    at.button(key="batch_start").click().run()
    assert calls and calls[0][1]["backend"] == {"backend.preset": "recorded"}
