"""Features of a child and its Eq. 4 candidates for the fitted relation role (tmem/models/relation_learned.py).

Everything here is what any chat carries — text, author, time, a reply link, mentions — read with the state-seeking
rule's helpers (tmem/models/relation_offline.py, tmem/models/state_values.py); no corpus-specific word lists. Three
groups, each a fixed tuple of names so that weights files stay readable:
- PAIR (per candidate): how well the candidate fits as the parent, also crossed with what the child does;
- ROOT (per child): how likely the child starts a tree (the ROOT option's score);
- LABEL (per candidate, read for the chosen one): UPDATE rather than EXPAND.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from tmem.models.relation_offline import (
    _FOLLOW_UP,
    _REJECTS,
    SUPPORT_CUES,
    addressed_names,
    candidate_overlaps,
    mentioned_authors,
)
from tmem.models.state_values import cues, decisive
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
    "rule_update_parent", "resolves_challenge")
ROOT_FEATURES = ("bias", "max_relevance", "max_state_relevance", "has_reply", "addresses_someone", "child_states",
                 "child_change", "child_asks", "child_decisive", "log_candidates", "log_hours_last", "rule_root")
LABEL_FEATURES = ("bias", "child_new_state", "child_change", "child_revision", "child_asks", "child_objects",
                  "child_ack", "child_reaffirms", "child_decisive", "child_has_values", "replaced_values",
                  "shared_values", "parent_states", "parent_asks", "parent_is_reply", "relevance", "same_author",
                  "rejects", "new_state_x_parent_states", "change_x_parent_states",
                  "new_state_x_parent_asks", "ack_x_parent_is_reply", "parent_current", "parent_head",
                  "rule_update_here", "rule_expand_here", "new_state_x_reply_asks")

STATE_MARGIN = 0.1  # the current state: the latest stated state within this relevance of the best one


def _relevance(child: Message, candidates: Sequence[Message], scope, sims: np.ndarray | None):
    """(relevance, similarity, overlap) arrays over the candidates, as the state rule computes them."""
    overlap = np.array(candidate_overlaps(child, candidates, scope))
    sim = np.asarray(sims, dtype=float) if sims is not None else np.zeros(len(candidates))
    w = SIMILARITY_WEIGHT if sims is not None else 0.0
    return w * sim + (1 - w) * overlap, sim, overlap


@lru_cache(maxsize=65536)
def _addressed(text: str) -> frozenset[str]:
    return frozenset(addressed_names(text))  # each candidate's text is read once per scope, not once per child


def _replaced(child_values: frozenset[str], parent_values: frozenset[str]) -> bool:
    """Of one kind (numbers, else names), the child drops some of the parent's values and brings new ones."""
    numbers = {v for v in child_values if v[:1].isdigit()}
    mine = numbers or set(child_values)
    theirs = {v for v in parent_values if v[:1].isdigit() == bool(numbers)}
    return bool(mine - theirs and theirs - mine)


