"""Graphiti (Zep; Rasmussen et al., 2025) through its published package, `graphiti-core` with the embedded Kùzu
graph database (requirements-baselines.txt): the package's own `Graphiti` (entity and fact extraction, entity and
fact resolution, temporal bounds, hybrid search) builds and searches a temporal knowledge graph; tmem feeds it
and reads it back.

- The language model and the embedder are the run's: an `LLMClient` whose calls are the memory-processing role's
  (base URL, model, key from the environment variable the settings name, concurrency bound, response cache,
  budget cap; one counted call per response model, tmem.baselines.construction) and an `EmbedderClient` over the
  run's embedder. The cross-encoder is never called (the default search is RRF), so none is built with a key.
- The database is a Kùzu file in a temporary folder under `systems/graphiti/` beside the run's database; once
  built, it is stored compressed in the memory's JSON and opened again in a fresh folder for retrieval.
  Telemetry (PostHog) is off: GRAPHITI_TELEMETRY_ENABLED=false.
- Ingestion, once per scope: each channel's messages, in chunks of `chunk_messages` (chunks in time order), are
  one episode each (JSON records, each text a string literal; the reference time is the chunk's last message).
  A fact is traced to the messages of the episodes it was extracted from (Graphiti keeps episode ids per fact).
- Retrieval: `Graphiti.search` (hybrid BM25 + cosine over facts, RRF), the package's default 10 facts.
- Two workarounds for graphiti-core 0.31.2's Kùzu driver: a `group_id` fails (KuzuDriver has no `_database`), so
  each scope is its own database under the default group; and its index setup is a no-op, so the full-text
  indices are created here with the package's own statements. Kùzu itself is unmaintained upstream (the package
  warns that its Kùzu backend is deprecated).
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import importlib.util
import json
import os
import tempfile
import threading
import warnings
import zlib
from collections import defaultdict
from datetime import UTC
from importlib import metadata
from pathlib import Path
from typing import Any

from tmem.baselines.base import DATA_NOTE, Built, Item, System, chunks, message_record
from tmem.baselines.construction import IngestionFailed

_LOCK = threading.Lock()
_LIVE: dict[str, tuple[Any, Any, tempfile.TemporaryDirectory]] = {}  # digest -> (Graphiti, adapters, folder)


def version() -> str | None:
    try:
        return metadata.version("graphiti-core") if metadata.version("kuzu") else None
    except metadata.PackageNotFoundError:
        return None


def _import_graphiti():
    os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
    from graphiti_core import Graphiti
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.driver.driver import GraphProvider
    from graphiti_core.driver.kuzu_driver import KuzuDriver
    from graphiti_core.embedder.client import EmbedderClient
    from graphiti_core.graph_queries import get_fulltext_indices
    from graphiti_core.llm_client.client import LLMClient
    from graphiti_core.llm_client.config import LLMConfig

    class RunLLM(LLMClient):
        """Each call is one counted, cached call of the run's construction model, named by its response model."""

        def __init__(self, tools):
            super().__init__(LLMConfig(model="run"))
            self.tools, self.failures = tools, []

        async def _generate_response(self, messages, response_model=None, max_tokens=0, model_size=None, **_):
            schema = response_model.model_json_schema() if response_model else {}
            key = next(iter(schema.get("properties") or ["_"]))
            system = messages[0].content if messages and messages[0].role == "system" else ""
            user = "\n\n".join(m.content for m in messages if m.role != "system")
            stage = response_model.__name__ if response_model else "text"
            try:
                return await asyncio.to_thread(self.tools.ask, stage, system, user, key, standin(stage, schema, user),
                                               temperature=0.0)
            except Exception as exc:  # the package skips some failed steps (a fact's timestamps): remember it
                self.failures.append(str(exc))
                raise

    class RunEmbedder(EmbedderClient):
        def __init__(self, tools):
            self.tools = tools

        async def create(self, input_data):
            text = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
            return (await self.create_batch([text]))[0]

        async def create_batch(self, input_data_list):
            vectors = await asyncio.to_thread(self.tools.embed, "graphiti", list(input_data_list))
            return [v.tolist() for v in vectors]

    class Unused(CrossEncoderClient):
        async def rank(self, query, passages):
            raise RuntimeError("graphiti: the cross-encoder is not part of this configuration")

    def open_graph(tools, path: Path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the package's own notice that Kùzu is deprecated
            driver = KuzuDriver(db=str(path))
        llm, embedder = RunLLM(tools), RunEmbedder(tools)
        graph = Graphiti(graph_driver=driver, llm_client=llm, embedder=embedder, cross_encoder=Unused())
        return graph, (llm, embedder)

    async def indices(graph):
        for query in get_fulltext_indices(GraphProvider.KUZU):
            try:
                await graph.driver.execute_query(query)
            except RuntimeError as exc:  # an index a restored database already has
                if "already exists" not in str(exc):
                    raise

    return open_graph, indices


def minimal(schema: dict) -> dict:
    """The smallest reply a response model accepts: empty lists, empty strings, nulls."""
    kinds = {"array": [], "string": "", "integer": -1, "number": 0.0, "boolean": False}
    return {name: kinds.get(field.get("type")) for name, field in (schema.get("properties") or {}).items()}


def standin(stage: str, schema: dict, user: str) -> dict:
    """An estimate's stand-in reply, which shapes the calls after it (each fact is then dated and resolved by
    calls of its own). The stated prior, as mem0's stand-in writes one memory per message: the episode's speakers
    and where they spoke (the channel, else the conversation) are its entities, and each message is one fact, its
    speaker to that place. Any other response model gets its smallest valid reply."""
    lines = episode_lines(user)
    if stage == "ExtractedEntities":
        names = dict.fromkeys([*(s for s, _ in lines), *(_place(r) for _, r in lines)])
        return {"extracted_entities": [{"name": n, "entity_type_id": 0} for n in names]}
    if stage == "ExtractedEdges":
        return {"edges": [{"source_entity_name": s, "target_entity_name": _place(r), "relation_type": "SAID_IN",
                           "fact": f"{s} said: {r.get('text', '')}", "valid_at": None, "invalid_at": None}
                          for s, r in lines]}
    return minimal(schema)


def episode_lines(user: str) -> list[tuple[str, dict]]:
    """(speaker, message record) of each `speaker: {json}` line of a prompt's current episode."""
    for tag in ("CURRENT MESSAGE", "CURRENT_MESSAGE"):
        if f"<{tag}>" in user:
            user = user.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0]
            break
    else:
        return []
    out = []
    for line in user.splitlines():
        speaker, sep, rest = line.partition(": {")
        if sep:
            try:
                out.append((speaker.strip(), json.loads("{" + rest)))
            except ValueError:  # a line of the message text, not a record
                pass
    return out


