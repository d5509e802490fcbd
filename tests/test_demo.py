"""The demo generator: byte-identical regeneration of data/demo.jsonl, the shape of the conversation, the six
question types with resolvable gold, and the knowledge-update design that makes the T-Mem mechanism visible."""
import hashlib
import os
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from tmem.cli import main
from tmem.config import TMemConfig
from tmem.corpora.jsonl import load_jsonl_file
from tmem.demo import ABSTENTION, CURATED_QUESTION, QUESTION_TYPES, SLOTS, START, T, generate, write_jsonl
from tmem.demo.vocabulary import SINGLE_VALUED, STYLES
from tmem.models.relation.values import STATE_CHANGE
from tmem.pipeline.retrieval import query_tokens
from tmem.pipeline.scope import Scope
from tmem.text import STATE_CHANGE_CUES, content_units

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "data" / "demo.jsonl"
K = TMemConfig().retrieval.k


@pytest.fixture(scope="module")
def demo():
    data = generate(7, 3000)
    golds = {g.question_id: g for _, g in data.golds}
    scope = Scope("demo", "Technology", data.messages)
    return data, golds, scope


def test_shipped_demo_is_regenerated_byte_for_byte(tmp_path):
    write_jsonl(generate(7, 3000), tmp_path / "demo.jsonl")
    assert (tmp_path / "demo.jsonl").read_bytes() == SHIPPED.read_bytes()


@pytest.mark.integration
def test_output_does_not_depend_on_hash_seed(tmp_path):
    code = ("import sys; from pathlib import Path; from tmem.demo import generate, write_jsonl; "
            "write_jsonl(generate(3, 900, 2), Path(sys.argv[1]))")
    digests = set()
    for seed in ("1", "2"):
        out = tmp_path / f"d{seed}.jsonl"
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, cwd=ROOT,
                       env={**os.environ, "PYTHONHASHSEED": seed})
        digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
    write_jsonl(generate(3, 900, 2), tmp_path / "here.jsonl")
    digests.add(hashlib.sha256((tmp_path / "here.jsonl").read_bytes()).hexdigest())
    assert len(digests) == 1


def test_shipped_file_loads_as_the_demo_corpus():
    data = load_jsonl_file(SHIPPED)
    assert len(data.messages) == 3000 and len(data.questions) == 48
    assert (CURATED_QUESTION[0], CURATED_QUESTION[1]) in {(q.scope, q.id) for q in data.questions}


def test_conversation_shape(demo):
    data, _, scope = demo
    messages = data.messages
    assert len(messages) == 3000 and {m.scope for m in messages} == {"Technology"}
    people = {m.author: m.role for m in messages}
    assert 6 <= len(people) <= 12 and all(people.values())
    assert len({m.channel for m in messages}) == 3 and len({m.topic for m in messages}) == 9
    assert all(m.phase and m.stage and m.phase_order and m.phase_progress is not None for m in messages)
    span = max(m.timestamp for m in messages) - min(m.timestamp for m in messages)
    assert timedelta(weeks=4) < span < timedelta(weeks=7) and min(m.timestamp for m in messages) >= START
    weekend = sum(m.timestamp.weekday() >= 5 for m in messages) / len(messages)
    assert weekend < 0.1  # working-hours bursts, quiet weekends
    assert [m.timestamp for m in messages] == sorted(m.timestamp for m in messages)
    assert len({m.text for m in messages}) > 0.5 * len(messages)  # varied, not one template repeated
    assert max(Counter(m.text for m in messages).values()) < 0.02 * len(messages)


def test_phases_advance_in_time_per_channel(demo):
    by_channel = defaultdict(list)
    for m in demo[0].messages:
        by_channel[m.channel].append((m.stage, m.phase_order, m.phase_progress))
    for rows in by_channel.values():
        assert rows == sorted(rows)  # Eq. 4's order O_i never goes backwards in time
        assert len({r[1] for r in rows}) == 5


def test_reply_links_point_to_earlier_messages_of_the_same_topic(demo):
    data, _, scope = demo
    replies = [m for m in data.messages if m.reply_to]
    assert replies
    for m in replies:
        parent = scope.by_id[m.reply_to]
        assert parent.timestamp < m.timestamp and parent.topic == m.topic


