"""Adaptation of MemGAS (Xu et al., 2026b), App. B / C.2: memories at four granularities per session (the session's
text, its turns, an LLM summary and LLM keywords: one construction call per session, thinking disabled; a session
is a channel's messages of one day, at most 24); each new session is associated with the earlier sessions a two-
component Gaussian mixture over its similarities puts in the high component. At query time an entropy-based router
weights the granularities (a granularity whose similarity distribution is sharper counts more), personalized
PageRank over the association graph spreads the scores, the Top-36 sessions go to one selection call that keeps the
relevant ones, and their messages are the context (each traced to its message).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
from scipy import sparse

from tmem.baselines.base import (
    Built,
    Item,
    System,
    chunks,
    data_block,
    message_meta,
    message_record,
    normalized,
    pack,
    strings,
    top,
    unpack,
)

SUMMARIZE = ("Summarize this conversation session in two or three sentences (who, what was decided or changed, "
             "when) and list up to 8 keywords. Reply with JSON only: {\"summary\": str, \"keywords\": [str]}")
SELECT = ("Given a question and numbered memory sessions (their summaries), select the sessions needed to answer it. "
          "Reply with JSON only: {\"selected\": [session number]}")
LEVELS = ("session", "turn", "summary", "keyword")


def gmm_high(x: np.ndarray, steps: int = 30) -> np.ndarray:
    """Membership of the higher-mean component of a two-component 1-D Gaussian mixture fitted by EM."""
    if len(x) < 2 or float(x.max() - x.min()) < 1e-9:
        return np.zeros(len(x), dtype=bool)
    mu = np.array([x.min(), x.max()], dtype=float)
    var, weight = np.full(2, x.var() + 1e-6), np.full(2, 0.5)
    for _ in range(steps):
        dens = weight * np.exp(-(x[:, None] - mu) ** 2 / (2 * var)) / np.sqrt(2 * np.pi * var)
        resp = dens / np.maximum(dens.sum(axis=1, keepdims=True), 1e-12)
        n = resp.sum(axis=0) + 1e-9
        mu, weight = (resp * x[:, None]).sum(axis=0) / n, n / len(x)
        var = (resp * (x[:, None] - mu) ** 2).sum(axis=0) / n + 1e-6
    return resp[:, int(np.argmax(mu))] > 0.5


class MemGAS(System):
    name = "memgas"
    label = "adaptation of MemGAS (Xu et al., 2026b): no package; App. B's configuration"
    config = {"session": "channel and day, at most 24 messages", "session_messages": 24, "top_sessions": 36,
              "levels": list(LEVELS), "damping": 0.5, "router_temperature": 0.1, "thinking": "disabled"}
    prompts = {"summarize": SUMMARIZE, "select": SELECT}

    def ingest(self, scope, tools) -> Built:
        groups: dict = defaultdict(list)
        for m in sorted(scope.messages, key=lambda m: (m.timestamp, m.id)):
            groups[(m.channel, m.timestamp.date())].append(m)
        sessions = []
        for (_, day), messages in sorted(groups.items(), key=lambda kv: (kv[0][1], str(kv[0][0]))):
            for part in chunks(messages, self.config["session_messages"]):
                reply = tools.ask("summary", SUMMARIZE, data_block("SESSION", [message_record(m) for m in part]),
                                  "summary", {"summary": " ".join(m.text for m in part)[:400], "keywords": []},
                                  temperature=0.0)
                sessions.append({"ids": [m.id for m in part], "summary": str(reply.get("summary") or "")[:1500],
                                 "keywords": strings(reply.get("keywords"), 8), "day": day.isoformat()})
        texts = {"session": [" ".join(scope.by_id[i].text for i in s["ids"]) for s in sessions],
                 "summary": [s["summary"] for s in sessions], "keyword": [", ".join(s["keywords"]) for s in sessions]}
        vecs = {level: normalized(tools.embed(f"{level} embedding", t)) for level, t in texts.items()}
        turns = normalized(tools.embed("turn embedding", [scope.by_id[i].text for s in sessions for i in s["ids"]]))
        edges = []
        for j in range(1, len(sessions)):
            sims = vecs["session"][:j] @ vecs["session"][j]
            edges += [[int(i), j, float(sims[i])] for i in np.flatnonzero(gmm_high(sims))]
        return Built({"sessions": sessions, "edges": edges, "turns": pack(turns),
                      **{f"{level}_vectors": pack(v) for level, v in vecs.items()}},
                     {"sessions": len(sessions), "association_edges": len(edges)})

    def retrieve(self, question, scope, memory: Built, tools, gold=None) -> list[Item]:
        d, c = memory.data, self.config
        sessions = d.get("sessions") or []
        if not sessions:
            return []
        q = normalized(tools.embed("query", [question.text], kind="query"))[0]
        turn_sims, owner = unpack(d["turns"]) @ q, [k for k, s in enumerate(sessions) for _ in s["ids"]]
        per_turn = np.full(len(sessions), -1.0)
        np.maximum.at(per_turn, owner, turn_sims)
        sims = {"session": unpack(d["session_vectors"]) @ q, "turn": per_turn,
                "summary": unpack(d["summary_vectors"]) @ q, "keyword": unpack(d["keyword_vectors"]) @ q}
        weights = {}
        for level, s in sims.items():  # the entropy router: a sharper distribution gets more weight
            p = np.exp((s - s.max()) / c["router_temperature"])
            p /= p.sum()
            weights[level] = 1.0 / (1e-6 - float((p * np.log(p + 1e-12)).sum()) + 1e-3)
        total = sum(weights.values())
        score = sum(weights[lv] / total * sims[lv] for lv in LEVELS)
        ranked = self._spread(score, d["edges"], len(sessions))
        best = top(ranked, c["top_sessions"])
        reply = tools.ask("selection", SELECT, data_block("QUESTION", [{"question": question.text}]) + "\n" +
                          data_block("SESSIONS", [{"number": n, "day": sessions[k]["day"], "summary":
                                                   sessions[k]["summary"]} for n, k in enumerate(best)]),
                          "selected", {"selected": list(range(min(5, len(best))))}, temperature=0.0)
        chosen = [best[n] for n in dict.fromkeys(reply.get("selected") or [])
                  if isinstance(n, int) and 0 <= n < len(best)]
        return [Item(scope.by_id[i].text, (i,), "session turn", False, float(ranked[k]), message_meta(scope.by_id[i]))
                for k in chosen for i in sessions[k]["ids"]]

    def _spread(self, score: np.ndarray, edges: list, n: int) -> np.ndarray:
        if not edges:
            return score
        adj = sparse.coo_matrix(([w for _, _, w in edges], ([i for i, _, _ in edges], [j for _, j, _ in edges])),
                                shape=(n, n)).tocsr()
        adj = adj + adj.T
        deg = np.asarray(adj.sum(axis=1)).ravel()
        walk = sparse.diags(1.0 / np.where(deg == 0, 1, deg)) @ adj
        reset = np.maximum(score, 0) + 1e-9
        reset /= reset.sum()
        rank = reset.copy()
        for _ in range(30):
            rank = (1 - self.config["damping"]) * reset + self.config["damping"] * (walk.T @ rank)
        return rank
