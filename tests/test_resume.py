"""Crash-safe stage records and resume (paper App. D.2): a run killed at any moment loses nothing already written,
and the resumed run ends with exactly one record per question and stage."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tmem.evaluation.batch.records import ERROR, OK, RecordWriter, make_record, read_records

ROOT = Path(__file__).resolve().parent.parent


def rec(qid, status=OK, **extra):
    return {**make_record(("s", "t", qid), run_id="r", variant="full", stage="seed_retrieval", config_hash="c",
                          backend="b", prompt_hashes={}, status=status), **extra}


def test_latest_record_per_key_wins(tmp_path):
    path = tmp_path / "x.jsonl"
    with RecordWriter(path) as w:
        w.append(rec("q1", ERROR, error="timeout"))
        w.append(rec("q2"))
        w.append(rec("q1"))
    log = read_records(path)
    assert log.records == 3 and log.counts[("s", "t", "q1")] == 2
    assert log.latest[("s", "t", "q1")]["status"] == OK and log.done(("s", "t", "q1"), "c", "b")
    assert not log.done(("s", "t", "q1"), "other-config", "b")
    assert not log.done(("s", "t", "q3"), "c", "b")


def test_a_torn_last_line_is_ignored_reported_and_moved_aside(tmp_path):
    path = tmp_path / "x.jsonl"
    with RecordWriter(path) as w:
        w.append(rec("q1"))
    full = json.dumps(rec("q2")) + "\n"
    with open(path, "ab") as handle:
        handle.write(full[: len(full) // 2].encode())  # the process died inside this write
    log = read_records(path)
    assert list(log.latest) == [("s", "t", "q1")] and log.torn and "torn" in log.torn[0][1]
    with RecordWriter(path) as w:  # the resumed run
        assert w.moved_torn > 0
        w.append(rec("q2"))
    log = read_records(path)
    assert log.torn == [] and sorted(log.latest) == [("s", "t", "q1"), ("s", "t", "q2")]
    assert all(n == 1 for n in log.counts.values())
    assert (tmp_path / "x.jsonl.torn").read_text().startswith('{"key"')  # kept for audit


def test_a_complete_line_without_its_newline_is_not_trusted(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(rec("q1")))  # the newline never reached the disk
    assert read_records(path).latest == {} and read_records(path).torn
    with RecordWriter(path) as w:
        w.append(rec("q1"))
    assert read_records(path).counts == {("s", "t", "q1"): 1}


def test_unreadable_middle_lines_are_reported(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(rec("q1")) + "\nnot json\n" + json.dumps(rec("q2")) + "\n")
    log = read_records(path)
    assert len(log.latest) == 2 and log.torn == [(2, log.torn[0][1])] and "unreadable" in log.torn[0][1]


# ----------------------------------------------------------------------------------------- batch-level resume
@pytest.fixture
def mini_db(tmp_path):
    from tmem.demo import generate
    from tmem.store import Store

    path = tmp_path / "mini.duckdb"
    store = Store(path)
    store.replace_corpus("mini", generate(7, 600, 1), format="demo")
    n = len(store.questions("mini"))
    store.close()
    return path, n


def run_cli(db, out, env_extra=None, **popen):
    env = {**os.environ, "TMEM_EMBEDDER": "lexical", "PYTHONPATH": str(ROOT), **(env_extra or {})}
    cmd = [sys.executable, "-m", "tmem", "run", "--db", str(db), "--corpus", "mini", "--variants", "full,flat",
           "--out", str(out), "--offline", "--quiet"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **popen)


def wait_for_lines(path: Path, n: int, proc, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before it could be killed:\n{proc.stdout.read().decode()}")
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {n} records in {path}")


@pytest.mark.app  # a whole pipeline run in child processes: make test-fast leaves it out
def test_sigkill_mid_stage_then_resume_gives_one_record_per_question_and_stage(mini_db, tmp_path):
    from tmem.pipeline.methods import get_method
    from tmem.pipeline.stages import plan

    db, n = mini_db
    out = tmp_path / "run"
    for stage, lines in (("discovery", 5), ("answer", 9)):  # killed twice, in two different stages
        proc = run_cli(db, out, {"TMEM_BATCH_DELAY": "0.05"})
        wait_for_lines(out / "full" / f"{stage}.jsonl", lines, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        partial = read_records(out / "full" / f"{stage}.jsonl")
        assert lines <= len(partial.latest) < n  # the kill came mid-stage
    proc = run_cli(db, out)
    output = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 0, output
    assert "skipped" in output and "VALIDATION FAILED" not in output
    for variant in ("full", "flat"):
        for stage in plan(get_method(variant)):
            log = read_records(out / variant / f"{stage}.jsonl")
            assert len(log.latest) == n, (variant, stage)
            assert set(log.counts.values()) == {1}, (variant, stage)  # never a duplicate
            assert all(r["status"] == OK for r in log.latest.values())


def test_a_failed_stage_is_retried_and_invalidates_later_stages(mini_db, tmp_path, monkeypatch):
    from tmem.evaluation.batch import run as batch
    from tmem.models.offline import offline_roles
    from tmem.pipeline import stages
    from tmem.pipeline.methods import get_method
    from tmem.store import Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    db, n = mini_db
    store = Store(db)
    questions = store.questions("mini")[:4]
    victim = questions[1].id
    real = stages.STAGE_FUNCTIONS["structuring"]

    def flaky(question, *args):
        if question.id == victim:
            raise TimeoutError("model service unavailable")
        return real(question, *args)

    def make_run():
        return batch.BatchRun(store, "mini", [get_method("full")], questions, tmp_path / "run", offline_roles(),
                              "r1", progress=False, log=lambda s: None)

    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "structuring", flaky)
    first = make_run()
    first.run()
    assert {s.stage: (s.ran, s.failed, s.blocked) for s in first.stats}["compression"] == (3, 0, 1)
    findings, results = batch.collect(first)
    rows = {r["question_id"]: r for r in results["full"][1]}
    assert rows[victim]["status"] == "error" and "TimeoutError" in rows[victim]["error"]
    broken = [f.message for f in findings if f.level == "error"]  # incomplete -> not reportable
    assert len(broken) == 1 and "full/structuring: 1 question(s) incomplete" in broken[0]
    assert "failed: TimeoutError: model service unavailable" in broken[0]

    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "structuring", real)
    second = make_run()
    second.run()
    ran = {s.stage: (s.ran, s.skipped) for s in second.stats}
    assert ran["seed_retrieval"] == (0, 4) and ran["structuring"] == (1, 3) and ran["judge"] == (1, 3)
    findings, results = batch.collect(second)
    assert not [f for f in findings if f.level == "error"]
    assert all(r["status"] == "ok" for r in results["full"][1])
    log = read_records(tmp_path / "run" / "full" / "structuring.jsonl")
    assert log.counts[(questions[1].scope, questions[1].type, victim)] == 2  # the failure stays in the history
    store.close()


def test_a_changed_upstream_record_reruns_downstream_stages(mini_db, tmp_path, monkeypatch):
    from tmem.evaluation.batch import run as batch
    from tmem.models.offline import offline_roles
    from tmem.pipeline.methods import get_method
    from tmem.store import Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    db, _ = mini_db
    store = Store(db)
    questions = store.questions("mini")[:3]
    run = batch.BatchRun(store, "mini", [get_method("flat")], questions, tmp_path / "run", offline_roles(), "r",
                         progress=False, log=lambda s: None)
    run.run()
    # Simulate a stage redone for one question (e.g. after a retry): append a fresh seed record for it.
    path = tmp_path / "run" / "flat" / "seed_retrieval.jsonl"
    log = read_records(path)
    key = run.key(questions[0])
    fresh = {**log.latest[key], "record_id": "fresh"}
    with RecordWriter(path) as w:
        w.append(fresh)
    again = batch.BatchRun(store, "mini", [get_method("flat")], questions, tmp_path / "run", offline_roles(), "r",
                           progress=False, log=lambda s: None)
    again.run()
    assert {s.stage: s.ran for s in again.stats} == {"seed_retrieval": 0, "answer": 1, "judge": 1}
    store.close()


def test_records_of_another_configuration_never_count(mini_db, tmp_path, monkeypatch):
    """A run at k = 36, then the same folder at k = 12 where one question's structuring fails and another question
    is never reached: their k = 36 records of the later stages are still the latest, but they are not this
    configuration's, so both questions are incomplete (errors), not answered from stale records."""
    from tmem.evaluation.batch import run as batch
    from tmem.evaluation.batch.summary import summarize
    from tmem.evaluation.metrics import Prices
    from tmem.models.offline import offline_roles
    from tmem.pipeline import stages
    from tmem.pipeline.methods import get_method
    from tmem.store import Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    db, _ = mini_db
    store = Store(db)
    questions = store.questions("mini")[:4]
    victim, unreached = questions[1], questions[3]

    def make_run(k, qs):
        return batch.BatchRun(store, "mini", [get_method("full", k)], qs, tmp_path / "run", offline_roles(), "r",
                              progress=False, log=lambda s: None)

    make_run(36, questions).run()
    real = stages.STAGE_FUNCTIONS["structuring"]

    def flaky(question, *args):
        if question.id == victim.id:
            raise TimeoutError("model service unavailable")
        return real(question, *args)

    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "structuring", flaky)
    make_run(12, questions[:3]).run()  # the process stopped before the fourth question
    rerun = make_run(12, questions)
    findings, results = batch.collect(rerun)
    broken = sorted(f.message for f in findings if f.level == "error")
    assert len(broken) == 2, broken
    assert broken[0].startswith("full/seed_retrieval: 1 question(s) incomplete") and \
        f"{unreached.id}: the latest record was made for another configuration" in broken[0]
    assert broken[1].startswith("full/structuring: 1 question(s) incomplete") and "TimeoutError" in broken[1]
    summary = summarize(rerun, results, Prices())["variants"]["full"]
    assert summary["questions"] == 4 and summary["incomplete"] == 2
    assert summary["accuracy"]["overall"]["judged"] == 2  # only the two complete chains were judged
    store.close()

