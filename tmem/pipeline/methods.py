"""Methods compared in batch runs and recall: T-Mem's configuration variants and the baselines (paper Sec. 5.1,
5.3-5.4, App. B, E.2), all answered and judged by the same roles.

A `Method` is a `TMemConfig` plus how its seeds are retrieved and how its evidence is expanded:

- seeds "bm25": metadata-expanded BM25 top-k (Sec. 4.2); "embedding": cosine top-k over message vectors (App. B).
- discovery "temporal": Temporal Evidence Discovery (Sec. 4.2); "global": the global-evidence control of App. E.2;
  "off": the seeds are the evidence.
- final_k > 0: the evidence is reranked and cut to exactly k messages (App. E.2 "T-Mem Reranked" and the control).
- system: a memory system of App. B (tmem.baselines.SYSTEMS) builds the context instead of T-Mem's stages.
- relation "gold": structuring links T-Mem's evidence by the corpus's gold edges (the `oracle-forest` bound).

The stages (tmem.pipeline.stages) run a method; the baselines' own steps (embedding seeds, rerank, the global control)
are in tmem.pipeline.baselines. Both sit below tmem.evaluation, which only runs methods and scores them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace

from tmem.baselines import SYSTEMS
from tmem.config import VARIANTS, TMemConfig, config_hash, variant_config


@dataclass(frozen=True)
class Method:
    name: str
    description: str
    config: TMemConfig
    seeds: str = "bm25"
    discovery: str = "temporal"
    final_k: int = 0  # > 0: rerank the evidence to exactly this many messages
    embedding_text: str = "metadata"
    system: str = ""  # a memory system of tmem.baselines.SYSTEMS: its context replaces T-Mem's stages
    relation: str = ""  # "gold": the structuring stage links the evidence by the gold edges (oracle-forest)

    @property
    def hash(self) -> str:
        """config_hash for plain configuration variants; otherwise a hash of the config and the method fields."""
        if self.seeds == "bm25" and self.discovery == ("temporal" if self.config.discovery.enabled else "off") \
                and not self.final_k and not self.system and not self.relation:
            return config_hash(self.config)
        fields = {"config": self.config.to_dict(), "seeds": self.seeds, "discovery": self.discovery,
                  "final_k": self.final_k, "embedding_text": self.embedding_text}
        if self.system:
            fields["system"] = [self.system, SYSTEMS[self.system].key()]
        if self.relation:
            fields["relation"] = self.relation
        blob = json.dumps(fields, sort_keys=True, default=list)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def with_k(self, k: int) -> Method:
        """The same method with k seeds (and, when it reranks, k final messages)."""
        return replace(self, config=self.config.with_("retrieval", k=k), final_k=k if self.final_k else 0)


def _baselines(base: TMemConfig) -> dict[str, Method]:
    k = base.retrieval.k
    flat = variant_config("flat", base)
    out = {
        "bm25": Method("bm25", "BM25 (Expand) top-k, flat list (App. B); the same configuration as 'flat'.", flat,
                       discovery="off"),
        "embedding": Method("embedding", "Embedding top-k by cosine, flat list (App. B).", flat, seeds="embedding",
                            discovery="off"),
        "tmem-reranked": Method("tmem-reranked", "T-Mem with the discovered evidence reranked to exactly k "
                                "messages (App. E.2).", base, final_k=k),
        "global-control": Method("global-control", "Global-evidence control (App. E.2): same seeds and topics, "
                                 "embedding top-100n over the whole topic, same selection, reranked to k.",
                                 base, discovery="global", final_k=k),
        "oracle-forest": Method("oracle-forest", "Oracle bound: T-Mem's evidence linked by the corpus's gold edges "
                                "instead of the relation role (where the corpus has gold edges).", base,
                                relation="gold"),
    }
    for name, system in SYSTEMS.items():  # the memory systems of App. B (and the oracle-evidence bound)
        out[name] = Method(name, f"{system.label}: its own memory and context, answered and judged by T-Mem's "
                           "roles under the shared cap B (App. B, C.2).", flat, seeds="none", discovery="off",
                           system=name)
    return out


def methods(base: TMemConfig | None = None) -> dict[str, Method]:
    """Every runnable method: the configuration variants of `tmem.config.VARIANTS` and the baselines."""
    base = base or TMemConfig()
    out = {name: Method(name, description, preset(base), discovery="temporal" if preset(base).discovery.enabled
                        else "off") for name, (description, preset) in VARIANTS.items()}
    out.update(_baselines(base))
    return out


def get_method(name: str, k: int | None = None, embedding_text: str = "metadata") -> Method:
    known = methods()
    if name not in known:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(known)}")
    method = known[name] if k is None else known[name].with_k(k)
    return replace(method, embedding_text=embedding_text) if method.seeds == "embedding" else method


def describe(method: Method) -> dict:
    return {"name": method.name, "description": method.description, "seeds": method.seeds,
            "discovery": method.discovery, "final_k": method.final_k, "config_hash": method.hash,
            "config": asdict(method.config)}


def method_for(config: TMemConfig, name: str = "custom") -> Method:
    """A plain configuration run as a method (what `tmem.pipeline.run.run_question` and the app's ad-hoc runs use)."""
    return Method(name, "", config, discovery="temporal" if config.discovery.enabled else "off")
