"""Adaptation of StructMem (Xu et al., 2026a), following App. B / C.2 as the paper's authors adapted it: there is
no package. Event mode: messages are partitioned by channel, topic and phase and each partition is cut into
chronological chunks of at most 24 messages; the construction model extracts factual and relational memories from
each chunk (each memory traced to the message ids it names). Offline memory updating merges a memory into an earlier
one of its kind whose cosine similarity is at least 0.90 (one merge call). Same-channel cross-event summaries start
from 15 semantic seeds per channel (the memories most similar to others of the channel) and summarize the
channel's memories within one hour of each seed. At query time the Top-60 atomic memories and the Top-5 summaries by
cosine similarity form the context, before the shared 8,192-token cap.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

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
    top,
    unpack,
)

EXTRACT = ("You build an event memory from a group conversation. From the messages, extract FACTUAL memories (what "
           "was stated, decided or done, with who and when) and RELATIONAL memories (how this event relates to "
           "others: a revision, a dependency, a cause, a follow-up). Each memory is one self-contained sentence and "
           "names the message_ids it comes from. Reply with JSON only: {\"factual\": [{\"text\": str, \"message_ids\":"
           " [str]}], \"relational\": [{\"text\": str, \"message_ids\": [str]}]}")
MERGE = ("Two memories of a conversation describe nearly the same thing. Merge them into one up-to-date memory: keep "
         "every detail, and when they disagree keep the later state and say what it replaced. Reply with JSON only: "
         "{\"text\": str}")
SUMMARIZE = ("Summarize these memories of one channel, all within about an hour of each other, into one cross-event "
             "summary: the episode, its participants, the states it reached and what changed. Reply with JSON only: "
             "{\"summary\": str}")


def _standin(chunk) -> dict:
    """An estimate's stand-in extraction: one factual memory per message, one relational memory per chunk."""
    return {"factual": [{"text": m.text, "message_ids": [m.id]} for m in chunk],
            "relational": [{"text": f"{chunk[-1].text} follows {chunk[0].text}"[:300],
                            "message_ids": [chunk[0].id, chunk[-1].id]}]}


