"""Ablations that change one thing: every preset names the settings it changes, its configuration
differs from `full` in exactly those, and its trace on the golden conversation equals full's up to the first
stage those settings reach, and shows the stated difference there."""
import dataclasses
import re

import pytest

from tmem.config import VARIANTS, TMemConfig, variant_config
from tmem.demo.golden import GOLD, MESSAGES, QUESTION
from tmem.models.offline import offline_roles
from tmem.pipeline.linearize import serialize_flat
from tmem.pipeline.run import run_question
from tmem.pipeline.scope import Scope
from tmem.prompts import answer_prompt

ORDER = ("seed_retrieval", "discovery", "structuring", "compression", "answer")
FIRST_STAGE = {"retrieval": "seed_retrieval", "discovery": "discovery", "structuring": "structuring",
               "compression": "compression", "answer": "answer"}
OUTPUTS = {"seed_retrieval": ("anchors", "query"), "discovery": ("clusters", "windows", "selections", "evidence_ids"),
           "structuring": ("decisions", "edges", "nodes"),
           "compression": ("spans", "context", "tokens_before_compression", "tokens_after_compression")}


def changed_settings(config: TMemConfig, base: TMemConfig) -> set[str]:
    out = set()
    for section in dataclasses.fields(config):
        a, b = getattr(config, section.name), getattr(base, section.name)
        out |= {f"{section.name}.{f.name}" for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)}
    return out


def stated_settings(description: str) -> set[str]:
    """The settings a description names in its closing parentheses: '... (discovery.enabled, compression.mode).'"""
    match = re.search(r"\(([a-z_]+\.[a-z_]+(?:, [a-z_]+\.[a-z_]+)*)\)\.?$", description)
    return set(match.group(1).split(", ")) if match else set()


@pytest.mark.parametrize("name", sorted(set(VARIANTS) - {"full"}))
def test_each_preset_changes_exactly_what_it_states(name):
    description, _ = VARIANTS[name]
    stated = stated_settings(description)
    assert stated, f"{name}: the description must end with the settings it changes in parentheses"
    assert changed_settings(variant_config(name), TMemConfig()) == stated


@pytest.fixture(scope="module")
def scope():
    return Scope("golden", "golden", MESSAGES)


def run(name, scope, **overrides):
    config = variant_config(name)
    for key, value in overrides.items():
        section, field = key.split("__")
        config = config.with_(section, **{field: value})
    return run_question(QUESTION, scope, config, offline_roles(), corpus="golden", variant=name, gold=GOLD)


@pytest.fixture(scope="module")
def full(scope):
    return run("full", scope)


def first_changed_stage(name: str) -> str:
    stages = {FIRST_STAGE[s.split(".")[0]] for s in stated_settings(VARIANTS[name][0])}
    return min(stages, key=ORDER.index)


def stage(trace, name):
    return trace.stage(name)


@pytest.mark.parametrize("name", sorted(set(VARIANTS) - {"full"}))
def test_the_trace_equals_full_before_the_first_stage_the_preset_reaches(name, scope, full):
    trace = run(name, scope)
    first = first_changed_stage(name)
    for earlier in ORDER[:ORDER.index(first)]:
        for attribute in OUTPUTS.get(earlier, ()):
            assert getattr(trace, attribute) == getattr(full, attribute), (name, earlier, attribute)
        assert stage(trace, earlier).backend == stage(full, earlier).backend, (name, earlier)


def edges(trace):
    return {(e.parent_id, e.child_id) for e in trace.edges}


def test_stated_differences_show_in_the_trace(scope, full):
    flat = run("flat", scope)
    assert not flat.clusters and not flat.edges and [a.presentation for a in flat.answers] == ["flat"]
    no_discovery = run("no-discovery", scope)
    assert not no_discovery.clusters and no_discovery.edges
    assert set(no_discovery.evidence_ids) == {a.message_id for a in full.anchors}
    no_structuring = run("no-structuring", scope)
    assert no_structuring.evidence_ids == full.evidence_ids and not no_structuring.edges
    assert [a.presentation for a in no_structuring.answers] == ["flat"]
    no_metadata = run("no-metadata", scope)
    assert "hidden from the role: channel, phase, topic, role" in stage(no_metadata, "discovery").backend
    assert "hidden from the role: channel, phase, topic, role" in stage(no_metadata, "structuring").backend
    assert "hidden" not in stage(full, "discovery").backend + stage(full, "structuring").backend
    no_compression = run("no-compression", scope)
    assert stage(no_compression, "compression").backend.startswith("truncate") and not no_compression.spans
    cue = run("cue-overlap-structuring", scope)
    assert "cue-overlap" in stage(cue, "structuring").backend
    no_topic = run("no-topic-discovery", scope)
    assert all(c.topic is None for c in no_topic.clusters) and no_topic.clusters
    assert stage(no_topic, "discovery").backend.endswith("hidden from the role: topic")
    assert "hidden" not in stage(no_topic, "structuring").backend
    no_tp = run("no-topic-phase-structuring", scope)
    assert stage(no_tp, "structuring").backend.endswith(
        "hidden from the role: topic, phase, stage, phase_order, phase_progress")
    both = run("no-topic-phase-both", scope)
    assert "hidden from the role: topic" in stage(both, "discovery").backend
    assert "phase_progress" in stage(both, "structuring").backend


