"""The demo's shipped vectors: data/demo-vectors.npz holds exactly what MiniLM computes for every demo message
(every scope) and every demo question's query; a fresh database gets them with the demo, so the curated question and
the whole demo batch then embed nothing and give the same trace as without them; a file that no longer covers the
shipped demo fails here with the command that regenerates it; absent MiniLM or a broken file, they are not used."""
import dataclasses
import json

import numpy as np
import pytest

from tmem import api
from tmem.cli import main
from tmem.demo import CURATED_QUESTION, DEMO_CORPUS, DEMO_JSONL, DEMO_VECTORS, ensure_demo
from tmem.demo import vectors as demo_vectors
from tmem.evaluation.batch.jobs import MAIN_VARIANTS
from tmem.models import embedders
from tmem.models.factory import build_roles
from tmem.models.settings import BackendSettings
from tmem.prompts import text_hash

pytestmark = pytest.mark.skipif(embedders.minilm_files() is None, reason="MiniLM is not installed")
SCOPE, QID = CURATED_QUESTION
SAME = 1e-5  # float32 rounding; the file stores the float32 vectors the pipeline stored, not a float16 copy
STALE = f"data/demo-vectors.npz is stale: regenerate it with {demo_vectors.REGENERATE}"


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


def plain_demo():
    """A database with the shipped demo and no shipped vectors."""
    store = api.open_store(":memory:", demo=False)
    ensure_demo(store, vectors=None, sweep=None)
    return store


@pytest.fixture
def embedded(monkeypatch):
    """The texts MiniLM embeds from now on."""
    texts: list[str] = []
    encode = embedders.MiniLMEmbedder._encode
    monkeypatch.setattr(embedders.MiniLMEmbedder, "_encode", lambda self, b: (texts.extend(b), encode(self, b))[1])
    return texts


def test_the_shipped_file_is_minilms_float32_vectors():
    data = demo_vectors.load_demo_vectors()
    assert DEMO_VECTORS.stat().st_size < 5_000_000  # 4.3 MB: 3,000 x 384 float32, which barely compress
    assert data.embedder == embedders.MiniLMEmbedder.name
    assert data.vectors.dtype == np.float32 and data.vectors.shape == (len(data.ids), embedders.MiniLMEmbedder.dim)
    assert data.query_vectors.dtype == np.float32 and data.query_vectors.shape == (len(data.query_hashes), 384)
    assert np.allclose(np.linalg.norm(data.vectors, axis=1), 1, atol=1e-4)  # L2-normalised, as MiniLM's


def test_the_shipped_file_covers_every_demo_message_and_question():
    """What `python -m tmem demo --vectors` writes now, without embedding: one vector per message of the shipped
    demo (scope, id and text hash) and one per distinct question text. A changed demo fails here."""
    data, store = demo_vectors.load_demo_vectors(), plain_demo()
    messages = {(s, m.id): text_hash(m.text) for s in store.scopes(DEMO_CORPUS)
                for m in store.messages(DEMO_CORPUS, s)}
    assert len(messages) == sum(1 for line in DEMO_JSONL.open() if '"kind": "message"' in line)  # 3,000
    assert dict(zip(zip(data.scopes, data.ids), data.hashes)) == messages, STALE
    assert len(data.ids) == len(messages), "one row per message"
    queries = {text_hash(q.text) for q in store.questions(DEMO_CORPUS)}
    assert set(data.query_hashes) == queries and len(data.query_hashes) == len(queries), STALE


