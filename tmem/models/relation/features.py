"""Features of a child and its Eq. 4 candidates for the fitted relation role (tmem/models/relation/fitted.py).

Everything here is what any chat carries — text, author, time, a reply link, mentions — read with the state-seeking
rule's helpers (tmem/models/relation/signals.py, values.py); no corpus-specific word lists. Three
groups, each a fixed tuple of names so that weights files stay readable:
- PAIR (per candidate): how well the candidate fits as the parent, also crossed with what the child does;
- ROOT (per child): how likely the child starts a tree (the ROOT option's score);
- LABEL (per candidate, read for the chosen one): UPDATE rather than EXPAND.
Among them the state rule's own decision, per kind (a resolved challenge, other values, a change cue), and a state
stated in reply to an objection (it tends to settle it by changing the state objected to: the current state) or to
a question (it tends to answer it).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import numpy as np

from tmem.models.relation.signals import (
    FOLLOW_UP,
    REJECTS,
    addressed_names,
    candidate_overlaps,
    mentioned_authors,
    per_scope,
)
from tmem.models.relation.slots import settled_state, slot_columns
from tmem.models.relation.values import (
    SUPPORT_CUES,
    Cues,
    cues,
    decisive,
    kind_replaced,
    replaced_values,
    typed_values,
)
from tmem.types import Message

SIMILARITY_WEIGHT = 0.6  # relevance = 0.6 cosine + 0.4 IDF-weighted overlap, as in the state-seeking rule
EPISODE_HOURS = 12.0
CONTINUATION_MINUTES = 5.0

PAIR_FEATURES = (
    "relevance", "relevance_gap", "similarity", "overlap", "reply_link", "reply_of_reply", "addressed", "answers",
    "same_author", "continuation", "log_hours", "latest", "log_later", "states", "new_state", "decisive_parent",
    "challenge_parent", "current_state", "latest_state_match", "shared_values", "replaced_values",
    "child_states_x_current", "child_states_x_reply", "child_change_x_current", "child_change_x_states",
    "child_asks_x_states", "child_ack_x_reply", "child_ack_x_latest", "child_states_x_relevance", "rule_parent",
    "rule_update_parent", "resolves_challenge", "rule_resolves_parent", "rule_values_parent", "rule_cue_parent",
    "child_states_x_reply_objection", "child_states_x_reply_question", "settles_objection_to_current",
    "slot_head", "child_states_x_slot_head", "addressed_state", "child_states_x_reply_states_none", "settled_state",
    "restates", "child_change_x_restates", "names_replaced_value", "kind_replaced", "latest_kind_replaced")
ROOT_FEATURES = ("bias", "max_relevance", "max_state_relevance", "has_reply", "addresses_someone", "child_states",
                 "child_change", "child_asks", "child_decisive", "log_candidates", "log_hours_last", "rule_root")
LABEL_FEATURES = ("bias", "child_new_state", "child_change", "child_revision", "child_asks", "child_objects",
                  "child_ack", "child_reaffirms", "child_decisive", "child_has_values", "replaced_values",
                  "shared_values", "parent_states", "parent_asks", "parent_is_reply", "relevance", "same_author",
                  "rejects", "new_state_x_parent_states", "change_x_parent_states",
                  "new_state_x_parent_asks", "ack_x_parent_is_reply", "parent_current", "parent_head",
                  "rule_update_here", "rule_expand_here", "new_state_x_reply_asks", "rule_resolves_here",
                  "rule_values_here", "rule_cue_here", "settles_objection_here", "slot_head_here",
                  "addressed_state_here", "replaced_x_slot_head", "revision_x_shared_values", "restates_here",
                  "names_replaced_value_here", "kind_replaced_here", "latest_kind_replaced_here")

STATE_MARGIN = 0.1  # the current state: the latest stated state within this relevance of the best one


def _relevance(child: Message, candidates: Sequence[Message], scope, sims: np.ndarray | None,
               overlaps: Sequence[float] | None = None):
    """(relevance, similarity, overlap) arrays over the candidates, as the state rule computes them."""
    overlap = np.array(overlaps if overlaps is not None else candidate_overlaps(child, candidates, scope))
    sim = np.asarray(sims, dtype=float) if sims is not None else np.zeros(len(candidates))
    w = SIMILARITY_WEIGHT if sims is not None else 0.0
    return w * sim + (1 - w) * overlap, sim, overlap


class _Read(NamedTuple):
    """What the features read of one message, once per message object (a candidate recurs for every later child
    of a question)."""
    message: Message
    micros: int  # the timestamp in microseconds: differences / 1e6 equal timedelta.total_seconds() exactly
    cues: Cues
    row: tuple[float, ...]  # stated, new_state, asked (challenge or objection), decisive
    author: str | None
    addressed: frozenset[str]


_EPOCH = datetime(1970, 1, 1)


def _micros(t: datetime) -> int:
    base = _EPOCH.replace(tzinfo=t.tzinfo) if t.tzinfo else _EPOCH
    d = t - base
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


def _read(p: Message) -> _Read:
    x = cues(p.text)
    row = (float(x.states and not x.challenge), float(x.new_state and not x.challenge),
           float(x.challenge or x.objection), float(decisive(p.text)))
    return _Read(p, _micros(p.timestamp), x, row, p.author, frozenset(addressed_names(p.text)))


def _reads(candidates: Sequence[Message], scope) -> list[_Read]:
    cache: dict[str, _Read] = per_scope(scope, ("candidate reads",), dict)  # message id -> its reading
    out = []
    for p in candidates:
        r = cache.get(p.id)
        if r is None or r.message is not p:
            r = cache[p.id] = _read(p)
        out.append(r)
    return out


def _replaced(child_values: frozenset[str], parent_values: frozenset[str]) -> bool:
    """Of one kind (numbers, else names), the child drops some of the parent's values and brings new ones."""
    numbers = {v for v in child_values if v[:1].isdigit()}
    mine = numbers or set(child_values)
    theirs = {v for v in parent_values if v[:1].isdigit() == bool(numbers)}
    return bool(mine - theirs and theirs - mine)


