"""Mem0 (Chhikara et al., 2025) through its published package, `mem0ai` (requirements-baselines.txt): the package's
own `Memory` (its extraction prompt, hash de-duplication, vector store and search scoring) builds and searches the
memory; tmem only feeds it and reads it back.

- The language model and the embedder are the run's: `Memory.llm` is the memory-processing role's client (its base
  URL, model, key from the environment variable the settings name, concurrency bound, response cache and budget
  cap, tmem.baselines.construction), and `Memory.embedding_model` is the run's embedder. mem0's own OpenAI
  provider also takes a base URL, but its calls would bypass the cache (no resume after a kill), the budget and
  the usage count, so its providers are not built at all (no key is handed to the package).
- The vector store is the package's local Qdrant and its history database SQLite, both in a temporary folder
  under `systems/mem0/` beside the run's database (never the home folder; MEM0_DIR points there too, as the
  package creates it on import). Telemetry (PostHog) is off: MEM0_TELEMETRY=False before the import.
- Ingestion, once per scope: each channel's messages, in chunks of `chunk_messages`, go to `Memory.add` (one
  extraction call each) under one user id per scope, each message a JSON record (its text a string literal), with
  the chunk's message ids as metadata: every memory written from a chunk is traced to that chunk's messages
  (mem0 keeps metadata, not which message a fact came from). The memory (points, vectors, payloads) is then
  stored as JSON like every system's (tmem.baselines.ingestion) and rebuilt in a fresh Memory for retrieval.
- Retrieval: `Memory.search` top-k (the package's default 20 and threshold 0.1), rendered under the shared cap.
- Not used: spaCy entity boosts and lemmatisation (mem0ai[nlp] downloads en_core_web_sm at run time) and the BM25
  keyword channel (fastembed's Qdrant/bm25 comes from a model hub): search is the package's semantic scoring.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import threading
from collections import defaultdict
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from tmem.baselines.base import DATA_NOTE, Built, Item, System, chunks, message_record, pack, unpack

PACKAGE = "mem0ai"
_LOCK = threading.Lock()  # Memory construction swaps the package's factories; searches share one adapter
_LIVE: dict[str, tuple[Any, Any, tempfile.TemporaryDirectory]] = {}  # digest -> (Memory, adapters, folder)


def version() -> str | None:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return None


class RunLLM:
    """mem0's LLM interface over the run's construction model: each call is one counted, cached call of the
    `extraction` stage; mem0 parses the JSON text it returns."""

    def __init__(self, tools):
        self.tools = tools

    def generate_response(self, messages, response_format=None, tools=None, tool_choice="auto", **_):
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = "\n\n".join(m["content"] for m in messages if m["role"] != "system")
        standin = {"memory": [{"id": str(i), "text": r.get("text", ""), "attributed_to": "user"}
                              for i, r in enumerate(extraction_records(user))]}
        return json.dumps(self.tools.ask("extraction", system, user, "memory", standin, temperature=0.0))


class RunEmbedder:
    """mem0's embedder interface over the run's embedder (tokens counted per mem0 action)."""

    def __init__(self, tools):
        self.tools = tools
        self.config = None

    def embed(self, text, memory_action=None):
        return self.embed_batch([text], memory_action)[0]

    def embed_batch(self, texts, memory_action="add"):
        kind = "query" if memory_action == "search" else "passage"
        return [v.tolist() for v in self.tools.embed(f"mem0 {memory_action or 'add'}", list(texts), kind=kind)]


def extraction_records(user_prompt: str) -> list[dict]:
    """The message records (`user: {json}` lines) of an extraction prompt's New Messages: what the estimate's
    stand-in reply and the scripted server's replies (tmem.evaluation.scripted_server.memory_replies) read."""
    out = []
    for line in user_prompt.splitlines():
        if line.startswith("user: {"):
            try:
                out.append(json.loads(line[len("user: "):]))
            except ValueError:
                pass
    return out


