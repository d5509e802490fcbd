"""Adaptation of HippoRAG 2 (Gutiérrez et al., 2025), App. B / C.2: online OpenIE at temperature 0 with a 4,096-token
output limit (a named-entity call, then a triple call conditioned on the entities, per passage, as the package
does), a graph of phrase nodes (entities) and passage nodes (messages) joined by the triples' relation edges,
passage-phrase context edges and synonym edges (phrase embeddings at cosine >= 0.8); at query time the query is
matched to triples, a recognition-memory call keeps the relevant ones, their phrases (entity linking Top-5) seed a
personalized PageRank (damping 0.5) together with the dense passage scores (weight 0.05), and the Top-36 passages
by PageRank are the context. Why not the `hipporag` package: docs/baselines.md (it pins torch 2.5.1 with CUDA and
vLLM 0.6.6).
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

from tmem.baselines.base import (
    Built,
    Item,
    System,
    data_block,
    message_meta,
    message_record,
    normalized,
    pack,
    strings,
    top,
    unpack,
)

NER = ("Extract the named entities of the passage: people, teams, systems, products, places, dates, amounts and other "
       "specific things it names. Reply with JSON only: {\"named_entities\": [str]}")
TRIPLES = ("Build an RDF graph from the passage: triples [subject, predicate, object], each subject or object one of "
           "the named entities when possible, resolving pronouns to names. Reply with JSON only: {\"triples\": "
           "[[str, str, str]]}")
FILTER = ("Given a question and candidate facts (triples), keep only the facts relevant to answering it, as given. "
          "Reply with JSON only: {\"fact\": [[str, str, str]]}")


def _phrase(text: str) -> str:
    return " ".join(str(text).lower().split())


class HippoRAG2(System):
    name = "hipporag2"
    label = "adaptation of HippoRAG 2 (Gutiérrez et al., 2025): the hipporag package needs CUDA torch and vLLM"
    config = {"openie_temperature": 0.0, "openie_max_tokens": 4096, "linking_top_k": 5, "passage_top_k": 36,
              "synonym_cosine": 0.8, "synonym_neighbours": 10, "damping": 0.5, "passage_node_weight": 0.05,
              "candidate_facts": 20}
    prompts = {"ner": NER, "triples": TRIPLES, "filter": FILTER}

    def ingest(self, scope, tools) -> Built:
        c = self.config
        passages, facts = [m.id for m in scope.messages], []
        phrases: dict[str, int] = {}
        contains: list[tuple[int, int]] = []
        for p, m in enumerate(scope.messages):
            record = data_block("PASSAGE", [message_record(m)])
            guess = list(dict.fromkeys(w.strip(".,:;!?") for w in m.text.split() if w[:1].isupper()))[:6]
            ents = strings(tools.ask("ner", NER, record, "named_entities", {"named_entities": guess},
                                     temperature=c["openie_temperature"],
                                     max_tokens=c["openie_max_tokens"]).get("named_entities"))
            guess = {"triples": [[a, "related to", b] for a, b in zip(ents, ents[1:])]}
            reply = tools.ask("triples", TRIPLES, record + "\nNamed entities: " + ", ".join(ents)[:2000], "triples",
                              guess, temperature=c["openie_temperature"], max_tokens=c["openie_max_tokens"])
            for t in reply.get("triples") or []:
                if isinstance(t, list) and len(t) == 3 and all(str(x).strip() for x in t):
                    s, r, o = (_phrase(x) for x in t)
                    facts.append([s, r, o, p])
                    for x in (s, o):
                        contains.append((phrases.setdefault(x, len(phrases)), p))
            for e in ents:
                contains.append((phrases.setdefault(_phrase(e), len(phrases)), p))
        names = list(phrases)
        pvec = normalized(tools.embed("passage embedding", [m.text for m in scope.messages]))
        evec = normalized(tools.embed("entity embedding", names)) if names else np.zeros((0, 1))
        fvec = normalized(tools.embed("fact embedding", [" ".join(f[:3]) for f in facts])) if facts else \
            np.zeros((0, 1))
        synonyms = []
        for i in range(len(names)):
            sims = evec @ evec[i]
            synonyms += [[i, j, float(sims[j])] for j in top(sims, c["synonym_neighbours"] + 1)
                         if j != i and sims[j] >= c["synonym_cosine"]]
        return Built({"passages": passages, "phrases": names, "facts": facts, "contains": contains,
                      "synonyms": synonyms, "passage_vectors": pack(pvec), "phrase_vectors": pack(evec),
                      "fact_vectors": pack(fvec)},
                     {"phrases": len(names), "triples": len(facts), "synonym_edges": len(synonyms)})

    def retrieve(self, question, scope, memory: Built, tools, gold=None) -> list[Item]:
        d, c = memory.data, self.config
        q = normalized(tools.embed("query", [question.text], kind="query"))[0]
        dense = unpack(d["passage_vectors"]) @ q
        n_phr, n_pas = len(d["phrases"]), len(d["passages"])
        seeds = np.zeros(n_phr + n_pas)
        if d["facts"]:
            fsims = unpack(d["fact_vectors"]) @ q
            candidates = [d["facts"][i] for i in top(fsims, c["candidate_facts"])]
            kept = tools.ask("filter", FILTER, data_block("QUESTION", [{"question": question.text}]) + "\n" +
                             data_block("FACTS", [{"fact": f[:3]} for f in candidates]), "fact",
                             {"fact": [f[:3] for f in candidates[:c["linking_top_k"]]]}, temperature=0.0)
            keep = {tuple(_phrase(x) for x in f) for f in kept.get("fact") or [] if isinstance(f, list) and len(f) == 3}
            score = {tuple(f[:3]): float(fsims[i]) for i, f in enumerate(d["facts"])}
            linked = [f for f in candidates if tuple(f[:3]) in keep][:c["linking_top_k"]]
            index = {p: i for i, p in enumerate(d["phrases"])}
            counts = np.bincount([e for e, _ in d["contains"]], minlength=n_phr) if d["contains"] else np.ones(n_phr)
            for f in linked:
                for x in (f[0], f[2]):
                    if x in index:
                        seeds[index[x]] += score[tuple(f[:3])] / max(1, counts[index[x]])
        span = float(dense.max() - dense.min()) or 1.0
        seeds[n_phr:] = c["passage_node_weight"] * (dense - dense.min()) / span
        ranks = self._pagerank(d, seeds, n_phr, n_pas)[n_phr:] if seeds[:n_phr].any() else dense
        return [Item(scope.by_id[d["passages"][i]].text, (d["passages"][i],), "passage", False, float(ranks[i]),
                     message_meta(scope.by_id[d["passages"][i]])) for i in top(ranks, c["passage_top_k"])]

    def _pagerank(self, d: dict, seeds: np.ndarray, n_phr: int, n_pas: int) -> np.ndarray:
        """Personalized PageRank over phrases and passages (relation, context and synonym edges, undirected)."""
        index = {p: i for i, p in enumerate(d["phrases"])}
        rows, cols, vals = [], [], []
        for s, _, o, _ in d["facts"]:
            rows.append(index[s]), cols.append(index[o]), vals.append(1.0)
        for e, p in d["contains"]:
            rows.append(e), cols.append(n_phr + p), vals.append(1.0)
        for i, j, w in d["synonyms"]:
            rows.append(i), cols.append(j), vals.append(w)
        n = n_phr + n_pas
        adj = sparse.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
        adj = adj + adj.T
        out_deg = np.asarray(adj.sum(axis=1)).ravel()
        walk = sparse.diags(1.0 / np.where(out_deg == 0, 1, out_deg)) @ adj
        reset = seeds / seeds.sum()
        rank = reset.copy()
        damping = self.config["damping"]
        for _ in range(50):
            rank = (1 - damping) * reset + damping * (walk.T @ rank)
        return rank