def relation_features(child: Message, candidates: Sequence[Message], scope, sims: np.ndarray | None,
                      rule: tuple[str | None, str] = (None, "ROOT"), overlaps: Sequence[float] | None = None,
                      reply_sims: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pair matrix n x |PAIR|, root vector |ROOT|, label matrix n x |LABEL|) for a child and its candidates.
    `rule` is the hand-ordered state rule's decision (parent id or None, relation): one signal among the others,
    weighed by the fit like them. `overlaps`: the candidates' weighted overlaps when the caller has them;
    `reply_sims`: the cosines of the reply target with the candidates (what a challenge is about is read from the
    challenge: the revision answering it may name only the new value)."""
    n = len(candidates)
    rel, sim, overlap = _relevance(child, candidates, scope, sims, overlaps)
    c = cues(child.text)
    reads = _reads(candidates, scope)
    pc = [r.cues for r in reads]
    asks = float(c.challenge)
    ack = float(bool(SUPPORT_CUES.match(child.text) or FOLLOW_UP.search(child.text)))
    change = float(bool(c.change or c.revision))
    states = float(c.new_state and not c.challenge)
    micros = np.array([r.micros for r in reads], dtype=np.int64)
    hours = np.maximum((_micros(child.timestamp) - micros) / 1e6, 0.0) / 3600
    order = np.argsort(micros, kind="stable")
    later = np.empty(n)
    later[order] = np.arange(n)[::-1]  # how many candidates are later than this one
    latest = (later == 0).astype(float)
    by_id = {p.id: i for i, p in enumerate(candidates)}
    reply = by_id.get(child.reply_to) if child.reply_to else None
    reply_of_reply = by_id.get(candidates[reply].reply_to) if reply is not None and candidates[reply].reply_to \
        else None
    addressed = addressed_names(child.text)
    in_episode = hours <= EPISODE_HOURS
    authors = {r.author.casefold() for i, r in enumerate(reads) if r.author and in_episode[i]
               and r.author != child.author}
    addressed |= mentioned_authors(child.text, authors)
    rows = np.array([r.row for r in reads]).reshape(n, 4)
    stated, new_state, asked, dec = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    # the current state: the latest stated state whose relevance is within STATE_MARGIN of the best stated one
    current = np.zeros(n)
    if stated.any():
        best = rel[stated > 0].max()
        near = [i for i in range(n) if stated[i] and rel[i] >= best - STATE_MARGIN]
        current[max(near, key=lambda i: micros[i])] = 1.0
    superseded = (stated[None, :] > 0) & (later[None, :] < later[:, None]) & (rel[None, :] >= rel[:, None])
    head = stated * ~superseded.any(axis=1)
    shared = np.array([float(bool(c.values & x.values)) for x in pc]) if c.values else np.zeros(n)
    replaced = np.array([float(_replaced(c.values, x.values)) for x in pc]) if c.values else np.zeros(n)
    reply_vec = np.zeros(n)
    if reply is not None:
        reply_vec[reply] = 1.0
    rr = np.zeros(n)
    if reply_of_reply is not None:
        rr[reply_of_reply] = 1.0
    child_cf = child.author.casefold() if child.author else None
    addr = np.zeros(n)
    answers = np.zeros(n)
    same = np.zeros(n)
    for i, r in enumerate(reads):
        if r.author:
            if in_episode[i] and r.author.casefold() in addressed:
                addr[i] = 1.0
            same[i] = float(r.author == child.author)
        if child_cf and in_episode[i] and r.author != child.author and child_cf in r.addressed:
            answers[i] = 1.0
    continuation = same * latest * (hours <= CONTINUATION_MINUTES / 60)
    log_hours = np.log1p(hours)
    rule_parent = np.zeros(n)
    if rule[0] in by_id:
        rule_parent[by_id[rule[0]]] = 1.0
    rule_update = rule_parent * float(rule[1].startswith("UPDATE"))
    # the rule's UPDATE kinds apart: how far to trust each is the fit's to learn (a resolved challenge, other
    # values, a change cue: tmem.models.relation.fitted.RULE_KINDS)
    rule_kind = [rule_parent * float(rule[1] == f"UPDATE:{kind}") for kind in ("resolves", "values", "cue")]
    # a state answering a challenge changes what the challenge was about: the state it replied to, else the
    # current state other than the challenge itself
    reply_asks = float(reply is not None and bool(pc[reply].challenge or pc[reply].objection)
                       and not pc[reply].new_state)
    # a state in reply to an objection tends to settle it by changing the state objected to; one in reply to a
    # question tends to answer it (the fit weighs both against the reply link)
    reply_objects = float(bool(reply_asks and pc[reply].objection))
    about = np.zeros(n)
    if reply_asks and states:
        if reply_of_reply is not None and stated[reply_of_reply]:
            about[reply_of_reply] = 1.0
        else:
            others = [i for i in range(n) if stated[i] and i != reply
                      and rel[i] >= rel[stated > 0].max() - STATE_MARGIN]
            if others:
                about[max(others, key=lambda i: micros[i])] = 1.0
    # the child states a state in reply to an objection: the current state (the one objected to) is what it
    # settles, whichever message it replies to
    settles = states * reply_objects * current * (1 - reply_vec)
    topical = rel
    if reply is not None and states:  # the state a reply settles: relevant to the child or to what it answers
        topical = np.maximum(rel, _relevance(candidates[reply], candidates, scope, reply_sims)[0])
    slots = slot_columns(c, pc, topical, dec, reply, reply_of_reply, micros)
    slot, addressed_state, restates = slots["slot_head"], slots["addressed_state"], slots["restates"]
    settled = np.zeros(n)  # the first pass's choice (slots.settled_state); the role follows it
    target = settled_state(c, child.text, bool(ack), topical, pc, reply, reply_of_reply, micros, dec)
    if target is not None:
        settled[target] = 1.0
    gone = replaced_values(child.text)  # "45k, not 60": the candidate stating 60 is the state it replaces
    named_replaced = np.array([float(bool(gone & r.values)) for r in pc]) if gone else np.zeros(n)
    mine = frozenset(v for v in typed_values(child.text) if v[1] not in gone) if c.new_state else frozenset()
    kinds = np.array([float(kind_replaced(mine, typed_values(r.message.text))) for r in reads]) if mine \
        else np.zeros(n)
    latest_kind = np.zeros(n)  # the latest statement of the attribute: a chain A -> B -> C links C to B
    if kinds.any():
        latest_kind[max(np.flatnonzero(kinds), key=lambda i: micros[i])] = 1.0
    pair = np.empty((n, len(PAIR_FEATURES)))
    for k, column in enumerate((
            rel, rel - rel.max(), sim, overlap, reply_vec, rr, addr, answers, same, continuation, log_hours, latest,
            np.log1p(later), stated, new_state, dec, asked, current, head, shared, replaced,
            states * current, states * reply_vec, change * current, change * stated, asks * stated, ack * reply_vec,
            ack * latest, states * rel, rule_parent, rule_update, about, *rule_kind,
            states * reply_objects * reply_vec, states * (reply_asks - reply_objects) * reply_vec, settles,
            slot, states * slot, addressed_state, states * slots["reply_states_none"], settled, restates,
            change * restates, named_replaced, kinds, latest_kind)):
        pair[:, k] = column
    root = np.array([1.0, rel.max(), (rel * stated).max(), float(reply is not None), float(bool(addressed)),
                     states, change, asks, float(decisive(child.text)), math.log1p(n), float(log_hours.min()),
                     float(rule[0] is None)])
    label = np.empty((n, len(LABEL_FEATURES)))
    for k, column in enumerate((
            1.0, float(c.new_state), change, float(bool(c.revision)), asks, float(c.objection), ack,
            float(c.reaffirms), float(decisive(child.text)), float(bool(c.values)), replaced, shared, stated, asked,
            reply_vec, rel, same, float(bool(REJECTS.match(child.text))),
            float(c.new_state) * stated, change * stated, float(c.new_state) * asked, ack * reply_vec, current, head,
            rule_update, rule_parent - rule_update, states * reply_asks * (1 - reply_vec), *rule_kind, settles,
            slot, addressed_state, replaced * slot, float(bool(c.revision)) * shared, restates, named_replaced,
            kinds, latest_kind)):
        label[:, k] = column
    return pair, root, label