def relation_features(child: Message, candidates: Sequence[Message], scope, sims: np.ndarray | None,
                      rule: tuple[str | None, str] = (None, "ROOT")) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pair matrix n x |PAIR|, root vector |ROOT|, label matrix n x |LABEL|) for a child and its candidates.
    `rule` is the hand-ordered state rule's decision (parent id or None, relation): one signal among the others,
    weighed by the fit like them."""
    n = len(candidates)
    rel, sim, overlap = _relevance(child, candidates, scope, sims)
    c = cues(child.text)
    pc = [cues(p.text) for p in candidates]
    asks = float(c.challenge)
    ack = float(bool(SUPPORT_CUES.match(child.text) or _FOLLOW_UP.search(child.text)))
    change = float(bool(c.change or c.revision))
    states = float(c.new_state and not c.challenge)
    hours = np.array([max((child.timestamp - p.timestamp).total_seconds(), 0.0) / 3600 for p in candidates])
    order = np.argsort([p.timestamp for p in candidates], kind="stable")
    later = np.empty(n)
    later[order] = np.arange(n)[::-1]  # how many candidates are later than this one
    latest = (later == 0).astype(float)
    by_id = {p.id: i for i, p in enumerate(candidates)}
    reply = by_id.get(child.reply_to) if child.reply_to else None
    reply_of_reply = by_id.get(candidates[reply].reply_to) if reply is not None and candidates[reply].reply_to \
        else None
    addressed = addressed_names(child.text)
    in_episode = hours <= EPISODE_HOURS
    authors = {p.author.casefold() for i, p in enumerate(candidates) if p.author and in_episode[i]
               and p.author != child.author}
    addressed |= mentioned_authors(child.text, authors)
    stated = np.array([x.states and not x.challenge for x in pc], dtype=float)
    # the current state: the latest stated state whose relevance is within STATE_MARGIN of the best stated one
    current = np.zeros(n)
    if stated.any():
        best = rel[stated > 0].max()
        near = [i for i in range(n) if stated[i] and rel[i] >= best - STATE_MARGIN]
        current[max(near, key=lambda i: candidates[i].timestamp)] = 1.0
    superseded = (stated[None, :] > 0) & (later[None, :] < later[:, None]) & (rel[None, :] >= rel[:, None])
    head = stated * ~superseded.any(axis=1)
    shared = np.array([float(bool(c.values & x.values)) for x in pc])
    replaced = np.array([float(_replaced(c.values, x.values)) for x in pc]) if c.values else np.zeros(n)
    reply_vec = np.zeros(n)
    if reply is not None:
        reply_vec[reply] = 1.0
    rr = np.zeros(n)
    if reply_of_reply is not None:
        rr[reply_of_reply] = 1.0
    addr = np.array([float(bool(in_episode[i] and p.author and p.author.casefold() in addressed))
                     for i, p in enumerate(candidates)])
    answers = np.array([float(bool(in_episode[i] and child.author and p.author != child.author
                                   and child.author.casefold() in _addressed(p.text)))
                        for i, p in enumerate(candidates)])
    same = np.array([float(bool(p.author and p.author == child.author)) for p in candidates])
    continuation = same * latest * (hours <= CONTINUATION_MINUTES / 60)
    new_state = np.array([float(x.new_state and not x.challenge) for x in pc])
    dec = np.array([float(decisive(p.text)) for p in candidates])
    asked = np.array([float(x.challenge or x.objection) for x in pc])
    log_hours = np.log1p(hours)
    rule_parent = np.array([float(p.id == rule[0]) for p in candidates])
    rule_update = rule_parent * float(rule[1].startswith("UPDATE"))
    # a state answering a challenge changes what the challenge was about: the state it replied to, else the
    # current state other than the challenge itself
    reply_asks = float(reply is not None and bool(pc[reply].challenge or pc[reply].objection)
                       and not pc[reply].new_state)
    about = np.zeros(n)
    if reply_asks and states:
        if reply_of_reply is not None and stated[reply_of_reply]:
            about[reply_of_reply] = 1.0
        else:
            others = [i for i in range(n) if stated[i] and i != reply
                      and rel[i] >= rel[stated > 0].max() - STATE_MARGIN]
            if others:
                about[max(others, key=lambda i: candidates[i].timestamp)] = 1.0
    pair = np.column_stack([
        rel, rel - rel.max(), sim, overlap, reply_vec, rr, addr, answers, same, continuation, log_hours, latest,
        np.log1p(later), stated, new_state, dec, asked, current, head, shared, replaced,
        states * current, states * reply_vec, change * current, change * stated, asks * stated, ack * reply_vec,
        ack * latest, states * rel, rule_parent, rule_update, about])
    root = np.array([1.0, rel.max(), (rel * stated).max(), float(reply is not None), float(bool(addressed)),
                     states, change, asks, float(decisive(child.text)), math.log1p(n), float(log_hours.min()),
                     float(rule[0] is None)])
    label = np.column_stack([
        np.ones(n), np.full(n, float(c.new_state)), np.full(n, change), np.full(n, float(bool(c.revision))),
        np.full(n, asks), np.full(n, float(c.objection)), np.full(n, ack), np.full(n, float(c.reaffirms)),
        np.full(n, float(decisive(child.text))), np.full(n, float(bool(c.values))), replaced, shared, stated, asked,
        reply_vec, rel, same, np.full(n, float(bool(_REJECTS.match(child.text)))),
        float(c.new_state) * stated, change * stated, float(c.new_state) * asked, ack * reply_vec, current, head,
        rule_update, rule_parent - rule_update, np.full(n, states * reply_asks) * (1 - reply_vec)])
    return pair, root, label
