"""The memory systems of App. B (tmem.baselines) as run variants, against a scripted OpenAI-compatible server on
127.0.0.1 (scripted_server/memory_replies.py): ingestion once per scope and its cache, resume after kill -9,
construction tokens per stage as the server counted them, the context in the trace (items traced to stored messages,
cut at B), the estimate, the refusal to run on the offline stand-ins, and the oracle bounds."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from waiting import wait_until

from tmem.baselines import SYSTEMS
from tmem.baselines.ingestion import forget
from tmem.cli import main as cli
from tmem.evaluation.scripted_server import FaultServer
from tmem.evaluation.scripted_server.memory_replies import memory_reply
from tmem.store import Store
from tmem.types import CorpusData, Gold

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-baselines-canary-0123456789abcdef"
# a packaged system whose optional package (requirements-baselines.txt) is missing is skipped, saying which
SYSTEM_NAMES = [pytest.param(n, marks=pytest.mark.skipif(bool(s.unavailable()), reason=s.unavailable() or ""))
                for n, s in SYSTEMS.items() if s.needs_llm]


def small_db(folder: Path, messages: int = 48) -> Path:
    """The demo generator's first `messages` messages of one scope and its first questions (gold cut to them)."""
    from tmem.demo import generate

    full = generate(7, 300, 1)
    kept = sorted(full.messages, key=lambda m: (m.timestamp, m.id))[:messages]
    ids = {m.id for m in kept}
    golds = [(s, replace(g, evidence=tuple(u for u in ((i for i in unit if i in ids) for unit in g.evidence)
                                           for u in [tuple(u)] if u)))
             for s, g in full.golds]
    golds = [(s, g) for s, g in golds if g.evidence][:2]
    questions = [q for q in full.questions if q.id in {g.question_id for _, g in golds}]
    links = [link for link in full.links if link[1] in ids and link[2] in ids]
    db = folder / "small.duckdb"
    store = Store(db)
    store.replace_corpus("small", CorpusData(kept, questions, golds, links), format="demo")
    store.close()
    return db


@pytest.fixture
def small(tmp_path):
    forget()
    yield small_db(tmp_path)
    forget()


class Replies:
    """memory_reply, counting the construction requests and their prompt tokens as the server counts them; after
    `hang_after` construction calls, it holds every further reply (a process killed mid-ingestion)."""

    def __init__(self, hang_after: int | None = None):
        self.lock, self.construction, self.hang_after, self.release = threading.Lock(), 0, hang_after, \
            threading.Event()
        self.roles: dict[str, int] = {}

    def __call__(self, request: dict) -> str:
        system = request["messages"][0]["content"]
        answer_or_judge = system.startswith(("You answer questions", "Judge"))
        with self.lock:
            if not answer_or_judge:
                self.construction += 1
            hang = self.hang_after is not None and self.construction > self.hang_after
        if hang:
            self.release.wait(30)
        return memory_reply(request)


@pytest.fixture
def server(monkeypatch):
    replies = Replies()
    s = FaultServer(default=("reply", replies), counted_usage=True)
    s.replies = replies
    for k, v in {"TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": s.base_url, "TMEM_EMBEDDER": "lexical",
                 "TMEM_LLM_API_KEY_ENV": "TMEM_TEST_API_KEY", "TMEM_TEST_API_KEY": KEY}.items():
        monkeypatch.setenv(k, v)
    yield s
    replies.release.set()
    s.close()


def run(db, out, variants, *extra) -> int:
    return cli(["run", "--db", str(db), "--corpus", "small", "--variants", variants, "--out", str(out), "--quiet",
                *extra])


