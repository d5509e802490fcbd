"""Adaptation of A-Mem (Xu et al., 2025), App. B / C.2: each message, in time order, becomes a note with contextual
metadata (keywords, a context sentence, tags: one construction call); the five nearest earlier notes are consulted
to establish links and evolve the neighbours' context and tags (one evolution call); the retrieval index (the
notes' embeddings) is refreshed after every 100 successful evolution updates. At query time the notes most similar
to the question, each followed by the notes it links to, form a variable-length context under the shared cap.
Each note is traced to its message. Why not the `a-mem` package on PyPI: docs/baselines.md.
"""
from __future__ import annotations

import numpy as np

from tmem.baselines.base import Built, Item, System, data_block, message_record, normalized, pack, strings, top, unpack

NOTE = ("Analyze the message and build a memory note: up to 6 keywords (specific nouns and actions), one sentence of "
        "context (the situation, the people involved, what the message does), and up to 4 tags. Reply with JSON "
        "only: {\"keywords\": [str], \"context\": str, \"tags\": [str]}")
EVOLVE = ("A new memory note arrived, with its nearest neighbour notes. Decide whether memory should evolve: link the "
          "new note to related neighbours (strengthen) and/or update the neighbours' context and tags in light of it. "
          "Reply with JSON only: {\"should_evolve\": bool, \"actions\": [\"strengthen\" | \"update_neighbor\"], "
          "\"suggested_connections\": [neighbour number], \"tags_to_update\": [str], \"new_context_neighborhood\": "
          "[str, one per neighbour in order], \"new_tags_neighborhood\": [[str], one list per neighbour in order]}")


def note_text(note: dict) -> str:
    return " | ".join([note["content"], note["context"], "keywords: " + ", ".join(note["keywords"]),
                       "tags: " + ", ".join(note["tags"])])


class AMem(System):
    name = "amem"
    label = "adaptation of A-Mem (Xu et al., 2025): the a-mem package on PyPI is not the paper's system"
    config = {"neighbours": 5, "refresh_every": 100, "top_notes": 24}
    prompts = {"note": NOTE, "evolve": EVOLVE}

    def ingest(self, scope, tools) -> Built:
        notes: list[dict] = []
        vectors = np.zeros((0, 1), dtype=np.float32)
        evolutions = refreshes = 0
        for m in sorted(scope.messages, key=lambda m: (m.timestamp, m.id)):
            reply = tools.ask("note", NOTE, data_block("MESSAGE", [message_record(m)]), "keywords",
                              {"keywords": m.text.split()[:6], "context": "", "tags": []}, temperature=0.0)
            note = {"id": m.id, "content": m.text, "time": m.timestamp.isoformat(timespec="minutes"),
                    "keywords": strings(reply.get("keywords"), 10), "context": str(reply.get("context") or "")[:500],
                    "tags": strings(reply.get("tags"), 8), "links": []}
            vec = normalized(tools.embed("note embedding", [note_text(note)]))
            if notes:
                near = top(vectors[:len(notes)] @ vec[0], self.config["neighbours"])
                evolved = self._evolve(note, [notes[i] for i in near], tools)
                evolutions += evolved
                if evolved and evolutions % self.config["refresh_every"] == 0:  # the index refresh of App. B
                    vectors = normalized(tools.embed("index refresh", [note_text(n) for n in notes]))
                    refreshes += 1
            notes.append(note)
            vectors = vec if len(notes) == 1 else np.vstack([vectors[:len(notes) - 1], vec])
        return Built({"notes": notes, "vectors": pack(vectors) if notes else ""},
                     {"notes": len(notes), "evolutions": evolutions, "index_refreshes": refreshes,
                      "links": sum(len(n["links"]) for n in notes)})

    def _evolve(self, note: dict, neighbours: list[dict], tools) -> bool:
        shown = [{"number": i, "content": n["content"], "context": n["context"], "keywords": n["keywords"],
                  "tags": n["tags"]} for i, n in enumerate(neighbours)]
        reply = tools.ask("evolution", EVOLVE, data_block("NEW NOTE", [{k: note[k] for k in (
            "content", "context", "keywords", "tags")}]) + "\n" + data_block("NEIGHBOURS", shown), "should_evolve",
            {"should_evolve": False}, temperature=0.0)
        if reply.get("should_evolve") is not True:
            return False
        actions = set(strings(reply.get("actions")))
        if "strengthen" in actions:
            for i in reply.get("suggested_connections") or []:
                if isinstance(i, int) and 0 <= i < len(neighbours):
                    note["links"].append(neighbours[i]["id"])
            note["tags"] = strings(reply.get("tags_to_update"), 8) or note["tags"]
        if "update_neighbor" in actions:
            contexts = reply.get("new_context_neighborhood") or []
            tags = reply.get("new_tags_neighborhood") or []
            for i, n in enumerate(neighbours):
                if i < len(contexts) and isinstance(contexts[i], str) and contexts[i].strip():
                    n["context"] = contexts[i][:500]
                if i < len(tags):
                    n["tags"] = strings(tags[i], 8) or n["tags"]
        return True

    def retrieve(self, question, scope, memory: Built, tools, gold=None) -> list[Item]:
        notes = memory.data.get("notes") or []
        if not notes:
            return []
        by_id = {n["id"]: n for n in notes}
        q = normalized(tools.embed("query", [question.text], kind="query"))[0]
        sims = unpack(memory.data["vectors"]) @ q
        order: list[tuple[str, float | None]] = []
        for i in top(sims, self.config["top_notes"]):
            order.append((notes[i]["id"], float(sims[i])))
            order += [(link, None) for link in notes[i]["links"]]
        seen, out = set(), []
        for mid, score in order:
            if mid in seen or mid not in by_id:
                continue
            seen.add(mid)
            n = by_id[mid]
            text = f"{n['content']} (context: {n['context']}; keywords: {', '.join(n['keywords'])})"
            out.append(Item(text, (mid,), "note", True, score, f"time={n['time']}"))
        return out
