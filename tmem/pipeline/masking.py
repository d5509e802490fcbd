"""Metadata hidden from the model roles in the ablations that remove it: a variant without topic in
discovery must not show the topic to the evidence-utility role either, one without topic/phase in structuring
must not show them to the relation role, and one without metadata expansion shows no channel, phase, topic or
role to any role, the answer model's passages included. The stages wrap the role (`masked_role`) or mask the
messages they serialize (`mask`): the role sees copies of the messages with those fields empty (ids unchanged,
so its replies still name the real messages), and the stage's backend line says what was hidden. Pure and small;
no role needs to know about it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tmem.types import Message

TOPIC = ("topic",)
PHASE = ("phase", "stage", "phase_order", "phase_progress")
METADATA = ("channel", "phase", "topic", "role")  # the expansion fields besides the author (retrieval, App. C)


def hidden_from_utility(config) -> tuple[str, ...]:
    """Fields the evidence-utility role must not see under `config` (a TMemConfig)."""
    hidden = list(TOPIC) if not config.discovery.use_topic else []
    hidden += [f for f in METADATA if f not in config.retrieval.metadata_fields]
    return tuple(dict.fromkeys(hidden))


def hidden_from_relation(config) -> tuple[str, ...]:
    s = config.structuring
    hidden = (list(TOPIC) if not s.use_topic else []) + (list(PHASE) if not s.use_phase else [])
    hidden += [f for f in METADATA if f not in config.retrieval.metadata_fields]
    return tuple(dict.fromkeys(hidden))


def hidden_from_answer(config) -> tuple[str, ...]:
    """Without metadata expansion, the answer model's passages carry no channel, phase, topic or role either (the
    Exp-6 presets keep them there: they ablate discovery and structuring, not the answer)."""
    return tuple(f for f in METADATA if f not in config.retrieval.metadata_fields)


def mask(messages: Sequence[Message], fields: Sequence[str]) -> list[Message]:
    blank = {f: None for f in fields}
    return [replace(m, **blank) for m in messages] if blank else list(messages)


class _Masked:
    """A role that hands its inner role masked copies of every Message argument; everything else passes through."""

    def __init__(self, inner, fields: tuple[str, ...]):
        self._inner, self._fields = inner, fields

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def _arg(self, value):
        if isinstance(value, Message):
            return mask([value], self._fields)[0]
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, Message) for v in value):
            return type(value)(mask(value, self._fields))
        return value

    def select(self, question, window_id, candidates, *args, **kwargs):
        return self._inner.select(question, window_id, self._arg(candidates), *args, **kwargs)

    def label_pairs(self, question, child, candidates, *args, **kwargs):
        return self._inner.label_pairs(question, self._arg(child), self._arg(candidates), *args, **kwargs)


def masked_role(role, fields: tuple[str, ...]):
    """`role` itself when nothing is hidden, else a wrapper that hides `fields` from it."""
    return _Masked(role, fields) if fields else role


def hidden_note(fields: tuple[str, ...]) -> str:
    return f"; hidden from the role: {', '.join(fields)}" if fields else ""
