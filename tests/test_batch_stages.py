"""`run --batch-api`: every stage's model calls as one batch through a fake OpenAI Batch API on 127.0.0.1
(tmem.evaluation.scripted_server: /v1/files, /v1/batches, scripted delays, failures), its replies written as the stage's
records and cached; failed lines retried in a follow-up batch; a run killed at random points resumes with exactly
one record per question and stage and without submitting any batch twice."""
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mini_corpus import mini_db
from waiting import WAIT_S

from tmem.cli import main as cli
from tmem.evaluation.batch.records import OK, read_records
from tmem.evaluation.scripted_server import FaultServer, scripted_reply
from tmem.pipeline.methods import get_method
from tmem.pipeline.stages import plan

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-batch-canary-0123456789abcdef0123456789"


@pytest.fixture
def mini(tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    return mini_db(tmp_path)


@pytest.fixture
def server():
    s = FaultServer(default=("reply", scripted_reply), counted_usage=True)
    yield s
    s.close()


def env_for(server) -> dict:
    return {"TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": server.base_url, "TMEM_EMBEDDER": "lexical",
            "TMEM_LLM_API_KEY_ENV": "TMEM_TEST_API_KEY", "TMEM_TEST_API_KEY": KEY, "TMEM_LLM_RETRIES": "2"}


def args(db, out, limit=10):
    return ["run", "--db", str(db), "--corpus", "mini", "--variants", "full,flat", "--limit", str(limit), "--out",
            str(out), "--batch-api", "--batch-poll", "0.05", "--quiet"]


def assert_one_ok_record_per_question_and_stage(out, n):
    for variant in ("full", "flat"):
        for stage in plan(get_method(variant)):
            log = read_records(out / variant / f"{stage}.jsonl")
            assert len(log.latest) == n and set(log.counts.values()) == {1}, (variant, stage, log.counts)
            assert all(r["status"] == OK for r in log.latest.values()), (variant, stage)


@pytest.mark.integration
def test_a_batch_run_writes_each_stages_records_from_one_batch_and_caches_the_replies(mini, tmp_path, server,
                                                                                       monkeypatch, capsys):
    for k, v in env_for(server).items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "run"
    assert cli(args(mini, out)) == 0, capsys.readouterr().out
    assert not [r for r in server.requests if r.get("messages")]  # no online chat call: all went through batches
    parts = [tag.split("/", 1)[1] for tag, _, _ in server.batch.creates]
    assert parts == ["full/discovery/0", "full/structuring/0", "full/answer/0", "full/judge/0", "flat/answer/0"]
    # the flat variant's judgements are the full variant's (same answers): cache hits, no batch of their own
    assert_one_ok_record_per_question_and_stage(out, 10)
    lines = [json.loads(x) for x in (out / "full" / "discovery.batch-0.jsonl").read_text().splitlines()]
    assert {x["method"] for x in lines} == {"POST"} and {x["url"] for x in lines} == {"/v1/chat/completions"}
    ids = [x["custom_id"] for x in lines]
    assert len(ids) == len(set(ids))
    scope, qtype, qid, stage, config_hash, prompt_hash = ids[0].split("|")[0].split("/") + ids[0].split("|")[1:]
    assert stage == "discovery" and config_hash == get_method("full").hash and len(prompt_hash) >= 8
    record = read_records(out / "full" / "discovery.jsonl").latest[(scope, qtype, qid)]
    assert record["usage"]["source"] == "batch" and record["usage"]["calls"] > 0
    manifest = json.loads((out / "run.json").read_text())
    entry = manifest["batches"]["full/discovery"][0]
    assert entry["batch_id"] == "batch_1" and entry["downloaded"] and entry["status"] == "completed"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["spent"]["this_pass"]["calls"] == sum(n for _, _, n in server.batch.creates)
    # replies are cached like online calls: a rerun in another folder sends nothing at all
    created = len(server.batch.creates)
    assert cli(args(mini, tmp_path / "again")) == 0
    assert len(server.batch.creates) == created and not [r for r in server.requests if r.get("messages")]


@pytest.mark.integration
def test_failed_lines_go_into_a_follow_up_batch_and_persistent_failures_become_error_records(mini, tmp_path, server,
                                                                                            monkeypatch, capsys):
    for k, v in env_for(server).items():
        monkeypatch.setenv(k, v)
    failing = set()

    def fail(line, batch_number):
        if batch_number == 1 and len(failing) < 3:  # three lines of the first batch fail once
            failing.add(line["custom_id"])
        if line["custom_id"] in failing and batch_number == 1:
            return "scripted line failure"
        if "|judge|" in line["custom_id"] and line["custom_id"].startswith(first_judge[0]):
            return "this judgement never succeeds"
        return None
    first_judge = [""]
    server.batch.fail = fail
    from tmem.store import Store

    store = Store(mini)
    q = store.questions("mini")[0]
    store.close()
    first_judge[0] = f"{q.scope}/{q.type}/{q.id}"
    out = tmp_path / "run"
    assert cli(args(mini, out, limit=4)) == 0
    printed = capsys.readouterr().out
    parts = [tag.split("/", 1)[1] for tag, _, _ in server.batch.creates]
    assert parts[:2] == ["full/discovery/0", "full/discovery/1"]  # the follow-up batch
    assert server.batch.creates[1][2] == 3  # only the failed lines
    judge = parts.count("full/judge/0") + parts.count("full/judge/1") + parts.count("full/judge/2")
    assert judge == 3  # the failing judgement: retried twice (retries = 2), then given up
    record = read_records(out / "full" / "judge.jsonl").latest[(q.scope, q.type, q.id)]
    assert record["status"] == "error" and "this judgement never succeeds" in record["error"]
    assert "failed and used a fallback" in printed


@pytest.mark.integration
def test_a_budget_cap_submits_only_what_fits_and_the_run_resumes(mini, tmp_path, server, monkeypatch, capsys):
    for k, v in env_for(server).items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "run"
    capped = args(mini, out, limit=4) + ["--max-tokens", "60000"]
    assert cli(capped) == 1  # stopped: incomplete questions fail validation, nothing stored
    printed = capsys.readouterr().out
    assert "STOPPED: budget cap --max-tokens 60000 reached" in printed
    spent = json.loads((out / "spend.json").read_text())["total"]
    assert spent["prompt_tokens"] + spent["completion_tokens"] <= 60000
    assert cli(args(mini, out, limit=4)) == 0  # no cap: it continues where it stopped
    for stage in plan(get_method("full")):
        log = read_records(out / "full" / f"{stage}.jsonl")
        assert len(log.latest) == 4 and set(log.counts.values()) == {1}


def run_cli(db, out, server):
    env = {**os.environ, **env_for(server), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tmem", *args(db, out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.app  # a whole pipeline run in child processes: make test-fast leaves it out
def test_killed_at_random_points_the_run_resumes_without_duplicates(mini, tmp_path, server):
    """kill -9 at random moments (during uploads, polls, downloads and record writing), then resume: exactly one
    record per question and stage, and no batch created twice nor any request line in two batches."""
    server.batch.start_delay, server.batch.line_delay, server.batch.answer_delay = 0.3, 0.002, 0.3
    out = tmp_path / "run"
    rng = random.Random(23)
    done = lambda: sum(b["status"] == "completed" for b in server.batch.batches.values())  # noqa: E731
    moments = [  # (what must have happened, seconds to wait after it at most) on the fake server's side
        (lambda: server.batch.uploads, 0.1),  # uploaded, the answer not yet back: the restart finds the file
        (lambda: server.batch.creates, 0.1),  # created, the answer not yet back: the restart finds the batch
        (lambda: server.batch.creates, 0.6),  # created, being polled
        (lambda: done() >= 1, 0.3),  # completed: downloading, caching, writing the stage's records
        (lambda: len(server.batch.creates) >= 3, 0.5),  # a later stage's batch
        (lambda: (out / "flat" / "seed_retrieval.jsonl").exists(), 0.5)]  # the second variant
    kills = []  # (batches created, completed) when each kill came
    for happened, jitter in moments:
        proc = run_cli(mini, out, server)
        deadline = time.time() + WAIT_S
        while not happened() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, jitter))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        kills.append((len(server.batch.creates), done()))
    assert len(kills) >= 5 and len(set(kills)) >= 3, kills  # the kills came at different points of the run
    proc = run_cli(mini, out, server)
    output = proc.communicate(timeout=600)[0].decode()
    assert proc.returncode == 0, output
    assert_one_ok_record_per_question_and_stage(out, 10)
    tags = [tag for tag, _, _ in server.batch.creates]
    assert len(tags) == len(set(tags)), tags  # no batch submitted twice
    names = server.batch.uploads
    assert len(names) == len(set(names)), names  # no file uploaded twice
    seen = []
    for fid in {f for _, f, _ in server.batch.creates}:
        seen += [json.loads(x)["custom_id"] for x in server.batch.files[fid]["data"].decode().splitlines()]
    assert len(seen) == len(set(seen))  # no request line sent twice (no line failed here)
    assert not [r for r in server.requests if r.get("messages")]


