"""Nothing the relation roles read may come from our own generator: every alternative of every cue pattern the
relation roles read (tmem/models/relation/*, and tmem/text.py's state-change cues they share) that matches a text of
the demo generator must also match a real chat (the Ubuntu IRC dev logs) or a hand-written dev case
(data/cases/dev). The generator's texts are the shipped demo (data/demo.jsonl) and the corpora of several more
seeds (GENERATOR_SEEDS, all four domains), and the template literals of tmem/demo/vocabulary.py themselves (a
template a seed happens not to draw is still checked). A cue only the generator uses ("locking it in", "looks
shaky", "% done", "scratch that") would make the demo's forest hold by our own words, and the demo's figures
in-distribution."""
import importlib
import inspect
import json
import pkgutil
import re
from functools import cache
from pathlib import Path

import pytest
from conftest import BENCHMARKS

import tmem.models.relation
from tmem import text as text_module
from tmem.demo import generate
from tmem.demo import vocabulary as demo_vocabulary
from tmem.models.relation import values

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


GENERATOR_SEEDS = (1, 2, 3, 4, 5)  # besides the shipped demo's seed 7: each draws other templates and slots
GENERATED_PER_SEED = 4 * 800  # messages per seed over the four domains (~1 s each)
_SLOT = re.compile(r"\{\w+\}")


def relation_modules() -> list:
    """tmem.text (the state-change cues the relation roles import) and every module of tmem/models/relation/."""
    package = tmem.models.relation
    return [text_module, package] + [importlib.import_module(f"{package.__name__}.{m.name}")
                                     for m in pkgutil.iter_modules(package.__path__)]


def _patterns() -> dict[str, re.Pattern]:
    """Every compiled pattern at module level or on a class of those modules, once, under the name of the module
    that compiles it (values.REVISION_CUES is tmem.text.STATE_CHANGE_CUES, scanned as the latter)."""
    found: dict[int, tuple[str, re.Pattern]] = {}
    for module in relation_modules():
        source = inspect.getsource(module)
        owners = [(module.__name__, vars(module))] + [
            (f"{module.__name__}.{n}", vars(c)) for n, c in vars(module).items()
            if isinstance(c, type) and c.__module__ == module.__name__]
        for owner, names in owners:
            for name, value in names.items():
                defined_here = re.search(rf"^\s*{re.escape(name)}\s*=\s*re\.compile", source, re.MULTILINE)
                if isinstance(value, re.Pattern) and (id(value) not in found or defined_here):
                    found[id(value)] = (f"{owner}.{name}", value)
    return dict(found.values())


def template_literals() -> list[str]:
    """The generator's template and slot texts as written, each {slot} replaced by a neutral 'X'."""
    pools = [*demo_vocabulary.T.values(), *demo_vocabulary.SLOTS.values(), *demo_vocabulary.ASPECTS.values()]
    return [_SLOT.sub("X", text) for pool in pools for text in pool if text]


@cache
def generated_texts() -> tuple[str, ...]:
    shipped = [json.loads(line)["text"] for line in (ROOT / "data" / "demo.jsonl").open(encoding="utf-8")
               if '"kind": "message"' in line]
    seeded = [m.text for seed in GENERATOR_SEEDS
              for m in generate(seed, GENERATED_PER_SEED, len(demo_vocabulary.DOMAINS)).messages]
    return tuple(shipped + seeded + template_literals())


@cache
def real_texts() -> tuple[str, ...]:
    real = [m.group(1) for f in sorted(IRC_DEV.glob("*.raw.txt"))
            for m in map(_LINE.match, f.read_text(encoding="utf-8", errors="replace").splitlines()) if m]
    for case in sorted((ROOT / "data" / "cases" / "dev" / "data").glob("*/*/*.json")):
        real += [m["content"] for channel in json.loads(case.read_text(encoding="utf-8")).values() for m in channel]
    return tuple(real)


def generator_only_cues() -> list[str]:
    # each distinct text once, in first-seen order (the same first example, the same verdict): the generator repeats
    # its texts (19,302 of them, 8,474 distinct), and each of the ~700 cues scanned every repeat again
    generated, real = tuple(dict.fromkeys(generated_texts())), tuple(dict.fromkeys(real_texts()))
    found = []
    for name, pattern in _patterns().items():
        for alternative in alternatives(pattern.pattern):
            cue = re.compile(alternative, pattern.flags)
            example = next((t for t in generated if cue.search(t)), None)
            if example is not None and not any(cue.search(t) for t in real):
                found.append(f"{name}: {alternative!r} (e.g. {example[:60]!r})")
    return found


def test_the_scan_covers_every_seed_the_templates_and_each_cue_module():
    """The scan's premises: the shared state-change cues and the relation package's patterns are in it, and the
    seeds and the template literals reach texts the shipped demo does not (a cue in an undrawn template counts)."""
    names = set(_patterns())
    assert "tmem.text.STATE_CHANGE_CUES" in names and "tmem.models.relation.values.DECISIVE" in names
    assert not any(n.startswith("tmem.models.relation.values.REVISION_CUES") for n in names)  # scanned once
    shipped = {json.loads(line)["text"] for line in (ROOT / "data" / "demo.jsonl").open(encoding="utf-8")
               if '"kind": "message"' in line}
    assert len(set(generated_texts()) - shipped) > 5000  # 6,686 distinct texts the shipped demo lacks
    assert "X instead of X, X. X" in template_literals()  # the "update" template with its cue slot
    assert any(t.startswith("Correction:") for t in template_literals())  # a SLOTS["cue"] literal


def test_no_relation_cue_comes_from_the_generator_alone():
    if not IRC_DEV.exists():
        pytest.skip("the Ubuntu IRC dev logs are not in ../shared/benchmarks")
    assert len(generated_texts()) > 15000 and len(real_texts()) > 10000
    only_generated = generator_only_cues()
    assert not only_generated, "cues only the demo generator uses:\n" + "\n".join(only_generated)


def test_every_settling_cue_the_demo_uses_settles_a_state_in_a_hand_written_case():
    """DECISIVE marks the statement of a slot (a later revision's likely parent), so each of its cues that the demo
    uses must settle a state somewhere in the hand-written dev cases: match a message their annotation makes the
    start or the change of a state (a gold ROOT or UPDATE of the sidecar). Matching real text in another sense is
    not enough: "=" wrote the demo generator's decisions ("X = Y") and real chats' sums and shell commands, never a
    decision there."""
    generated = generated_texts()
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