@pytest.mark.integration
@pytest.mark.parametrize("name", SYSTEM_NAMES)
def test_a_system_ingests_once_and_answers_from_its_own_traced_context(name, small, tmp_path, server, capsys):
    assert run(small, tmp_path / "a", name) == 0
    sent = server.replies.construction
    assert sent > 0
    store = Store(small)
    rows = store.system_memories("small")
    assert [(r["system"], r["scope"]) for r in rows] == [(name, store.scopes("small")[0])]
    usage = rows[0]["usage"]
    llm_stages = {k: u for k, u in usage.items() if not k.endswith("(embedding)")}
    # tokens per construction stage (Table 6), as the server reported them; every construction call the server
    # received is an ingestion call of the stored usage or a query-time call of a trace's memory stage
    assert llm_stages and all(u["prompt_tokens"] > 0 and "server" in u["source"] for u in llm_stages.values())
    traces = [json.loads(t) for (t,) in store.cursor().execute("SELECT trace_json FROM traces").fetchall()]
    assert traces and all(t["variant"] == name for t in traces)
    scope_ids = {m.id for m in store.messages("small", store.scopes("small")[0])}
    for t in traces:
        stage = next(s for s in t["stages"] if s["name"] == "memory")
        assert SYSTEMS[name].label in stage["backend"]
        assert stage["counts"]["ingestion_prompt_tokens"] == sum(u["prompt_tokens"] for u in llm_stages.values())
        assert t["memories"] and all(set(m["source_ids"]) <= scope_ids for m in t["memories"])
        assert t["tokens_after_compression"] <= 8192
        assert t["flat_context"].startswith("<<<BEGIN RETRIEVED MEMORIES>>>")
        assert KEY not in json.dumps(t)
    query_calls = sum(s["usage"]["calls"] for t in traces for s in t["stages"] if s["name"] == "memory")
    assert sent == sum(u["calls"] for u in llm_stages.values()) + query_calls
    store.close()
    forget()  # a new process: the memory comes from the database, not from this one's memo
    before = len(server.requests)
    assert run(small, tmp_path / "b", name) == 0
    assert server.replies.construction == sent  # no construction call: the memory of the scope is reused
    assert len(server.requests) == before  # and answer and judge come from the response cache


@pytest.mark.integration
def test_a_system_does_not_run_on_the_offline_stand_ins(small, tmp_path, capsys):
    assert run(small, tmp_path / "off", "full,hipporag2") != 0
    err = capsys.readouterr().err
    assert "hipporag2" in err and "does not run on them" in err
    assert not (tmp_path / "off" / "hipporag2").exists()


@pytest.mark.integration
def test_an_ingestion_killed_with_sigkill_resumes_from_the_cache(small, tmp_path, server):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server.replies.hang_after = 10
    cmd = [sys.executable, "-m", "tmem", "run", "--db", str(small), "--corpus", "small", "--variants", "structmem",
           "--out", str(tmp_path / "killed"), "--quiet"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: server.replies.construction > 10, "the 11th construction call",
               alive=lambda: proc.poll() is None)
    os.kill(proc.pid, signal.SIGKILL)  # mid-ingestion: 10 replies cached, the 11th held
    proc.wait(10)
    assert Store(small).system_memories("small") == []  # no memory row: the memory was not complete
    server.replies.hang_after = None
    server.replies.release.set()
    killed = server.replies.construction
    assert run(small, tmp_path / "resumed", "structmem") == 0
    resumed = server.replies.construction - killed
    usage = Store(small).system_memories("small")[0]["usage"]
    calls = sum(u["calls"] for k, u in usage.items() if not k.endswith("(embedding)"))
    cached = sum(u["cached_calls"] for k, u in usage.items() if not k.endswith("(embedding)"))
    assert cached == 10 and calls == resumed  # the 10 answered calls replayed from the cache, the rest sent


@pytest.mark.integration
def test_the_estimate_counts_ingestion_without_sending(small, tmp_path, server, capsys):
    assert run(small, tmp_path / "e", "structmem,hipporag2", "--estimate", "--json") == 0
    est = json.loads(capsys.readouterr().out)
    assert server.requests == []
    for name in ("structmem", "hipporag2"):
        assert est["variants"][name]["ingestion"]["calls"] > 0
    # HippoRAG 2's OpenIE: two calls per passage, exactly (its prompts depend on no earlier reply but the NER)
    assert est["variants"]["hipporag2"]["ingestion"]["calls"] == 2 * 48
    assert Store(small).system_memories("small") == []  # an estimate's memory is never stored