# ------------------------------------------------------------------ malformed and huge outputs (issue 44, row 2)
GOOD = {"id": "r", "custom_id": "c1", "error": None, "response": {"status_code": 200, "body": {
    "choices": [{"message": {"role": "assistant", "content": "fine"}}], "usage": {"prompt_tokens": 5,
                                                                                  "completion_tokens": 2}}}}


def _shaped(line: dict, shape: int) -> dict | str:
    """The nine reply shapes that crashed parse_results (AttributeError), then a negative usage."""
    body = line["response"]["body"]
    changes = [("choices", "a string"), ("choices", 3), ("choices", [[{"message": {"content": "x"}}]]),
               ("message", "a string"), ("content", 7), ("content", {"text": "x"}), ("usage", "10 tokens"),
               ("usage", [10, 2]), ("infinity", None), ("negative", None)]
    where, value = changes[shape % len(changes)]
    if where in ("choices", "usage"):
        body[where] = value
    elif where == "message":
        body["choices"][0]["message"] = value
    elif where == "content":
        body["choices"][0]["message"]["content"] = value
    elif where == "negative":
        body["usage"] = {"prompt_tokens": -9_900_000, "completion_tokens": 5}
    else:
        body["usage"]["completion_tokens"] = "INF"
        return json.dumps(line).replace('"INF"', "Infinity") + "\n"
    return line