class StructMem(System):
    name = "structmem"
    label = "adaptation of StructMem (Xu et al., 2026a): no package; App. B's configuration"
    config = {"partition": ["channel", "topic", "phase"], "chunk_messages": 24, "merge_cosine": 0.90,
              "summary_window_hours": 1.0, "summary_seeds": 15, "top_atomic": 60, "top_summaries": 5}
    prompts = {"extract": EXTRACT, "merge": MERGE, "summarize": SUMMARIZE}

    def ingest(self, scope, tools) -> Built:
        c = self.config
        parts: dict[tuple, list] = defaultdict(list)
        for m in sorted(scope.messages, key=lambda m: (m.timestamp, m.id)):
            parts[(m.channel, m.topic, m.phase)].append(m)
        memories: list[dict] = []  # {kind, text, sources, time, channel}
        for (channel, _, _), messages in parts.items():
            for chunk in chunks(messages, c["chunk_messages"]):
                ids = [m.id for m in chunk]
                reply = tools.ask("extract", EXTRACT, data_block("MESSAGES", [message_record(m) for m in chunk]),
                                  "factual", _standin(chunk), temperature=0.0)
                for kind in ("factual", "relational"):
                    for entry in reply.get(kind) or []:
                        text = str(entry.get("text", "")).strip() if isinstance(entry, dict) else ""
                        if text:
                            sources = known_ids(entry.get("message_ids"), ids) or tuple(ids)
                            memories.append({"kind": kind, "text": text, "sources": list(sources), "channel": channel,
                                             "time": max(scope.by_id[i].timestamp for i in sources).isoformat()})
        memories, merges = self._update(memories, tools)
        vectors = normalized(tools.embed("embedding", [m["text"] for m in memories])) if memories else None
        summaries = self._summaries(memories, vectors, tools) if memories else []
        svec = tools.embed("embedding", [s["text"] for s in summaries]) if summaries else None
        return Built({"memories": memories, "vectors": pack(vectors) if vectors is not None else "",
                      "summaries": summaries, "summary_vectors": pack(normalized(svec)) if svec is not None else ""},
                     {"atomic_memories": len(memories), "merges": merges, "summaries": len(summaries)})

    def _update(self, memories: list[dict], tools) -> tuple[list[dict], int]:
        """Offline memory updating: a memory at least `merge_cosine` similar to a kept one of its kind is merged
        into it by one call."""
        if not memories:
            return memories, 0
        vectors = normalized(tools.embed("update", [m["text"] for m in memories]))
        kept: list[int] = []
        out: dict[int, dict] = {}
        merges = 0
        for i, m in enumerate(memories):
            same = [j for j in kept if memories[j]["kind"] == m["kind"]]
            sims = vectors[same] @ vectors[i] if same else np.zeros(0)
            if len(sims) and float(sims.max()) >= self.config["merge_cosine"]:
                j = same[int(np.argmax(sims))]
                older = out[j]
                pair = data_block("MEMORIES", [{"text": older["text"]}, {"text": m["text"]}])
                reply = tools.ask("update", MERGE, pair, "text", {"text": m["text"]}, temperature=0.0)
                older["text"] = str(reply.get("text") or m["text"]).strip()
                older["sources"] = list(dict.fromkeys(older["sources"] + m["sources"]))
                older["time"] = max(older["time"], m["time"])
                merges += 1
            else:
                kept.append(i)
                out[i] = dict(m)
        return [out[i] for i in kept], merges

    def _summaries(self, memories: list[dict], vectors: np.ndarray, tools) -> list[dict]:
        by_channel: dict = defaultdict(list)
        for i, m in enumerate(memories):
            by_channel[m["channel"]].append(i)
        out = []
        window = self.config["summary_window_hours"] * 3600
        done: set[frozenset] = set()  # two seeds within an hour of the same memories give one summary
        for idx in by_channel.values():
            sims = vectors[idx] @ vectors[idx].T
            centrality = sims.sum(axis=1)
            for s in top(centrality, self.config["summary_seeds"]):
                seed_time = np.datetime64(memories[idx[s]]["time"])
                group = [i for i in idx if abs((np.datetime64(memories[i]["time"]) - seed_time)
                                               / np.timedelta64(1, "s")) <= window]
                if len(group) < 2 or frozenset(group) in done:
                    continue
                done.add(frozenset(group))
                reply = tools.ask("summary", SUMMARIZE, data_block("MEMORIES", [
                    {"time": memories[i]["time"], "text": memories[i]["text"]} for i in group]), "summary",
                    {"summary": " ".join(memories[i]["text"] for i in group)}, temperature=0.0)
                text = str(reply.get("summary") or "").strip()
                if text:
                    out.append({"text": text, "sources": list(dict.fromkeys(s for i in group
                                                                            for s in memories[i]["sources"])),
                                "time": memories[idx[s]]["time"]})
        return out

    def retrieve(self, question, scope, memory: Built, tools, gold=None) -> list[Item]:
        data = memory.data
        if not data.get("memories"):
            return []
        q = normalized(tools.embed("query", [question.text], kind="query"))[0]
        sims = unpack(data["vectors"]) @ q
        items = [Item(data["memories"][i]["text"], tuple(data["memories"][i]["sources"]), data["memories"][i]["kind"],
                      True, float(sims[i]), f"time={data['memories'][i]['time'][:16]}")
                 for i in top(sims, self.config["top_atomic"])]
        if data.get("summaries"):
            ssims = unpack(data["summary_vectors"]) @ q
            items += [Item(data["summaries"][i]["text"], tuple(data["summaries"][i]["sources"]), "summary", True,
                           float(ssims[i]), f"time={data['summaries'][i]['time'][:16]}")
                      for i in top(ssims, self.config["top_summaries"])]
        return items
