"""The demo's shipped vectors: data/demo-vectors.npz holds exactly what MiniLM computes for the
curated question's window messages and query, a fresh database gets them with the demo, the curated question then
embeds nothing and gives the same trace as without them; absent MiniLM or a broken file, they are not used."""
import dataclasses

import numpy as np
import pytest

from tmem import api
from tmem.cli import main
from tmem.demo import CURATED_QUESTION, DEMO_CORPUS, DEMO_VECTORS, ensure_demo
from tmem.demo import vectors as demo_vectors
from tmem.models import embedders
from tmem.models.factory import build_roles
from tmem.models.settings import BackendSettings
from tmem.prompts import text_hash

pytestmark = pytest.mark.skipif(embedders.minilm_files() is None, reason="MiniLM is not installed")
SCOPE, QID = CURATED_QUESTION
SAME = 1e-5  # float32 rounding; the file stores the float32 vectors the pipeline stored, not a float16 copy


def run_curated(store):
    roles = build_roles(BackendSettings.from_sources({}, {}, {}), store=store, env={})
    question, gold = api.stored_question(store, DEMO_CORPUS, QID, SCOPE)
    return api.run_and_store(store, DEMO_CORPUS, question, "full", api.resolve_config("full"), roles, gold,
                             save=False)


def outputs(trace):
    """Everything the pipeline decided, without timings; window similarities to SAME (the shipped float32 vectors
    and a fresh embedding on another CPU differ in the last bits: 0.65575784 vs 0.6557579 on this machine)."""
    out = {f.name: getattr(trace, f.name) for f in dataclasses.fields(trace) if f.name != "stages"}
    out["windows"] = tuple(dataclasses.replace(w, candidates=tuple(
        dataclasses.replace(c, similarity=round(c.similarity, 5)) for c in w.candidates)) for w in out["windows"])
    return out


@pytest.fixture
def embedded(monkeypatch):
    """The texts MiniLM embeds from now on."""
    texts: list[str] = []
    batch = embedders.MiniLMEmbedder._batch
    monkeypatch.setattr(embedders.MiniLMEmbedder, "_batch", lambda self, b: (texts.extend(b), batch(self, b))[1])
    return texts


def test_the_shipped_file_is_small_and_named_for_minilm():
    data = demo_vectors.load_demo_vectors()
    assert DEMO_VECTORS.stat().st_size < 250_000
    assert data.embedder == embedders.MiniLMEmbedder.name and data.scope == SCOPE
    assert data.vectors.dtype == np.float32 and data.vectors.shape == (len(data.ids), embedders.MiniLMEmbedder.dim)
    assert len(set(data.ids)) == len(data.ids) >= 50 and len(data.query_hashes) == 1


def test_the_shipped_vectors_are_what_minilm_computes_now():
    data = demo_vectors.load_demo_vectors()
    store = api.open_store(":memory:", demo=False)
    ensure_demo(store, vectors=None)
    scope = api.open_scope(store, DEMO_CORPUS, SCOPE)
    texts = {m.id: m.text for m in scope.messages}
    rows = list(range(0, len(data.ids), max(len(data.ids) // 8, 1)))
    embedder = embedders.MiniLMEmbedder()
    now = embedder.embed([texts[data.ids[r]] for r in rows])
    assert np.abs(now - data.vectors[rows]).max() <= SAME
    assert [text_hash(texts[data.ids[r]]) for r in rows] == [data.hashes[r] for r in rows]
    question, _ = api.stored_question(store, DEMO_CORPUS, QID, SCOPE)
    assert data.query_hashes == (text_hash(question.text),)
    assert np.abs(embedder.embed([question.text], "query") - data.query_vectors).max() <= SAME


def test_a_fresh_demo_answers_the_curated_question_without_embedding_and_unchanged(embedded, tmp_path):
    """With the shipped vectors nothing is embedded (the ONNX session never loads) and the trace is the one a
    database without them computes; the regeneration command writes the same file."""
    shipped = api.open_store(tmp_path / "shipped.duckdb")
    with_vectors = run_curated(shipped)
    assert embedded == [], f"data/demo-vectors.npz is stale: regenerate it with {demo_vectors.REGENERATE}"
    plain = api.open_store(tmp_path / "plain.duckdb", demo=False)
    ensure_demo(plain, vectors=None)
    without = run_curated(plain)
    assert len(embedded) == len(demo_vectors.load_demo_vectors().ids) + 1  # its window messages and the query
    assert outputs(with_vectors) == outputs(without)

    assert main(["demo", "--vectors", "--out", str(tmp_path / "again.npz")]) == 0
    again, data = demo_vectors.load_demo_vectors(tmp_path / "again.npz"), demo_vectors.load_demo_vectors()
    assert (again.embedder, again.ids, again.hashes, again.query_hashes) == \
        (data.embedder, data.ids, data.hashes, data.query_hashes)
    assert np.abs(again.vectors - data.vectors).max() <= SAME


def test_not_used_without_minilm_or_with_a_broken_file(monkeypatch, tmp_path):
    store = api.open_store(":memory:", demo=False)
    ensure_demo(store, vectors=None)
    monkeypatch.setattr(demo_vectors, "minilm_files", lambda: None)  # the lexical fallback computes its own
    assert demo_vectors.install_demo_vectors(store, DEMO_CORPUS) == 0
    monkeypatch.undo()
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip")
    with pytest.warns(UserWarning, match=r"broken\.npz: not a demo vectors file.*python -m tmem demo --vectors"):
        assert demo_vectors.install_demo_vectors(store, DEMO_CORPUS, broken) == 0
    assert store.message_vectors(DEMO_CORPUS, SCOPE, embedders.MiniLMEmbedder.name) == {}
    assert demo_vectors.install_demo_vectors(store, DEMO_CORPUS) == len(demo_vectors.load_demo_vectors().ids)