def test_six_question_types_with_resolvable_gold(demo):
    data, golds, scope = demo
    assert Counter(q.type for q in data.questions) == {t: 8 for t in QUESTION_TYPES}
    for q in data.questions:
        gold = golds[q.id]
        assert q.asking_user in {m.author for m in data.messages}
        assert gold.evidence_ids <= set(scope.by_id)
        if q.type == "abstention":
            assert gold.answer == ABSTENTION and not gold.evidence
        else:
            assert gold.answer and gold.evidence
    for q in (q for q in data.questions if q.type == "temporal"):
        [[mid]] = golds[q.id].evidence
        assert golds[q.id].answer == scope.by_id[mid].timestamp.date().isoformat()
    for q in (q for q in data.questions if q.type == "user_implicit"):
        [[mid]] = golds[q.id].evidence
        assert scope.by_id[mid].author == q.asking_user  # "I" is the asking user
    for q in (q for q in data.questions if q.type in ("multi_hop", "term_ambiguity")):
        assert len(golds[q.id].evidence) == 2


def test_knowledge_updates_need_temporal_discovery(demo):
    """The decisive update shares no word with the question and BM25 ranks it outside the top-k, but it sits
    within hours, in the same topic, near several top-k anchors (the challenge it answers and its pile-ons). Whether
    it replies to the challenge, carries a state-change cue, names the superseded value or only adds to it varies
    (STYLES): the offline roles' reply and cue rules do not hold by construction."""
    data, golds, scope = demo
    config = TMemConfig().retrieval
    index = scope.bm25(config.metadata_fields, config.k1, config.b, config.epsilon)
    questions = [q for q in data.questions if q.type == "knowledge_update"]
    assert len(questions) == len(STYLES)  # the 8 questions are the first 8 changes: one per style, in order
    for q, style in zip(questions, STYLES):
        gold = golds[q.id]
        update = scope.by_id[gold.evidence[0][0]]
        order = np.argsort(-index.scores(query_tokens(q, config)), kind="stable")
        rank = {scope.messages[i].id: r for r, i in enumerate(order)}
        anchors = [scope.messages[i] for i in order[:K]]
        near = [a for a in anchors if a.topic == update.topic
                and abs(a.timestamp - update.timestamp) <= timedelta(hours=6)]
        assert rank[update.id] >= K, q.id
        assert len(near) >= 2, q.id
        assert not content_units(update.text) & (content_units(q.text) - {"current"}), q.id
        if style.reply:
            assert update.reply_to in {a.id for a in near}, q.id
        else:
            assert update.reply_to is None, q.id
        cued = bool(STATE_CHANGE_CUES.search(update.text)), bool(STATE_CHANGE.search(update.text))
        assert cued[0] if style.cue else cued == (False, False), (q.id, update.text)
        rollback = "go back to" in gold.answer
        if style.partial and not rollback and not any(a in q.text for a in SINGLE_VALUED):
            added = gold.answer.rstrip(".").split(", plus ")
            assert gold.superseded is None and len(added) == 2 and all(v in update.text for v in added), q.id
        else:  # the update states the value that holds now; naming the superseded one varies with the wording
            prefix = f"Instead of {gold.superseded}, " + ("go back to " if rollback else "")
            assert gold.superseded and gold.answer.startswith(prefix), q.id
            assert gold.answer[len(prefix):-1] in update.text, q.id
            assert gold.superseded in update.text or not style.cue, q.id
        assert min(rank[i] for i in gold.evidence[1]) < K  # BM25 does find the earlier state
    assert (CURATED_QUESTION[0], CURATED_QUESTION[1]) in {(q.scope, q.id) for q in questions}


def test_update_styles_have_the_documented_proportions():
    """docs/corpora.md: of every 8 changes, 4 reply to the challenge, 4 carry a cue, 2 are partial (revisions), and
    each of reply/cue is independent of revise vs rollback (the changes alternate revise, rollback)."""
    assert len(STYLES) == 8
    assert sum(s.reply for s in STYLES) == 4 and sum(s.cue for s in STYLES) == 4
    assert [i for i, s in enumerate(STYLES) if s.partial] == [4, 6]  # even index = a revision
    for parity in (0, 1):  # revisions, rollbacks: every (reply, cue) pair once
        assert sorted((s.reply, s.cue) for s in STYLES[parity::2]) == sorted(
            [(False, False), (False, True), (True, False), (True, True)])
    assert STYLES[0].reply and STYLES[0].cue and not STYLES[0].partial  # the curated question's