def test_every_reply_shape_is_a_result_or_the_lines_failure_never_a_crash():
    from tmem.models.llm.batch_client import parse_results

    lines = []
    for shape in range(10):
        line = json.loads(json.dumps(GOOD)) | {"custom_id": f"c{shape}"}
        shaped = _shaped(line, shape)
        lines.append(shaped.strip() if isinstance(shaped, str) else json.dumps(shaped))
    lines += ["not json", "[1, 2]", '{"custom_id": 5}', json.dumps(GOOD)]
    found = dict(parse_results(lines))
    assert found["c1"].text == "fine" and (found["c1"].prompt_tokens, found["c1"].completion_tokens) == (5, 2)
    for shape in (0, 2, 3, 4, 5, 6, 7, 8, 9):
        result = found[f"c{shape}"]
        assert result.text is None and result.error.startswith("malformed batch output line"), (shape, result)
    assert "impossible usage" in found["c9"].error and "-9900000" in found["c9"].error
    assert "impossible usage" in found["c8"].error  # Infinity


@pytest.mark.integration
def test_malformed_reply_lines_go_into_the_follow_up_batch_and_a_rerun_reads_the_output_again(
        mini, tmp_path, server, monkeypatch, capsys):
    for k, v in env_for(server).items():
        monkeypatch.setenv(k, v)
    count = [0]

    def mangle(line, batch_number):
        if batch_number == 1:  # the first batch (discovery): every line of another shape, in turn
            count[0] += 1
            return _shaped(line, count[0])
        return line
    server.batch.mangle = mangle
    out = tmp_path / "run"
    assert cli(args(mini, out, limit=3)) == 0, capsys.readouterr().out
    parts = [tag.split("/", 1)[1] for tag, _, _ in server.batch.creates]
    assert parts[:2] == ["full/discovery/0", "full/discovery/1"]
    assert server.batch.creates[1][2] == server.batch.creates[0][2] == count[0]  # every line again, nothing else
    for stage in plan(get_method("full")):
        assert all(r["status"] == OK for r in read_records(out / "full" / f"{stage}.jsonl").latest.values())
    spent = json.loads((out / "spend.json").read_text())["total"]
    assert spent["prompt_tokens"] >= 0 and spent["completion_tokens"] >= 0
    created = len(server.batch.creates)
    assert cli(args(mini, out, limit=3)) == 0  # the rerun reads the saved outputs again: no crash, nothing sent
    assert len(server.batch.creates) == created