def test_untyped_forest_is_app_e3(scope):
    """App. E.3: the parent assignments and topology of the BM25 (Expand) + structuring forest, every label
    RELATED, the same messages; its own answer prompt, which does not explain UPDATE / EXPAND."""
    typed, untyped = run("bm25-forest", scope), run("untyped-forest", scope)
    assert untyped.evidence_ids == typed.evidence_ids and not untyped.clusters
    assert edges(untyped) == edges(typed) and {e.relation for e in untyped.edges} == {"RELATED"}
    prompt = answer_prompt("forest", QUESTION.asking_user, QUESTION.text, untyped.context, typed=False)
    assert untyped.answer("forest").prompt_hash == prompt.hash
    assert "UPDATE" not in prompt.system and "EXPAND" not in prompt.system and "RELATED" in prompt.system
    assert "UPDATE marks a change" in answer_prompt("forest", "u", "q", "p").system
    full_untyped = run("untyped-full", scope)
    assert {e.relation for e in full_untyped.edges} == {"RELATED"}


def test_flat_and_forest_share_the_budget_rule(scope):
    """With a budget the golden forest exceeds, compression omits spans; by default the flat answer's list omits
    the same spans (then the cut at B); flat-truncated only cuts the list at B."""
    small = {"compression__budget_tokens": 260}
    same, cut = run("full", scope, **small), run("flat-truncated", scope, **small)
    omitted = [s for s in same.spans if not s.kept]
    assert omitted, "the small budget must make compression omit spans"
    assert same.spans == cut.spans and same.context == cut.context  # the forest is the same
    assert same.flat_context != cut.flat_context
    evidence = [scope.by_id[i] for i in same.evidence_ids]
    assert cut.flat_context.startswith(serialize_flat(evidence)[:200])


def test_a_masked_role_sees_no_hidden_field_and_answers_about_the_real_ids():
    from tmem.pipeline.masking import hidden_from_relation, hidden_from_utility, masked_role

    seen = []

    class Role:
        backend, offline = "fake", True

        def label_pairs(self, question, child, candidates, scope):
            seen.extend([child, *candidates])
            return "ok"

    config = variant_config("no-topic-phase-structuring")
    role = masked_role(Role(), hidden_from_relation(config))
    assert role.label_pairs(QUESTION, MESSAGES[1], MESSAGES[2:4], None) == "ok" and role.backend == "fake"
    assert [m.id for m in seen] == [m.id for m in MESSAGES[1:4]]
    assert all(m.topic is None and m.phase is None and m.phase_progress is None for m in seen)
    assert all(m.channel == o.channel and m.text == o.text for m, o in zip(seen, MESSAGES[1:4]))
    assert masked_role(Role(), hidden_from_utility(TMemConfig())).__class__ is Role  # nothing hidden: the role


def test_the_relation_role_is_resolved_once_and_the_rule_it_runs_sees_the_mask(scope, monkeypatch):
    """The structuring stage chooses the configured rule (tmem.models.relation.resolve_relation) once and
    masks it; link_parents uses the role it is given, so the rule that labels the pairs sees no hidden field."""
    from tmem.models.relation.fitted import FittedRelation
    from tmem.pipeline import stages

    resolved, seen = [], []
    real_resolve, real_label = stages.resolve_relation, FittedRelation.label_pairs

    def label_pairs(self, question, child, candidates, *rest):
        seen.extend([child, *candidates])
        return real_label(self, question, child, candidates, *rest)

    monkeypatch.setattr(stages, "resolve_relation", lambda *args: resolved.append(args) or real_resolve(*args))
    monkeypatch.setattr(FittedRelation, "label_pairs", label_pairs)
    config = variant_config("no-topic-phase-structuring")
    # the default rule: its fitted layer, whose calls are watched, labels every child the revision layer passes on
    assert config.structuring.relation_rule == "revision-first"
    trace = run("no-topic-phase-structuring", scope)
    assert len(resolved) == 1 and len(seen) > 1 and trace.edges
    assert all(m.topic is None and m.phase is None and m.phase_progress is None for m in seen)
    assert any(m.topic is not None for m in MESSAGES)  # the corpus has topics: the mask removed them


def test_without_metadata_expansion_the_answer_passages_carry_no_metadata(scope, full):
    """The passages show time, author, role and channel (tmem/pipeline/linearize.py); without metadata expansion only
    time and author remain. The Exp-6 presets ablate discovery / structuring, not the answer's passages."""
    trace = run("no-metadata", scope)
    assert "role=" in full.context and "channel=" in full.flat_context
    for field in ("role=", "channel="):
        assert field not in trace.context and field not in trace.flat_context
    assert "role=" in run("no-topic-phase-both", scope).context


@pytest.mark.parametrize("name", ["no-metadata", "full"])
def test_the_leakage_validator_rebuilds_masked_passages(name, scope):
    """The validator renders the passages from the stored messages the way the stages did (metadata hidden without
    metadata expansion), so a clean no-metadata trace is not reported as foreign passages."""
    from tmem.evaluation.batch import validators as v

    trace = run(name, scope)
    findings = v.check_leakage(trace, QUESTION, GOLD, {i: scope.by_id[i] for i in trace.evidence_ids})
    assert [f.message for f in findings if f.level == v.ERROR] == []


def test_the_flat_list_order_is_a_named_choice(scope, full):
    """App. I's flat prompt lists messages in retrieval-rank order; Sec. 5.4's BM25 (Expand) list is chronological.
    flat-chronological changes only the flat list beside the forest: same evidence, same forest, new order."""
    chrono = run("flat-chronological", scope)
    assert chrono.evidence_ids == full.evidence_ids and chrono.context == full.context
    times = lambda text: re.findall(r"time=(\S+)", text)  # noqa: E731
    assert times(chrono.flat_context) == sorted(times(full.flat_context)) != times(full.flat_context)
    assert chrono.answer("flat").prompt_hash != full.answer("flat").prompt_hash
    bm25 = run("bm25-forest-chronological", scope)
    assert bm25.edges == run("bm25-forest", scope).edges and times(bm25.flat_context) == sorted(
        times(bm25.flat_context))
