"""Scale: concurrent model calls within a question give the trace a sequential run gives;
message vectors are embedded on demand (window messages only) and cached in DuckDB; the BM25 index is persisted
in the database, reused by the next process and dropped by a re-import."""
import json
import random
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import pytest
from llm_server import fault_settings

from tmem.config import TMemConfig
from tmem.demo.golden import GOLD, MESSAGES, QUESTION
from tmem.evaluation.scripted_server import FaultServer, scripted_reply
from tmem.models.embedders import LexicalEmbedder, VectorStore
from tmem.models.factory import build_roles
from tmem.models.llm.concurrency import InFlight, fan_out, peak_in_flight
from tmem.pipeline.methods import get_method
from tmem.pipeline.retrieval import BM25Index, message_document
from tmem.pipeline.run import run_question
from tmem.pipeline.scope import Scope
from tmem.pipeline.stages import Context, Earlier, retrieve_seeds, run_discovery
from tmem.types import Message


# ------------------------------------------------------------------------------------------------ fan_out
def test_fan_out_keeps_input_order_and_counts_calls():
    done = []

    def slow(x):
        time.sleep(0.02 * (6 - x))  # the first items finish last
        return x * 10

    assert fan_out(slow, range(6), workers=6, progress=lambda d, n: done.append((d, n))) == [0, 10, 20, 30, 40, 50]
    assert done == [(i, 6) for i in range(1, 7)]


def test_fan_out_raises_the_first_failure_in_input_order():
    def fn(x):
        time.sleep(0.03 if x == 1 else 0.0)
        if x in (1, 3):
            raise ValueError(f"item {x}")
        return x

    with pytest.raises(ValueError, match="item 1"):
        fan_out(fn, range(5), workers=5)


def test_in_flight_bounds_and_counts_the_peak():
    slots = InFlight(3)
    barrier = threading.Barrier(3)

    def call(_):
        with slots:
            barrier.wait(timeout=5)  # three at once, no fourth
            time.sleep(0.02)

    fan_out(call, range(6), workers=6)
    assert (slots.now, slots.peak) == (0, 3)
    slots.reset()
    assert slots.peak == 0


# ------------------------------------------------------------------------------ concurrent == sequential
def _shuffled_reply(request: dict) -> str:
    time.sleep(random.uniform(0.0, 0.05))  # replies finish in another order than they were sent
    return scripted_reply(request)


def _normalised(trace) -> dict:
    """The trace without what legitimately differs between runs: stage timings."""
    data = json.loads(trace.to_json())
    for stage in data["stages"]:
        stage.pop("seconds")
    return data


def test_concurrent_calls_give_the_sequential_trace():
    server = FaultServer(default=("reply", _shuffled_reply))
    try:
        traces, peaks = {}, {}
        for bound in (1, 8):
            roles = build_roles(fault_settings(server.base_url, **{"concurrency.max_in_flight": bound,
                                                                    "cache.mode": "off", "llm.timeout": 10}))
            scope = Scope("golden-corpus", "golden", MESSAGES)
            traces[bound] = run_question(QUESTION, scope, TMemConfig(), roles, corpus="golden-corpus",
                                         variant="full", gold=GOLD)
            peaks[bound] = peak_in_flight(roles)
    finally:
        server.close()
    sequential, concurrent = traces[1], traces[8]
    assert sequential.stage("structuring").usage.calls >= 3  # enough independent calls to overlap
    assert peaks[1] == 1 and peaks[8] > 1
    assert _normalised(concurrent) == _normalised(sequential)


def test_an_offline_role_runs_its_calls_in_order(golden_scope, offline):
    """Offline roles compute in this process: one at a time, in window and child order (no threads)."""
    trace = run_question(QUESTION, golden_scope, TMemConfig(), offline, corpus="golden-corpus", variant="full")
    assert trace.nodes and peak_in_flight(offline) is None


# ------------------------------------------------------------------------------------------ vectors on demand
class CountingEmbedder(LexicalEmbedder):
    name = "counting-lexical"
    stored = True  # the store under test (the lexical fallback itself is not stored)

    def __init__(self):
        self.texts = 0

    def embed(self, texts, kind="passage"):
        if kind == "passage":
            self.texts += len(texts)
        return super().embed(texts, kind)


def _long_scope() -> Scope:
    """The golden conversation plus 300 messages of another topic half a year later: outside every window."""
    later = datetime(2025, 9, 1)
    filler = [Message(f"x{i:03d}", "golden", f"unrelated chatter number {i} about lunch",
                      later + timedelta(minutes=i), topic="office") for i in range(300)]
    return Scope("golden-corpus", "golden", [*MESSAGES, *filler])


def _discover(scope, embedder, offline):
    ctx = Context(get_method("full"), replace(offline, embedder=embedder))
    seeds = retrieve_seeds(QUESTION, scope, ctx, Earlier())
    return run_discovery(QUESTION, scope, ctx, Earlier.of(seeds))


