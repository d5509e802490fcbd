"""Nothing the relation roles read may come from our own generator: every alternative of every relation-role
pattern that matches a message of the generated demo (data/demo.jsonl, written from tmem/demo/vocabulary.py's
templates) must also match a real chat (the Ubuntu IRC dev logs) or a hand-written dev case (data/cases/dev).
A cue only the generator uses ("locking it in", "looks shaky", "% done") would make the demo's forest hold by our
own words, and the demo's figures in-distribution."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import BENCHMARKS

from tmem.models.relation import cue_overlap, revision, signals, slots, state, values

ROOT = Path(__file__).resolve().parents[1]
IRC_DEV = BENCHMARKS / "ubuntu-irc-disentanglement" / "dev"
_LINE = re.compile(r"\[[\d:]+\] <[^>]+> (.*)")


def _scan(pattern: str):
    """(position, character, group depth before it) of each character outside escapes and character classes."""
    depth, in_class, i = 0, False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        else:
            yield i, ch, depth
            depth += (ch == "(") - (ch == ")")
        i += 1


def _split(pattern: str) -> list[str]:
    """`pattern` split at its '|' outside groups and character classes."""
    cuts = [i for i, ch, depth in _scan(pattern) if ch == "|" and depth == 0]
    return [pattern[a + 1:b] for a, b in zip([-1, *cuts], [*cuts, len(pattern)])]


def _groups(pattern: str) -> list[tuple[int, int]]:
    """(open, close) positions of the outermost groups."""
    out, opened = [], 0
    for i, ch, depth in _scan(pattern):
        if ch == "(" and depth == 0:
            opened = i
        elif ch == ")" and depth == 1:
            out.append((opened, i))
    return out


def alternatives(pattern: str) -> list[str]:
    """Each cue of a pattern on its own: the top-level alternatives, and those of its outermost groups, expanded
    (one cue per phrase: '\\b(too (long|short))\\b' stays one, 'a|b(c|d)' gives a, bc, bd)."""
    out = []
    for piece in _split(pattern):
        for start, end in _groups(piece):
            inner = piece[start + 1:end]
            head = re.match(r"\?(?:i:|:|<=|<!|=|!)", inner)
            if head and head.group(0) in ("?<=", "?<!", "?=", "?!"):
                continue  # a look-around is context, not a cue
            prefix = head.group(0) if head else ""
            choices = _split(inner[len(prefix):])
            if len(choices) > 1:
                for choice in choices:
                    out += alternatives(f"{piece[:start]}({prefix}{choice}){piece[end + 1:]}")
                break
        else:
            out.append(piece)
    return out


def test_alternatives_split_each_cue():
    assert alternatives(r"\b(a|b (c|d))\b|e") == [r"\b(a)\b", r"\b(b (c|d))\b", "e"]
    assert alternatives(r"(?<=x )(y|z)") == [r"(?<=x )(y)", r"(?<=x )(z)"]


def _patterns() -> dict[str, re.Pattern]:
    out = {}
    for module in (values, signals, state, cue_overlap, slots, revision):
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                out.setdefault(f"{module.__name__}.{name}", value)
    return out


def test_no_relation_cue_comes_from_the_generator_alone():
    if not IRC_DEV.exists():
        pytest.skip("the Ubuntu IRC dev logs are not in ../shared/benchmarks")
    generated = [json.loads(line)["text"] for line in (ROOT / "data" / "demo.jsonl").open(encoding="utf-8")
                 if '"kind": "message"' in line]
    real = [m.group(1) for f in sorted(IRC_DEV.glob("*.raw.txt"))
            for m in map(_LINE.match, f.read_text(encoding="utf-8", errors="replace").splitlines()) if m]
    for case in sorted((ROOT / "data" / "cases" / "dev" / "data").glob("*/*/*.json")):
        real += [m["content"] for channel in json.loads(case.read_text(encoding="utf-8")).values() for m in channel]
    assert len(generated) > 1000 and len(real) > 10000
    only_generated = []
    for name, pattern in _patterns().items():
        for alternative in alternatives(pattern.pattern):
            cue = re.compile(alternative, pattern.flags)
            example = next((t for t in generated if cue.search(t)), None)
            if example is not None and not any(cue.search(t) for t in real):
                only_generated.append(f"{name}: {alternative!r} (e.g. {example[:60]!r})")
    assert not only_generated, "cues only the demo generator uses:\n" + "\n".join(only_generated)


def test_every_settling_cue_the_demo_uses_settles_a_state_in_a_hand_written_case():
    """DECISIVE marks the statement of a slot (a later revision's likely parent), so each of its cues that the demo
    uses must settle a state somewhere in the hand-written dev cases: match a message their annotation makes the
    start or the change of a state (a gold ROOT or UPDATE of the sidecar). Matching real text in another sense is
    not enough: "=" wrote the demo generator's decisions ("X = Y") and real chats' sums and shell commands, never a
    decision there."""
    generated = [json.loads(line)["text"] for line in (ROOT / "data" / "demo.jsonl").open(encoding="utf-8")
                 if '"kind": "message"' in line]
    relation = {e["child"]: e["relation"] for e in map(json.loads, (ROOT / "data" / "cases" / "dev" /
                                                                     "gold_edges.jsonl").open(encoding="utf-8"))}
    settled = [m["content"] for case in sorted((ROOT / "data" / "cases" / "dev" / "data").glob("*/*/*.json"))
               for channel in json.loads(case.read_text(encoding="utf-8")).values() for m in channel
               if relation.get(m["msg_node"]) in ("ROOT", "UPDATE")]
    assert len(settled) > 200
    flags = values.DECISIVE.flags
    used = [a for a in alternatives(values.DECISIVE.pattern) if any(re.search(a, t, flags) for t in generated)]
    unattested = [a for a in used if not any(re.search(a, t, flags) for t in settled)]
    assert not unattested, f"settling cues no hand-written decision uses: {unattested}"
