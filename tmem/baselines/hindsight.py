"""Adaptation of Hindsight (Latimer et al., 2026), App. B / C.2: the conversation is retained in one memory bank per
scope (the paper's domain-specific banks): each channel's messages, in chunks, go to one extraction call that writes
narrative facts (world, experience or opinion) with their entities, time and source messages; entities are
resolved by name, and facts are linked by shared entities. Recall follows the native recall with budget=mid:
semantic, keyword (BM25), graph (spreading from the semantic hits over shared entities) and temporal (facts near the
time the question names) retrieval, fused by reciprocal rank, with no Top-k cutoff: the facts fill max_tokens =
8,192 (the shared cap). The package's cross-encoder reranker is not used (no offline model); docs/baselines.md says
why the `hindsight-api` package itself is not used (PostgreSQL with pgvector, 183 packages).
"""
from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime

import numpy as np
from rank_bm25 import BM25Okapi

from tmem.baselines.base import (
    Built,
    Item,
    System,
    chunks,
    data_block,
    known_ids,
    message_record,
    normalized,
    pack,
    strings,
    top,
    unpack,
)

RETAIN = ("Extract the facts worth remembering from this conversation excerpt as self-contained narrative sentences "
          "(who, what, when, where). Classify each as world (about the world), experience (something a participant "
          "did or went through) or opinion (a belief or preference). List the entities it names and the message_ids "
          "it comes from. Reply with JSON only: {\"facts\": [{\"text\": str, \"type\": \"world\" | \"experience\" | "
          "\"opinion\", \"entities\": [str], \"message_ids\": [str]}]}")
_WORDS = re.compile(r"\w+")
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


class Hindsight(System):
    name = "hindsight"
    label = "adaptation of Hindsight (Latimer et al., 2026): hindsight-api needs PostgreSQL with pgvector"
    config = {"chunk_messages": 12, "budget": "mid", "max_tokens": 8192, "per_channel_top": 60, "rrf_k": 60,
              "graph_hops": 1, "temporal_days": 3}
    prompts = {"retain": RETAIN}

    def ingest(self, scope, tools) -> Built:
        by_channel: dict = defaultdict(list)
        for m in sorted(scope.messages, key=lambda m: (m.timestamp, m.id)):
            by_channel[m.channel].append(m)
        facts = []
        for messages in by_channel.values():
            for chunk in chunks(messages, self.config["chunk_messages"]):
                ids = [m.id for m in chunk]
                reply = tools.ask("retain", RETAIN, data_block("MESSAGES", [message_record(m) for m in chunk]),
                                  "facts", {"facts": [{"text": m.text, "type": "world", "entities": [m.author or ""],
                                             "message_ids": [m.id]} for m in chunk]}, temperature=0.0)
                for f in reply.get("facts") or []:
                    text = str(f.get("text", "")).strip() if isinstance(f, dict) else ""
                    if not text:
                        continue
                    sources = known_ids(f.get("message_ids"), ids) or tuple(ids)
                    kind = f.get("type") if f.get("type") in ("world", "experience", "opinion") else "world"
                    facts.append({"text": text, "type": kind, "sources": list(sources),
                                  "entities": sorted({e.lower() for e in strings(f.get("entities"), 20)}),
                                  "time": max(scope.by_id[i].timestamp for i in sources).isoformat()})
        vectors = normalized(tools.embed("fact embedding", [f["text"] for f in facts])) if facts else None
        entities = {e for f in facts for e in f["entities"]}
        return Built({"facts": facts, "vectors": pack(vectors) if facts else ""},
                     {"facts": len(facts), "entities": len(entities)})

    def retrieve(self, question, scope, memory: Built, tools, gold=None) -> list[Item]:
        facts = memory.data.get("facts") or []
        if not facts:
            return []
        c = self.config
        q = normalized(tools.embed("query", [question.text], kind="query"))[0]
        semantic = top(unpack(memory.data["vectors"]) @ q, c["per_channel_top"])
        bm25 = BM25Okapi([_WORDS.findall(f["text"].lower()) or [""] for f in facts])
        keyword = top(np.asarray(bm25.get_scores(_WORDS.findall(question.text.lower()))), c["per_channel_top"])
        by_entity: dict = defaultdict(set)
        for i, f in enumerate(facts):
            for e in f["entities"]:
                by_entity[e].add(i)
        graph = list(dict.fromkeys(j for i in semantic[:10] for e in facts[i]["entities"] for j in by_entity[e]
                                   if j != i))[:c["per_channel_top"]]
        lists = [semantic, keyword, graph]
        when = _DATE.search(question.text)
        if when:
            day = datetime.fromisoformat(when.group(1))
            near = [i for i, f in enumerate(facts)
                    if abs((datetime.fromisoformat(f["time"]) - day).days) <= c["temporal_days"]]
            lists.append(sorted(near, key=lambda i: abs(datetime.fromisoformat(facts[i]["time"]) - day)))
        fused: dict[int, float] = defaultdict(float)
        for ranked in lists:
            for r, i in enumerate(ranked, start=1):
                fused[i] += 1.0 / (c["rrf_k"] + r)
        order = sorted(fused, key=lambda i: (-fused[i], i))
        return [Item(facts[i]["text"], tuple(facts[i]["sources"]), f"{facts[i]['type']} fact", True,
                     round(fused[i], 6), f"time={facts[i]['time'][:16]}") for i in order]