def test_the_shipped_vectors_are_what_minilm_computes_now():
    data, store = demo_vectors.load_demo_vectors(), plain_demo()
    texts = {(s, m.id): m.text for s in store.scopes(DEMO_CORPUS) for m in store.messages(DEMO_CORPUS, s)}
    rows = list(range(0, len(data.ids), max(len(data.ids) // 12, 1)))
    embedder = embedders.MiniLMEmbedder()
    now = embedder.embed([texts[(data.scopes[r], data.ids[r])] for r in rows])
    assert np.abs(now - data.vectors[rows]).max() <= SAME, STALE
    question, _ = api.stored_question(store, DEMO_CORPUS, QID, SCOPE)
    row = data.query_hashes.index(text_hash(question.text))
    assert np.abs(embedder.embed([question.text], "query")[0] - data.query_vectors[row]).max() <= SAME, STALE


def test_a_fresh_demo_answers_the_curated_question_without_embedding_and_unchanged(embedded, tmp_path):
    """With the shipped vectors nothing is embedded (the ONNX session never loads) and the trace is the one a
    database without them computes, which embeds the messages its windows rank and the query."""
    shipped = api.open_store(tmp_path / "shipped.duckdb")
    with_vectors = run_curated(shipped)
    assert embedded == [], STALE
    plain = api.open_store(tmp_path / "plain.duckdb", demo=False)
    ensure_demo(plain, vectors=None)
    without = run_curated(plain)
    question, _ = api.stored_question(plain, DEMO_CORPUS, QID, SCOPE)
    assert question.text in embedded and 1 < len(embedded) < len(demo_vectors.load_demo_vectors().ids)
    assert outputs(with_vectors) == outputs(without)


def test_a_changed_message_is_embedded_again(embedded, tmp_path, monkeypatch):
    """A shipped vector is used only while its text hash matches: a demo whose message changed gets the others'
    vectors from the file and embeds that one message."""
    lines = DEMO_JSONL.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "text": "A text the shipped file never saw."})
    changed = tmp_path / "demo.jsonl"
    changed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr("tmem.demo.DEMO_JSONL", changed)
    store = api.open_store(tmp_path / "changed.duckdb")
    scope = api.open_scope(store, DEMO_CORPUS, first["scope"])
    roles = build_roles(BackendSettings.from_sources({}, {}, {}), store=store, env={})
    scope.vectors_at(roles.embedder, [0, 1, 2])
    assert embedded == ["A text the shipped file never saw."]
    store.close()


@pytest.mark.slow
def test_the_whole_demo_batch_on_a_fresh_database_embeds_nothing(embedded, tmp_path):
    """The batch a first start runs in the background (offline roles, MiniLM, every question, the main variants),
    as `python -m tmem run` on a new database: every vector it needs is shipped (~14 s of CPU, embedding nothing;
    with the curated question's vectors only it embedded 2,228 texts, messages and queries)."""
    db = tmp_path / "first.duckdb"
    assert main(["run", "--db", str(db), "--corpus", DEMO_CORPUS, "--variants", ",".join(MAIN_VARIANTS), "--out",
                 str(tmp_path / "run"), "--offline", "--quiet"]) == 0
    assert embedded == [], STALE
    store = api.open_store(db)
    run_id = json.loads((tmp_path / "run" / "run.json").read_text())["run_id"]
    rows = store.run_results(DEMO_CORPUS, run_id)
    assert len(rows) == len(MAIN_VARIANTS) * len(store.questions(DEMO_CORPUS))  # the whole batch ran: 4 x 48
    store.close()


def test_the_command_writes_every_message_and_question_of_every_scope(embedded, tmp_path, monkeypatch):
    """`python -m tmem demo --vectors` on a small two-scope demo (the shipped one takes ~30 s of CPU): a row per
    message of each scope with its text hash, a row per distinct question text, each what MiniLM computes."""
    records = [json.loads(line) for line in DEMO_JSONL.open()]
    messages = [r for r in records if r["kind"] == "message"][:4]
    asked = next(r for r in records if r["kind"] == "question" and r["type"] == "abstention")
    small = [{**r, "scope": scope} for scope in ("Technology", "Finance") for r in (*messages, asked)]
    small[5]["text"] = "A second scope's own text."  # the second scope's first message differs
    corpus = tmp_path / "small.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in small))
    monkeypatch.setattr("tmem.demo.DEMO_JSONL", corpus)
    assert main(["demo", "--vectors", "--out", str(tmp_path / "small.npz")]) == 0
    data = demo_vectors.load_demo_vectors(tmp_path / "small.npz")
    wanted = [(r["scope"], r["id"], text_hash(r["text"])) for r in small if r["kind"] == "message"]
    assert list(zip(data.scopes, data.ids, data.hashes)) == wanted
    assert data.query_hashes == (text_hash(asked["text"]),)  # one text, asked in both scopes
    embedded.clear()
    now = embedders.MiniLMEmbedder().embed([r["text"] for r in small if r["kind"] == "message"])
    assert np.abs(now - data.vectors).max() <= SAME
    assert np.abs(embedders.MiniLMEmbedder().embed([asked["text"]], "query") - data.query_vectors).max() <= SAME


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
    assert demo_vectors.install_demo_vectors(store, DEMO_CORPUS) == 3000
    assert len(store.message_vectors(DEMO_CORPUS, SCOPE, embedders.MiniLMEmbedder.name)) == 3000


def test_another_embedders_file_is_ignored(tmp_path):
    """Vectors of another embedder are never read as MiniLM's, even with matching ids and hashes."""
    data = demo_vectors.load_demo_vectors()
    other = tmp_path / "other.npz"
    demo_vectors.save_demo_vectors(dataclasses.replace(data, embedder="lexical-hash-512 (lexical fallback)"), other)
    store = api.open_store(":memory:", demo=False)
    ensure_demo(store, vectors=None)
    assert demo_vectors.install_demo_vectors(store, DEMO_CORPUS, other) == 0
    assert store.message_vectors(DEMO_CORPUS, SCOPE, embedders.MiniLMEmbedder.name) == {}