def _place(record: dict) -> str:
    return str(record.get("channel") or "the conversation")


def _workdir(tools) -> Path:
    folder = Path(tools.workdir) if tools.workdir else Path(tempfile.gettempdir()) / "tmem-systems" / "graphiti"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Graphiti(System):
    name = "graphiti"
    label = f"graphiti-core {version() or '(not installed)'} (Kùzu)"
    source = "package"
    config = {"chunk_messages": 12, "num_results": 10, "search": "hybrid BM25 + cosine over facts, RRF",
              "database": "kuzu (embedded)", "package": version()}

    @property
    def prompts(self) -> dict[str, str]:  # the package's prompts folder, by digest: a new version is a new memory
        spec = importlib.util.find_spec("graphiti_core") if version() else None
        if spec is None or not spec.submodule_search_locations:
            return {}
        folder = Path(next(iter(spec.submodule_search_locations))) / "prompts"
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(folder.glob("*.py")))).hexdigest()
        return {"graphiti_core/prompts sha256": digest, "instructions": DATA_NOTE}

    def unavailable(self) -> str | None:
        if version() is None:
            return ("graphiti needs the optional packages graphiti-core and kuzu, which are not installed: "
                    ".venv/bin/pip install -r requirements-baselines.txt")
        return None

    def ingest(self, scope, tools) -> Built:
        open_graph, indices = _import_graphiti()
        by_channel: dict = defaultdict(list)
        for m in sorted(scope.messages, key=lambda m: (m.timestamp, m.id)):
            by_channel[m.channel].append(m)
        episodes = sorted((c for ms in by_channel.values() for c in chunks(ms, self.config["chunk_messages"])),
                          key=lambda c: (c[-1].timestamp, c[0].id))
        with tempfile.TemporaryDirectory(prefix="graphiti-", dir=_workdir(tools)) as folder:
            path = Path(folder) / "graph.kuzu"
            sources, counts = asyncio.run(_build(open_graph, indices, tools, path, episodes))
            blob = base64.b64encode(zlib.compress(path.read_bytes(), 6)).decode()
        return Built({"database": blob, "episodes": sources}, {"episodes": len(episodes), **counts})

    def retrieve(self, question, scope, memory: Built, tools, gold=None) -> list[Item]:
        data = memory.data
        if not data.get("database"):
            return []
        graph, adapters = restored(data, tools)
        with _LOCK:  # one adapter per live graph: this question's tools count its query embedding
            for a in adapters:
                a.tools = tools
            edges = asyncio.run(graph.search(question.text, num_results=self.config["num_results"]))
        items = []
        for rank, e in enumerate(edges, start=1):
            ids = [i for ep in (e.episodes or []) for i in data["episodes"].get(ep, [])]
            sources = tuple(dict.fromkeys(i for i in ids if i in scope.by_id))
            when = e.valid_at.isoformat(timespec="minutes") if e.valid_at else "?"
            items.append(Item(e.fact, sources, "graphiti fact", True, round(1.0 / rank, 6),
                              f"valid_at={when} relation={e.name}"))
        return items


