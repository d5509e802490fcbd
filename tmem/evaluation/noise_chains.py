"""Injected revision-noise chains (paper Sec. 5.6, Exp-5, Fig. 4): for each question with a gold UPDATE chain
(tmem.analysis.chains), k intermediate revisions of its current state and a final rollback to it are inserted
right after the message that states it, linked by gold UPDATE edges (state -> revision 1 -> ... -> revision k ->
rollback). The answer does not change (the rollback restores the state); the rollback joins the gold evidence, and
Complete Chain Recall then asks whether the whole chain — state, revisions, rollback — reached the context.

The text comes from templates: a JSON file the user supplies ({"revision": [...], "rollback": [...]}, Python format
strings over {text} (the state's message), {author}, {i} and {k}), or the offline defaults below, which only test
the plumbing: the paper generated its chains with a language model, and these fixed sentences share the state's words
in a way no real revision does. A noise corpus is a new corpus, written to a new file (never over the original).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

from tmem.analysis.chains import gold_chain
from tmem.demo.writers import write_jsonl
from tmem.types import UPDATE, CorpusData, CorpusError, Gold, Message

PLUMBING = {  # offline, for the plumbing only: say so wherever a figure measured on them is shown
    "revision": ["Change of plan on this, revision {i} of {k}: we try another option instead of {author}'s.",
                 "Revising it again ({i} of {k}): the other option for now, not what {author} said."],
    "rollback": ["Rolling back the last {k} changes: we go back to what {author} said: {text}"],
}
TEMPLATE_KINDS = ("revision", "rollback")
STEP = timedelta(minutes=2)  # the inserted messages follow the state closely ("near the original evidence")


@dataclass(frozen=True)
class Injected:
    data: CorpusData
    chains: int  # questions that received a noise chain
    plumbing: bool  # True: the offline templates wrote the text


def load_templates(path: Path | None) -> tuple[dict[str, list[str]], bool]:
    """(templates, plumbing): the user's JSON file, checked, or the offline plumbing defaults."""
    if path is None:
        return PLUMBING, True
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusError(f"{path}: not a readable JSON templates file ({exc})") from exc
    if not isinstance(data, dict):
        raise CorpusError(f"{path}: templates must be an object with 'revision' and 'rollback' lists")
    for kind in TEMPLATE_KINDS:
        items = data.get(kind)
        if not isinstance(items, list) or not items or not all(isinstance(t, str) and t.strip() for t in items):
            raise CorpusError(f"{path}: field {kind!r} must be a non-empty list of non-empty strings")
        for t in items:
            try:
                t.format(text="", author="", i=1, k=1)
            except (KeyError, IndexError, ValueError) as exc:
                raise CorpusError(f"{path}: field {kind!r}: template {t[:60]!r} uses an unknown placeholder "
                                  f"({exc}); known: {{text}}, {{author}}, {{i}}, {{k}}") from exc
    return {kind: list(data[kind]) for kind in TEMPLATE_KINDS}, False


def inject(data: CorpusData, k: int, templates: Mapping[str, Sequence[str]], plumbing: bool,
           limit: int | None = None) -> Injected:
    """A new corpus: `data` with a noise chain of k revisions and a rollback after each chain question's state."""
    if k < 1:
        raise ValueError("--k must be at least 1 (revisions per chain)")
    golds = {(s, g.question_id): g for s, g in data.golds}
    by_id = {(m.scope, m.id): m for m in data.messages}
    edges: dict[str, list[tuple]] = {}
    for scope, child, parent, *rest in data.links:
        edges.setdefault(scope, []).append((child, parent, rest[0] if rest else None))
    messages, links, new_golds, done = list(data.messages), list(data.links), dict(golds), 0
    for q in data.questions:
        gold = golds.get((q.scope, q.id))
        if limit is not None and done >= limit:
            break
        if gold_chain(gold, edges.get(q.scope, ())) is None:
            continue
        state = _current_state(gold, q.scope, by_id)
        if state is None:
            continue
        chain = _noise(state, k, templates, done)
        messages += chain
        ids = [state.id] + [m.id for m in chain]
        links += [(q.scope, child, parent, UPDATE) for parent, child in zip(ids, ids[1:])]
        new_golds[(q.scope, q.id)] = replace(gold, evidence=gold.evidence + ((chain[-1].id,),))
        done += 1
    messages.sort(key=lambda m: (m.scope, m.timestamp))
    out = CorpusData(messages, data.questions, [(s, g) for (s, _), g in new_golds.items()], links)
    return Injected(out, done, plumbing)


def _current_state(gold: Gold, scope: str, by_id: Mapping) -> Message | None:
    """The latest-stated gold unit's message: the state the question asks for."""
    found = [by_id[(scope, i)] for unit in gold.evidence for i in unit[:1] if (scope, i) in by_id]
    return max(found, key=lambda m: m.timestamp) if found else None


def _noise(state: Message, k: int, templates: Mapping[str, Sequence[str]], salt: int) -> list[Message]:
    fields = {"text": state.text, "author": state.author or "them", "k": k}
    out = []
    for i in range(1, k + 2):
        kind = "rollback" if i == k + 1 else "revision"
        options = templates[kind]
        text = options[(salt + i) % len(options)].format(**fields, i=i)
        out.append(replace(state, id=f"{state.id}~{'rollback' if kind == 'rollback' else f'rev{i}'}", text=text,
                           timestamp=state.timestamp + i * STEP, reply_to=out[-1].id if out else state.id))
    return out


def write_corpus(data: CorpusData, path: Path) -> None:
    """The noise corpus as the project's JSONL (typed gold edges as link records), to a new file only."""
    if path.exists():
        raise FileExistsError(f"{path}: exists; a noise corpus is written to a new file, never over another")
    write_jsonl(data, path)