def test_discovery_embeds_only_window_messages_and_the_store_keeps_them(fresh_store, offline):
    embedder = CountingEmbedder()
    scope = _long_scope()
    VectorStore(fresh_store).install(scope)
    first = _discover(scope, embedder, offline)
    embedded = embedder.texts
    assert 0 < embedded <= len(MESSAGES) < len(scope)  # the 300 far-away messages were never embedded
    stored = fresh_store.message_vectors("golden-corpus", "golden", embedder.name)
    assert len(stored) == embedded

    again = _long_scope()  # a new process: the rows come from DuckDB, nothing is embedded again
    VectorStore(fresh_store).install(again)
    second = _discover(again, embedder, offline)
    assert embedder.texts == embedded
    assert second.fields == first.fields


def test_on_demand_rows_equal_the_whole_scope_matrix(offline):
    embedder = CountingEmbedder()
    lazy, full = _long_scope(), _long_scope()
    matrix = full.vectors(embedder)  # the dense baselines' whole-scope embedding
    rows = [0, 5, 3, 250]
    assert np.array_equal(lazy.vectors_at(embedder, rows), matrix[rows])
    assert np.array_equal(lazy.vector_rows(embedder)[2], matrix[2])
    assert _discover(lazy, embedder, offline).fields == _discover(full, embedder, offline).fields


# ------------------------------------------------------------------------------------------ persisted BM25
def test_bm25_index_round_trips_through_bytes(golden_scope):
    docs = [message_document(m, ("channel", "topic")) for m in golden_scope.messages]
    index = BM25Index.build(docs)
    back = BM25Index.from_bytes(index.to_bytes())
    assert back.vocabulary == index.vocabulary and back.n_documents == index.n_documents
    assert (back.weights != index.weights).nnz == 0
    assert back.top_k(["launch", "march"], 5) == index.top_k(["launch", "march"], 5)
    assert BM25Index.from_bytes(b"not an index") is None


def test_bm25_index_is_saved_loaded_and_dropped_by_a_reimport(fresh_store, tmp_path):
    from tmem.corpora.imports import import_corpus
    from tmem.demo import generate, write_jsonl

    path = tmp_path / "small.jsonl"
    write_jsonl(generate(3, 600, 1), path)
    import_corpus(fresh_store, "jsonl", path, "small")
    name = fresh_store.scopes("small")[0]
    fields = ("channel", "topic")

    def scope():
        s = Scope("small", name, fresh_store.messages("small", name))
        s.index_store = fresh_store
        return s

    first = scope()
    built = first.bm25(fields)
    assert list(first.index_source.values()) == ["built and saved"]
    second = scope()
    loaded = second.bm25(fields)
    assert list(second.index_source.values()) == ["loaded"]
    assert loaded.top_k(["release", "date"], 10) == built.top_k(["release", "date"], 10)
    import_corpus(fresh_store, "jsonl", path, "small")  # a re-import drops the stored index
    third = scope()
    third.bm25(fields)
    assert list(third.index_source.values()) == ["built and saved"]


def test_the_row_cache_is_bounded_and_evicted_rows_come_back_from_the_store(fresh_store):
    embedder = CountingEmbedder()
    scope, reference = _long_scope(), _long_scope()
    VectorStore(fresh_store).install(scope)
    scope.row_cache = 4
    first = scope.vectors_at(embedder, [0, 1, 2, 3, 4, 5])  # one call may need more rows than the cache holds
    assert np.array_equal(first, reference.vectors(LexicalEmbedder())[[0, 1, 2, 3, 4, 5]])
    assert len(scope._rows[embedder.name]) == 4 and embedder.texts == 6
    assert np.array_equal(scope.vectors_at(embedder, [0, 1]), first[:2])  # evicted: read back, not re-embedded
    assert embedder.texts == 6


# ------------------------------------------------------------------------------- a million messages: memory
def test_message_columns_load_like_a_list_and_come_back_with_shared_strings(tmp_path):
    """The importer's Arrow columns and a list of Message objects store the same rows; messages read back share
    one string object per distinct metadata value (a 250,000-message scope repeats a few dozen)."""
    from tmem.store import Store
    from tmem.store.message_columns import MessageColumns
    from tmem.types import CorpusData

    columns = MessageColumns.from_messages(MESSAGES)
    assert len(columns) == len(MESSAGES) and list(columns) == list(MESSAGES) and columns == MESSAGES
    assert columns[-1] == MESSAGES[-1] and columns[1:3] == MESSAGES[1:3]
    rows = {}
    for name, messages in (("list", list(MESSAGES)), ("columns", columns)):
        store = Store(tmp_path / f"{name}.duckdb")
        store.replace_corpus("c", CorpusData(messages), format="test")
        rows[name] = store.cursor().execute("SELECT * FROM messages ORDER BY seq").fetchall()
        back = store.messages("c", MESSAGES[0].scope)
        store.close()
    assert rows["list"] == rows["columns"] and back == list(MESSAGES)
    authors = [m.author for m in back if m.author]
    assert len({id(a) for a in authors}) == len(set(authors)) < len(authors)
