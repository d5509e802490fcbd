"""Chaining the states first (Fig. 10, App. G.2-G.4): which earlier message states the state a child speaks about.

A message *states a state* when some sentence of it sets a decision, rule, plan, owner or value in force
(tmem.models.state_values: not a question, objection, report or bare acknowledgement). The earlier statements of a
state are the candidates that state one; the child's *slot* is the one of those it is most relevant to (relevance =
cosine + IDF-weighted overlap, as in the state rule): the same topic, the slot's words and values. Two readings
follow, both features of the fitted relation role (tmem/models/relation_features.py) whose weights the fit sets:

- **slot head**: the most relevant earlier statement of a state. A child that states a new state is an UPDATE of
  it when it changes it (other values, a change cue), wherever its reply link points.
- **addressed state**: a child that states a state in reply to a message that states none (a challenge, a
  question, an objection, a status report) settles what that message was about: the state the message itself
  replies to, else the slot head other than the message. The reply link then points at the challenge, the UPDATE
  at the state the challenge questions (the demo's Msg_2094 -> Msg_2100 case, the cases' "Which roles go?" ->
  "Dropping the SRE req ..." case).

`no_update_between` is the hard constraint the structuring keeps whatever the weights say: no UPDATE from or to a
message that states no state (Sec. 4.3: an UPDATE changes a state).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tmem.models.state_values import Cues


def states_a_state(c: Cues) -> bool:
    """Some sentence sets a state and the message asks nothing (a question about a state states none)."""
    return bool(c.states and not c.challenge)


def slot_head(relevance: np.ndarray, stated: np.ndarray, exclude: int | None = None) -> int | None:
    """Index of the most relevant candidate that states a state (not `exclude`); None when none does."""
    mask = stated > 0
    if exclude is not None:
        mask = mask.copy()
        mask[exclude] = False
    if not mask.any():
        return None
    return int(np.argmax(np.where(mask, relevance, -np.inf)))


def addressed_state(relevance: np.ndarray, stated: np.ndarray, reply: int | None,
                    reply_of_reply: int | None) -> int | None:
    """The state a reply to a non-state message settles: what that message replies to when it states a state,
    else the slot head other than the message itself."""
    if reply is None:
        return None
    if reply_of_reply is not None and stated[reply_of_reply]:
        return reply_of_reply
    return slot_head(relevance, stated, exclude=reply)


def slot_columns(child: Cues, reads: Sequence[Cues], relevance: np.ndarray, stated: np.ndarray,
                 reply: int | None, reply_of_reply: int | None) -> dict[str, np.ndarray]:
    """Per-candidate 0/1 columns: `slot_head`, `addressed_state` (only for a child that states a state in reply to
    a message stating none) and `reply_states_none` (the reply target, when it states no state)."""
    n = len(reads)
    head, addressed, reply_none = np.zeros(n), np.zeros(n), np.zeros(n)
    best = slot_head(relevance, stated)
    if best is not None:
        head[best] = 1.0
    if reply is not None and not states_a_state(reads[reply]):
        reply_none[reply] = 1.0
        if states_a_state(child) and child.new_state:
            target = addressed_state(relevance, stated, reply, reply_of_reply)
            if target is not None:
                addressed[target] = 1.0
    return {"slot_head": head, "addressed_state": addressed, "reply_states_none": reply_none}


def no_update_between(child: Cues, parent: Cues) -> bool:
    """True when an UPDATE of `parent` by `child` is impossible: one of them states no state."""
    return not (states_a_state(child) and child.new_state and parent.states)
