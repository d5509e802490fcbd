"""The API key never reaches a file the project writes: the DuckDB file (cache, vectors, traces), JSONL traces or
logs, even when a server echoes the Authorization header back in an error body."""
import logging
import re
import uuid

import pytest
from llm_server import fault_settings

from tmem.config import TMemConfig
from tmem.demo.golden import GOLD, MESSAGES, QUESTION
from tmem.evaluation.scripted_server import FaultServer, scripted_reply
from tmem.models.factory import build_roles, vector_store
from tmem.pipeline.run import run_question
from tmem.pipeline.scope import Scope
from tmem.store import Store


@pytest.fixture
def debug_log(tmp_path):
    handler = logging.FileHandler(tmp_path / "debug.log", encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # openai / httpx debug logging included
    yield tmp_path / "debug.log"
    root.removeHandler(handler)
    root.setLevel(old_level)
    handler.close()


def test_api_key_is_never_written(tmp_path, monkeypatch, debug_log):
    key = f"sk-tmem-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("TMEM_TEST_API_KEY", key)
    server = FaultServer(default=("echo_auth",))
    store = Store(tmp_path / "tmem.duckdb")
    config = TMemConfig().with_("discovery", top_n=5).with_("structuring", max_candidates=3)
    try:
        traces = []
        for default in (("echo_auth",), ("reply", scripted_reply)):
            server.default = default
            roles = build_roles(fault_settings(server.base_url, **{"llm.retries": 0}), store=store)
            scope = Scope("g", "golden", MESSAGES)
            vector_store(store).install(scope)
            for _ in range(2):  # the second run is served from the cache
                trace = run_question(QUESTION, scope, config, roles, corpus="g", gold=GOLD)
                store.save_trace(trace, roles.label)
                traces.append(trace)
        assert server.requests, "the key was sent to the server"
        echoed = [e.message for e in traces[0].errors if "upstream failed" in e.message]
        assert echoed and all("[redacted]" in m for m in echoed)  # the echo path was exercised
        assert traces[-1].stage("answer").usage.source == "cache"
        (tmp_path / "traces.jsonl").write_text("\n".join(t.to_json() for t in traces), encoding="utf-8")
    finally:
        server.close()
        store.close()
    logging.getLogger("tmem-test").debug("log file is live")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"tmem.duckdb", "traces.jsonl", "debug.log"} <= {p.name for p in written}
    for path in written:
        assert key.encode() not in path.read_bytes(), f"API key found in {path.name}"


# ------------------------------------------------------------- a key cut short by a truncation must not survive
def key_fragments(key: str, n: int = 8) -> set[str]:
    """Every run of n characters of the key: none may appear anywhere (a cut can leave any prefix of the key)."""
    return {key[i:i + n] for i in range(len(key) - n + 1)}


def leaked(text: str, key: str) -> list[str]:
    return sorted(f for f in key_fragments(key) if f in text)


