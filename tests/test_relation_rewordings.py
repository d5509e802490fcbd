"""The demo's curated chain must hold through wording the generator never used: 20 rewordings of its decision,
challenge, revision and acknowledgements (tests/fixtures/curated_rewordings.json, written blind to the relation
code) put in place of the demo's own texts; the default offline structuring over the curated question's evidence
must keep decision -> UPDATE -> revision in each."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tmem.config import variant_config
from tmem.demo import CURATED_QUESTION, generate
from tmem.models.embedders import make_embedder, minilm_files
from tmem.models.offline import offline_roles
from tmem.models.relation import resolve_relation
from tmem.models.relation.revision import states_slot
from tmem.models.relation.slots import states_a_state
from tmem.models.relation.values import cues
from tmem.pipeline import run as pipeline
from tmem.pipeline.scope import Scope
from tmem.pipeline.structuring import link_parents

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "curated_rewordings.json").read_text(encoding="utf-8"))
CHAIN = FIXTURE["chain"]
# Measured with this version's default role (slots first, then the joint parent model with the value kinds and
# the parent side of the UPDATE gate read as states_a_state): 11 of the 20 kept with the lexical embedder, 14 with
# MiniLM (the fourth iteration: 11-12 and 14-15, one rewording flipping with the order the tests run in). Without
# the first pass and the generator's cues: 3 (lexical). The target is all of them; the floors guard against
# regressions, and the test prints the broken ones with their reasons.
KEPT_AT_LEAST = {"lexical": 11, "minilm": 14}


@pytest.fixture(scope="module")
def curated():
    data = generate(7, 3000)
    question = next(q for q in data.questions if (q.scope, q.id) == CURATED_QUESTION)
    scope = Scope("demo", "Technology", data.messages)
    config = variant_config("full")
    run = pipeline.run_question(question, scope, config, offline_roles(), corpus="demo")
    assert {CHAIN["decision"], CHAIN["challenge"], CHAIN["revision"]} <= set(run.evidence_ids)
    return data.messages, question, run.evidence_ids, config, run


def _kept(curated, texts: dict[str, str], embedder=None) -> tuple[bool, str]:
    messages, question, evidence_ids, config, _ = curated
    reworded = [replace(m, text=texts[m.id]) if m.id in texts else m for m in messages]
    scope = Scope("demo", "Technology", reworded)
    roles = offline_roles(embedder)
    evidence = [scope.by_id[i] for i in evidence_ids]
    role = resolve_relation(roles.relation, config.structuring, roles.embedder)
    result = link_parents(question, evidence, role, scope, config.structuring)
    decision = next(d for d in result.decisions if d.child_id == CHAIN["revision"])
    kept = decision.parent_id == CHAIN["decision"] and decision.relation == "UPDATE"
    return kept, f"{decision.relation} {decision.parent_id}: {decision.note}"


def test_the_shipped_wording_keeps_the_chain(curated):
    assert _kept(curated, {})[0]


def test_no_update_between_messages_that_state_no_state(curated):
    """Every UPDATE of the curated question's forest joins two messages that state a state (Sec. 4.3)."""
    messages, *_, run = curated
    text = {m.id: m.text for m in messages}
    updates = [e for e in run.edges if e.relation == "UPDATE"]
    def states(t: str) -> bool:  # as the fitted role reads it, or the revision layer (a status is a state)
        return states_a_state(cues(t)) or states_slot(t)

    assert updates and all(states(text[e.parent_id]) and states(text[e.child_id]) for e in updates)


class TextKeyed:
    """MiniLM with each text's vector kept: every rewording's fresh scope embeds the same ~77 evidence texts but the
    few it rewords (1,540 embeddings of 130 texts, 8 of the test's CPU seconds). A MiniLM vector does not depend on
    its batch (test_embedders), so the vectors are the ones MiniLM computes."""

    def __init__(self, inner):
        self.inner, self.name, self.offline, self.kept = inner, inner.name, inner.offline, {}

    def embed(self, texts, kind="passage", progress=None):
        missing = list(dict.fromkeys(t for t in texts if (kind, t) not in self.kept))
        if missing:
            self.kept.update(((kind, t), v) for t, v in zip(missing, self.inner.embed(missing, kind)))
        return np.array([self.kept[(kind, t)] for t in texts], dtype=np.float32).reshape(len(texts), -1)


@pytest.mark.parametrize("embedder", ["lexical", pytest.param("minilm", marks=pytest.mark.slow)])
def test_rewordings_keep_decision_update_revision(curated, embedder):
    if embedder == "minilm" and minilm_files() is None:
        pytest.skip("the packaged MiniLM embedder is not installed")
    chosen = make_embedder(embedder) if embedder == "lexical" else TextKeyed(make_embedder(embedder))
    outcomes = {r["id"]: _kept(curated, {k: v for k, v in r.items() if k.startswith("Msg_")}, chosen)
                for r in FIXTURE["rewordings"]}
    broken = {k: why for k, (kept, why) in outcomes.items() if not kept}
    print("\n".join(f"{k}: {why}" for k, why in broken.items()))
    assert len(FIXTURE["rewordings"]) >= 12
    assert len(outcomes) - len(broken) >= KEPT_AT_LEAST[embedder], broken