@pytest.mark.integration
def test_an_output_file_the_server_names_again_is_not_downloaded_again(mini, tmp_path, server, monkeypatch):
    for k, v in env_for(server).items():
        monkeypatch.setenv(k, v)
    server.batch.fail = lambda line, n: "scripted failure" if n > 0 and "|discovery|" in line["custom_id"] \
        and line["custom_id"].startswith(first[0]) else None
    server.batch.reuse_output = True  # every later batch names the first batch's output file
    from tmem.store import Store

    store = Store(mini)
    q = store.questions("mini")[0]
    store.close()
    first = [f"{q.scope}/{q.type}/{q.id}"]
    out = tmp_path / "run"
    cli(args(mini, out, limit=2))
    assert len(server.batch.creates) >= 3  # the failing lines were retried in follow-up batches
    assert len(server.batch.downloads) == len(set(server.batch.downloads)), server.batch.downloads


def test_outputs_are_streamed_line_by_line_within_a_size_cap(tmp_path, server, monkeypatch):
    import tracemalloc

    from tmem.models.llm import batch_client as batch_api
    from tmem.models.llm.openai_backend import Endpoint

    line = json.dumps(GOOD) + "\n"
    server.batch.files["file-big"] = {"filename": "big", "purpose": "batch_output",
                                      "data": (line * 2 + "x" * 5000 + "\n" + line * 200).encode()}
    monkeypatch.setattr(batch_api, "MAX_LINE_BYTES", 4000)
    monkeypatch.setattr(batch_api, "MAX_OUTPUT_BYTES", len(line) * 100)
    api = batch_api.BatchClient(Endpoint(server.base_url, "TMEM_TEST_API_KEY", 10, env={"TMEM_TEST_API_KEY": KEY}))
    dest = tmp_path / "out.jsonl"
    assert api.download("file-big", dest) == len(line) * 100  # the long line left out, then cut at the cap
    assert dest.read_text() == line * 100 and not (tmp_path / "out.jsonl.part").exists()
    # reading a saved output holds one line at a time and only the replies asked for
    big = tmp_path / "big.output.jsonl"
    with big.open("w") as f:
        for i in range(20_000):
            f.write(json.dumps(GOOD | {"custom_id": f"c{i}"}) + "\n")
    tracemalloc.start()
    found = batch_api.read_results(big, {"c7", "c19999"})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert set(found) == {"c7", "c19999"} and found["c7"].text == "fine"
    assert peak < 3 * 1024 ** 2, f"{peak:,} bytes to read a {big.stat().st_size:,}-byte output"