def database_text(path) -> str:
    """Every row of every table of a DuckDB file, as text (compressed pages can hide strings from a byte grep)."""
    store = Store(path)
    try:
        tables = [r[0] for r in store.cursor().execute("SHOW TABLES").fetchall()]
        return "\n".join(str(store.cursor().execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)
    finally:
        store.close()


PADS = range(0, 640, 3)  # every 3rd cut position across the 200-character and 600-character limits


def test_a_padded_echo_of_the_key_is_redacted_wherever_a_cut_falls(tmp_path, monkeypatch):
    from tmem.models.base import AnswerEvidence
    from tmem.prompts import answer_prompt
    from tmem.types import Question

    key = f"sk-tmem-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("TMEM_TEST_API_KEY", key)
    server = FaultServer()
    store = Store(tmp_path / "tmem.duckdb")
    try:
        roles = build_roles(fault_settings(server.base_url, **{"llm.retries": 0}), store=store)
        question = Question("q", "s", "Who?", "u")
        prompt = answer_prompt("forest", "u", "Who?", "x")
        texts = []
        for pad in PADS:
            server.push(("echo_auth", pad), ("echo_auth_reply", pad), ("echo_auth_reply", pad))
            texts += [e.message for e in roles.answer.answer(question, prompt, AnswerEvidence(()), None).errors]
            answered = roles.answer.answer(Question("q", "s", f"Who {pad}?", "u"),
                                           answer_prompt("forest", "u", f"Who {pad}?", "x"), AnswerEvidence(()), None)
            texts.append(answered.text)  # a 200 reply echoing the key is scrubbed before it is parsed or cached
            selection = roles.evidence_utility.select(question, pad, MESSAGES[:2], [0.1, 0.2], None)
            texts += [e.message for e in selection.errors]  # the malformed-reply text is cut at 120 characters
        assert len(server.requests) == 3 * len(PADS)
    finally:
        server.close()
        store.close()
    for text in texts:
        assert not leaked(text, key), text
    assert sum("[redacted]" in t for t in texts) >= len(PADS)  # the echo reached the records
    assert any(re.search(r"Bearer \[[a-z]*$", t) for t in texts)  # some cut fell where the key was
    assert not leaked(database_text(tmp_path / "tmem.duckdb"), key)
    assert not leaked((tmp_path / "tmem.duckdb").read_bytes().decode("latin-1"), key)


def test_redact_removes_the_key_and_any_long_fragment_of_it():
    from tmem.models.llm.openai_backend import redact

    key = "sk-proj-0123456789abcdefghij"
    assert redact(f"a {key} b", key) == "a [redacted] b"
    assert redact(f"cut: {key[:20]}", key) == "cut: [redacted]"  # a prefix left by a truncation
    assert redact(f"{key[-9:]} tail", key) == "[redacted] tail"
    assert redact(f"short {key[:7]} ok", key) == f"short {key[:7]} ok"  # 7 characters tell nothing
    assert redact("nothing here", key) == "nothing here" and redact("x", None) == "x"


@pytest.mark.integration
def test_batch_run_records_and_database_never_hold_the_key(tmp_path, monkeypatch):
    """`python -m tmem run` against a server echoing the key in errors and replies: the JSONL records, manifest,
    summary and the DuckDB file (bytes and rows) stay clean."""
    from tmem.cli import main as cli
    from tmem.demo import generate
    from tmem.evaluation.batch.records import read_records

    key = f"sk-tmem-canary-{uuid.uuid4().hex}"
    db = tmp_path / "mini.duckdb"
    store = Store(db)
    store.replace_corpus("mini", generate(7, 600, 1), format="demo")
    store.close()
    server = FaultServer(default=("echo_auth", 131))
    server.push(*[b for pad in PADS for b in (("echo_auth", pad), ("echo_auth_reply", pad))])
    for name, value in {"TMEM_TEST_API_KEY": key, "TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": server.base_url,
                        "TMEM_LLM_API_KEY_ENV": "TMEM_TEST_API_KEY", "TMEM_LLM_RETRIES": "0",
                        "TMEM_EMBEDDER": "lexical"}.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "runs" / "mini"
    try:
        cli(["run", "--db", str(db), "--corpus", "mini", "--out", str(out), "--variants", "full", "--limit", "2",
             "--jobs", "2", "--quiet"])
    finally:
        server.close()
    assert server.requests, "the run called the server"
    records = sorted(out.glob("*/*.jsonl"))
    assert records and any("[redacted]" in p.read_text(encoding="utf-8") for p in records)
    assert any(read_records(p).latest for p in records)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"mini.duckdb", "run.json", "summary.json"} <= {p.name for p in written}
    for path in written:
        assert not leaked(path.read_bytes().decode("latin-1"), key), f"API key fragment in {path.name}"
    assert not leaked(database_text(db), key)


@pytest.mark.parametrize("status", [401, 500])
def test_an_embeddings_server_echoing_the_key_leaves_no_fragment_in_the_error(status):
    from tmem.models.embedders import OpenAIEmbedder

    key = f"sk-tmem-canary-{uuid.uuid4().hex}"
    server = FaultServer()
    try:
        embedder = OpenAIEmbedder("e", base_url=server.base_url, api_key_env="KEY", retries=0,
                                  env={"KEY": key})
        messages = []
        for pad in PADS:
            server.push(("echo_auth", pad, status))
            with pytest.raises(RuntimeError) as caught:
                embedder.embed(["text"])
            messages.append(str(caught.value))
    finally:
        server.close()
    assert len(server.requests) == len(PADS)
    for message in messages:
        assert not leaked(message, key), message
    assert status == 500 or sum("[redacted]" in m for m in messages) > 10  # the 401 body reached the error


@pytest.mark.integration
def test_the_batch_api_path_never_writes_the_key(tmp_path, monkeypatch):
    """`run --batch-api` against a batch server echoing the Authorization header in failed lines' errors and in
    text replies: the batch input and output files, run.json (batch ids), spend.json, records, summary and the
    database hold no fragment of the key."""
    from tmem.cli import main as cli
    from tmem.demo import generate

    key = f"sk-tmem-canary-{uuid.uuid4().hex}"
    db = tmp_path / "mini.duckdb"
    store = Store(db)
    store.replace_corpus("mini", generate(7, 600, 1), format="demo")
    store.close()
    server = FaultServer(default=("reply", scripted_reply), counted_usage=True)
    server.batch.echo_auth = True
    server.batch.fail = lambda line, batch_number: "quota exceeded" if batch_number == 1 else None
    for name, value in {"TMEM_TEST_API_KEY": key, "TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": server.base_url,
                        "TMEM_LLM_API_KEY_ENV": "TMEM_TEST_API_KEY", "TMEM_EMBEDDER": "lexical"}.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "runs" / "mini"
    try:
        cli(["run", "--db", str(db), "--corpus", "mini", "--out", str(out), "--variants", "full", "--limit", "2",
             "--batch-api", "--batch-poll", "0.02", "--quiet", "--price-input", "1", "--price-output", "1"])
    finally:
        server.close()
    assert len(server.batch.creates) >= 5  # the failed first batch, its follow-up, and the later stages
    outputs = sorted(out.glob("*/*.batch-*.output.jsonl"))
    assert outputs and any("[redacted]" in p.read_text(encoding="utf-8") for p in outputs)  # the echo came back
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"run.json", "spend.json", "discovery.batch-0.jsonl", "summary.json"} <= {p.name for p in written}
    for path in written:
        assert not leaked(path.read_bytes().decode("latin-1"), key), f"API key fragment in {path.name}"
    assert not leaked(database_text(db), key)