def _import_mem0(workdir: Path):
    """The package, imported with telemetry off and its home folder under the run's data folder."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(workdir / "mem0-home"))
    # its warnings name the extras left out on purpose (spaCy, fastembed: both load models from a hub at run time)
    logging.getLogger("mem0").setLevel(logging.ERROR)
    import mem0.memory.main as main
    import mem0.memory.telemetry as telemetry

    telemetry.MEM0_TELEMETRY = main.MEM0_TELEMETRY = False  # in case it was imported before, with it on
    return main


def _workdir(tools) -> Path:
    folder = Path(tools.workdir) if tools.workdir else Path(tempfile.gettempdir()) / "tmem-systems" / "mem0"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_memory(tools, dims: int):
    """A mem0 Memory on the run's models, its Qdrant store and history in a new temporary folder."""
    workdir = _workdir(tools)
    main = _import_mem0(workdir)
    from mem0.utils import factory

    folder = tempfile.TemporaryDirectory(prefix="mem0-", dir=workdir)
    llm, embedder = RunLLM(tools), RunEmbedder(tools)
    config = main.MemoryConfig(
        vector_store={"provider": "qdrant", "config": {"collection_name": "tmem", "embedding_model_dims": dims,
                                                        "path": str(Path(folder.name) / "qdrant"),
                                                        "on_disk": True}},
        history_db_path=str(Path(folder.name) / "history.db"), custom_instructions=DATA_NOTE)
    with _LOCK:  # the run's models in place of the providers mem0 would build (and hand a key to)
        saved = factory.LlmFactory.__dict__["create"], factory.EmbedderFactory.__dict__["create"]
        factory.LlmFactory.create = staticmethod(lambda *a, **k: llm)
        factory.EmbedderFactory.create = staticmethod(lambda *a, **k: embedder)
        try:
            memory = main.Memory(config)
        finally:
            factory.LlmFactory.create, factory.EmbedderFactory.create = saved
    return memory, (llm, embedder), folder