@pytest.mark.integration
def test_oracle_evidence_holds_every_gold_unit_and_oracle_forest_links_by_the_gold_edges(tmp_path):
    from tmem.demo import generate

    data = generate(7, 300, 1)  # gold edges: each gold message after the first of its question UPDATEs the one before
    by_id = {m.id: m for m in data.messages}
    links = {}
    for scope, g in data.golds:
        chain = sorted({i for unit in g.evidence for i in unit}, key=lambda i: (by_id[i].timestamp, i))
        links.update({child: (scope, child, parent, "UPDATE") for parent, child in zip(chain, chain[1:])})
    db = tmp_path / "edges.duckdb"
    store = Store(db)
    store.replace_corpus("mini", replace(data, links=list(links.values())), format="demo")
    store.close()
    assert cli(["run", "--db", str(db), "--corpus", "mini", "--variants", "oracle-evidence,oracle-forest,full",
                "--limit", "3", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    store = Store(db)
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["variants"]["oracle-evidence"]["evidence_complete"] == 1.0
    assert summary["variants"]["oracle-evidence"]["recall"]["recall"] == 1.0
    traces = {(t["variant"], t["question"]["id"]): t for t in
              (json.loads(x) for (x,) in store.cursor().execute("SELECT trace_json FROM traces").fetchall())}
    gold_parent = {c: p for c, p, _ in store.gold_edges("mini", store.scopes("mini")[0]) if p}
    assert gold_parent
    for (variant, _), t in traces.items():
        if variant == "oracle-forest":
            for e in t["edges"]:
                assert gold_parent.get(e["child_id"]) == e["parent_id"]
            assert any(s["backend"].startswith("oracle:gold-edges") for s in t["stages"])
    store.close()


@pytest.mark.integration
def test_gold_of_a_question_never_reaches_a_systems_construction_prompt(small, tmp_path, server):
    assert run(small, tmp_path / "g", "hindsight") == 0
    store = Store(small)
    golds = [store.gold("small", q.scope, q.id) for q in store.questions("small")]
    construction = [json.dumps(r["messages"]) for r in server.requests
                    if not r["messages"][0]["content"].startswith(("You answer questions", "Judge"))]
    for g in golds:
        assert isinstance(g, Gold)
        assert all(g.answer not in text for text in construction if len(g.answer) > 12)
    store.close()


@pytest.mark.app
def test_failures_and_compare_read_a_baseline_run(small, tmp_path, server, monkeypatch):
    """A run of full beside a memory system (scripted server) on Failures and Compare: the system's row is there,
    a unit it missed is its own recall's miss (never an anchor, window or selection miss of stages it lacks), and
    Compare pairs it with full."""
    from conftest import start_app

    from tmem.analysis.funnel import ANCHOR_MISS, RECALL_MISS, SELECTION_MISS, WINDOW_MISS

    assert run(small, tmp_path / "both", "full,structmem") == 0
    monkeypatch.setenv("TMEM_DB", str(small))
    failures = start_app("pages/failures.py", corpus="small", run="both")
    assert not failures.exception
    table = next(d.value for d in failures.dataframe if "failure" in d.value.columns)
    mine = table[table["variant"] == "structmem"]
    assert len(mine) >= 1
    assert not set(mine["failure"]) & {ANCHOR_MISS, WINDOW_MISS, SELECTION_MISS}
    assert set(mine["failure"].dropna()) <= {RECALL_MISS, "cut at B", "answer wrong despite evidence", "", "—"}
    compare = start_app("pages/compare.py", corpus="small", run="both", a="full", b="structmem")
    assert not compare.exception
    assert "structmem" in "\n".join(m.value for m in compare.markdown) + "\n".join(
        str(d.value) for d in compare.dataframe)