def test_only_state_changes_carry_revision_cues():
    changes = {"update", "rollback", "revise", "cue", "tail", "partial"}
    plain = {"update_plain", "rollback_plain", "partial_plain", "ptail"}
    for name, texts in [*T.items(), *SLOTS.items()]:
        if name not in changes:
            assert not [t for t in texts if STATE_CHANGE_CUES.search(t)], name
        if name in plain:
            assert not [t for t in texts if STATE_CHANGE.search(t)], name
    assert all(STATE_CHANGE_CUES.search(t) for t in T["update"] + T["rollback"] + T["partial"])


def test_curated_question_end_to_end_offline(demo):
    """Full T-Mem recovers the decisive update and links it by UPDATE; the BM25-only variant never sees it."""
    from tmem.config import variant_config
    from tmem.models.offline import offline_roles
    from tmem.pipeline import run as pipeline  # an import error fails, not skips

    data, golds, scope = demo
    question = next(q for q in data.questions if (q.scope, q.id) == CURATED_QUESTION)
    update = golds[question.id].evidence[0][0]
    full = pipeline.run_question(question, scope, variant_config("full"), offline_roles(), corpus="demo")
    flat = pipeline.run_question(question, scope, variant_config("flat"), offline_roles(), corpus="demo")
    assert update not in {a.message_id for a in full.anchors} and update in full.evidence_ids
    assert any(e.child_id == update and e.relation == "UPDATE" for e in full.edges)
    assert update not in flat.evidence_ids


@pytest.mark.parametrize("embedder", ["minilm", "lexical"])
def test_the_curated_answer_is_right_through_its_chain_and_flat_is_wrong(embedder, monkeypatch):
    """The showcase (issue 42): on the shipped demo, offline, the forest answer is the revision Msg_2100 reached by
    the UPDATE chain Msg_1497 -> Msg_2100, its reason names only that chain, and the flat answer is judged wrong;
    with the shipped embedder and with the lexical fallback."""
    from tmem import api

    monkeypatch.setenv("TMEM_EMBEDDER", embedder)
    store = api.open_store(":memory:")
    scope, qid = CURATED_QUESTION
    question, gold = api.stored_question(store, "demo", qid, scope)
    roles = api.build_roles({}, store)
    runs = {v: api.run_and_store(store, "demo", question, v, api.resolve_config(v), roles, gold, save=False)
            for v in ("full", "flat")}
    store.close()
    forest = next(a for a in runs["full"].answers if a.presentation == "forest")
    edges = {(e.parent_id, e.child_id, e.relation) for e in runs["full"].edges}
    assert ("Msg_1497", "Msg_2100", "UPDATE") in edges
    assert forest.text.startswith("OK, we drop contract checks") and "shadow traffic at 20%" in forest.text
    assert "followed UPDATE chain Msg_1497 -> Msg_2100" in forest.reason
    chain = forest.reason.split("followed UPDATE chain ")[1].split(";")[0].split(" -> ")
    assert all((a, b, "UPDATE") in edges for a, b in zip(chain, chain[1:]))  # the reason names real edges only
    verdicts = {v: next(x for x in runs[v].verdicts if x.presentation == p)
                for v, p in (("full", "forest"), ("flat", "flat"))}
    assert verdicts["full"].correct is True and verdicts["flat"].correct is False


def test_scales_to_four_domains(tmp_path):
    data = generate(11, 4000, domains=4)
    assert len(data.messages) == 4000
    assert Counter(m.scope for m in data.messages) == {"Technology": 1000, "Finance": 1000, "Healthcare": 1000,
                                                       "Manufacturing": 1000}
    assert len({(q.scope, q.id) for q in data.questions}) == len(data.questions)
    with pytest.raises(ValueError, match="domains must be between 1 and 4"):
        generate(7, 3000, domains=5)


def test_cli_writes_jsonl_or_groupmembench_layout(tmp_path, capsys):
    assert main(["demo", "--seed", "5", "--messages", "600", "--out", str(tmp_path / "d.jsonl")]) == 0
    assert "600 messages" in capsys.readouterr().out
    assert len(load_jsonl_file(tmp_path / "d.jsonl").messages) == 600
    assert main(["demo", "--messages", "800", "--domains", "2", "--out", str(tmp_path / "gmb")]) == 0
    assert (tmp_path / "gmb" / "data" / "final" / "Finance" /
            "synthetic_domain_channels_rolevariants_Finance.json").exists()
    assert (tmp_path / "gmb" / "questions" / "Technology" / "knowledge_update.jsonl").exists()