async def _build(open_graph, indices, tools, path: Path, episodes) -> tuple[dict, dict]:
    graph, (llm, _) = open_graph(tools, path)
    await indices(graph)
    sources: dict[str, list[str]] = {}
    entities, facts = set(), set()
    for n, chunk in enumerate(episodes):
        # Graphiti's prompts read "speaker: message" lines; the message is a JSON record (its text a string literal)
        body = "\n".join([DATA_NOTE, *(f"{_speaker(m)}: {json.dumps(message_record(m), ensure_ascii=False)}"
                                        for m in chunk)])
        when = chunk[-1].timestamp
        done = await graph.add_episode(name=f"chunk {n}", episode_body=body,
                                       source_description=f"group chat, channel {chunk[0].channel or '-'}",
                                       reference_time=when if when.tzinfo else when.replace(tzinfo=UTC))
        sources[done.episode.uuid] = [m.id for m in chunk]
        entities.update(x.uuid for x in done.nodes)
        facts.update(x.uuid for x in done.edges)
    await graph.close()
    if llm.failures:  # never store a graph some step of which was skipped; a rerun resumes from the cache
        raise IngestionFailed(f"graphiti: {len(llm.failures)} construction call(s) failed: {llm.failures[0]}")
    return sources, {"entities": len(entities), "facts": len(facts)}


def _speaker(m) -> str:
    return " ".join(str(m.author or m.role or "someone").replace(":", " ").split()) or "someone"


def restored(data: dict, tools):
    """A live graph holding a stored memory's database (opened once per process, in a fresh folder)."""
    digest = hashlib.sha256(data["database"].encode()).hexdigest()
    with _LOCK:
        live = _LIVE.get(digest)
    if live is None:
        open_graph, indices = _import_graphiti()
        folder = tempfile.TemporaryDirectory(prefix="graphiti-", dir=_workdir(tools))
        path = Path(folder.name) / "graph.kuzu"
        path.write_bytes(zlib.decompress(base64.b64decode(data["database"])))
        graph, adapters = open_graph(tools, path)
        with _LOCK:
            live = _LIVE.setdefault(digest, (graph, adapters, folder))
    return live[0], live[1]