class Mem0(System):
    name = "mem0"
    label = f"mem0ai {version() or '(not installed)'}"
    source = "package"
    config = {"chunk_messages": 12, "top_k": 20, "threshold": 0.1, "vector_store": "qdrant (local)",
              "search": "semantic (no spaCy entities, no fastembed BM25)", "package": version()}

    @property
    def prompts(self) -> dict[str, str]:
        """The package's prompts (its configs/prompts.py, by digest: a new version is a new memory), read without
        importing mem0 (its import creates its home folder, see `_import_mem0`)."""
        spec = importlib.util.find_spec("mem0") if version() else None
        if spec is None or not spec.submodule_search_locations:
            return {}
        source = Path(next(iter(spec.submodule_search_locations))) / "configs" / "prompts.py"
        digest = hashlib.sha256(source.read_bytes()).hexdigest() if source.is_file() else "?"
        return {"mem0/configs/prompts.py sha256": digest, "instructions": DATA_NOTE}

    def unavailable(self) -> str | None:
        if version() is None:
            return ("mem0 needs the optional package mem0ai, which is not installed: "
                    ".venv/bin/pip install -r requirements-baselines.txt")
        return None

    def ingest(self, scope, tools) -> Built:
        dims = tools.embedder.embed(["dimension probe"], "passage").shape[1]
        memory, _, folder = open_memory(tools, dims)
        user = user_id(scope)
        by_channel: dict = defaultdict(list)
        for m in sorted(scope.messages, key=lambda m: (m.timestamp, m.id)):
            by_channel[m.channel].append(m)
        for channel, messages in by_channel.items():
            for chunk in chunks(messages, self.config["chunk_messages"]):
                turns = [{"role": "user", "content": json.dumps(message_record(m), ensure_ascii=False)}
                         for m in chunk]
                meta = {"message_ids": [m.id for m in chunk], "channel": channel or "",
                        "time": chunk[-1].timestamp.isoformat(timespec="minutes")}
                memory.add(turns, user_id=user, metadata=meta)
        points = exported(memory)
        with _LOCK:
            memory.close()
            memory.vector_store.client.close()
        folder.cleanup()
        vectors = np.asarray([p.pop("vector") for p in points], dtype=np.float32).reshape(len(points), dims)
        data = {"points": points, "vectors": pack(vectors), "dims": dims, "user_id": user}
        return Built(data, {"memories": len(points), "chunks": sum(len(chunks(ms, self.config["chunk_messages"]))
                                                                    for ms in by_channel.values())})

    def retrieve(self, question, scope, memory: Built, tools, gold=None) -> list[Item]:
        data = memory.data
        if not data.get("points"):
            return []
        live = restored(data, tools)
        with _LOCK:  # one adapter per live Memory: this question's tools count its query embedding
            mem, (llm, embedder), _ = live
            llm.tools = embedder.tools = tools
            found = mem.search(question.text, top_k=self.config["top_k"], threshold=self.config["threshold"],
                               filters={"user_id": data["user_id"]})
        items = []
        # the package's ranking, with its ties (equal scores come back in any order) broken by time, then text
        results = sorted(found.get("results", []), key=lambda r: (-round(float(r.get("score") or 0.0), 6),
                                                                 (r.get("metadata") or {}).get("time", ""),
                                                                 r.get("memory", ""), r.get("id", "")))
        for r in results:
            meta = r.get("metadata") or {}
            sources = tuple(i for i in meta.get("message_ids", []) if i in scope.by_id)
            items.append(Item(r.get("memory", ""), sources, "mem0 memory", True,
                              round(float(r["score"]), 6) if r.get("score") is not None else None,
                              f"time={meta.get('time', '?')}" + (f" channel={meta['channel']}"
                                                                 if meta.get("channel") else "")))
        return items


def user_id(scope) -> str:
    """One mem0 user per scope (its ids may not contain whitespace)."""
    return "scope-" + hashlib.sha256(f"{scope.corpus}\x1f{scope.name}".encode()).hexdigest()[:12]


def exported(memory) -> list[dict]:
    """Every point of the Memory's collection (id, payload, vector), in a stable order."""
    store = memory.vector_store
    points, offset = [], None
    while True:
        batch, offset = store.client.scroll(store.collection_name, limit=256, offset=offset, with_payload=True,
                                            with_vectors=True)
        for p in batch:
            vector = p.vector.get("", next(iter(p.vector.values()))) if isinstance(p.vector, dict) else p.vector
            points.append({"id": str(p.id), "payload": dict(p.payload or {}), "vector": list(vector)})
        if offset is None:
            break
    points = [p for p in points if p["payload"].get("data")]  # not mem0's own bookkeeping points
    return sorted(points, key=lambda p: (p["payload"].get("time", ""), p["payload"]["data"], p["id"]))


@atexit.register
def _close_live() -> None:
    """Close the live stores before the interpreter tears down (qdrant's own close fails during shutdown)."""
    for memory, _, folder in list(_LIVE.values()):
        memory.vector_store.client.close()
        folder.cleanup()
    _LIVE.clear()


def restored(data: dict, tools):
    """A live Memory holding a stored memory's points (built once per process)."""
    digest = hashlib.sha256(json.dumps([data["user_id"], data["vectors"][:64], len(data["points"])]).encode()
                            ).hexdigest()
    with _LOCK:
        live = _LIVE.get(digest)
    if live is None:
        live = open_memory(tools, int(data["dims"]))
        vectors = unpack(data["vectors"])
        live[0].vector_store.insert(vectors=[v.tolist() for v in vectors],
                                    payloads=[p["payload"] for p in data["points"]],
                                    ids=[p["id"] for p in data["points"]])
        with _LOCK:
            live = _LIVE.setdefault(digest, live)
    return live
