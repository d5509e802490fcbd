"""Injected revision-noise chains (paper Sec. 5.6, Exp-5, Fig. 4): for each question with a gold UPDATE chain
(tmem.analysis.chains), k intermediate revisions of its current state and a final rollback to it are inserted
right after the message that states it, linked by gold UPDATE edges (state -> revision 1 -> ... -> revision k ->
rollback). The answer does not change (the rollback restores the state); the rollback joins the gold evidence, and
Complete Chain Recall then asks whether the whole chain — state, revisions, rollback — reached the context.

The text has one of three writers, and the result names which (`Injected.writer`):
- the answer-model endpoint, as the paper did (its chains were written by a language model): one call per chain
  through the answer role's client (cache, retries, budget cap, usage), the prompt tmem/prompts/noise_chain_system.txt
  with the question and the state's message as delimited data, the reply {"revisions": [k strings], "rollback": str}
  checked; one unusable reply stops the whole corpus, naming its question (`endpoint_writer`);
- templates: a JSON file the user supplies ({"revision": [...], "rollback": [...]}, Python format strings over {text}
  (the state's message), {author}, {i} and {k});
- the offline defaults below, which only test the plumbing: these fixed sentences share the state's words in a way
  no real revision does.
A noise corpus is a new corpus, written to a new file (never over the original). Each injected message and gold
edge carries its writer in the field `noise_writer` (tmem.corpora.jsonl.NOISE_WRITER), in words (`Injected.
writer_text`), so the file says who wrote its chains wherever it goes, and its import notes count them per writer.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

from tmem.analysis.chains import gold_chain
from tmem.corpora.jsonl import NOISE_WRITER
from tmem.demo.writers import write_jsonl
from tmem.models.llm.budget_cap import BudgetExceeded
from tmem.models.llm.failures import CallFailed, MalformedReply
from tmem.prompts import prompt_text
from tmem.types import UPDATE, CorpusData, CorpusError, Gold, Message, Question

PLUMBING = {  # offline, for the plumbing only: say so wherever a figure measured on them is shown
    "revision": ["Change of plan on this, revision {i} of {k}: we try another option instead of {author}'s.",
                 "Revising it again ({i} of {k}): the other option for now, not what {author} said."],
    "rollback": ["Rolling back the last {k} changes: we go back to what {author} said: {text}"],
}
TEMPLATE_KINDS = ("revision", "rollback")
STEP = timedelta(minutes=2)  # the inserted messages follow the state closely ("near the original evidence")
PLUMBING_WRITER = "plumbing"  # Injected.writer of the offline templates
MAX_CHARS = 1000  # a model-written revision or rollback longer than this is refused (a chat message, not an essay)
# (question, state message, k, chain index) -> (k revision texts, rollback text)
Writer = Callable[[Question, Message, int, int], tuple[list[str], str]]


class NoiseWriterError(ValueError):
    """The endpoint's chain for one question was unusable (after the client's retries): nothing is written."""


@dataclass(frozen=True)
class Injected:
    data: CorpusData
    chains: int  # questions that received a noise chain
    writer: str  # who wrote the text: "plumbing", "templates <file>" or "endpoint <model>@<url>"

    injected: frozenset[tuple[str, str]] = frozenset()  # (scope, id) of the messages the chains added

    @property
    def plumbing(self) -> bool:
        """True: the offline templates wrote the text (a plumbing figure, not the paper's chains)."""
        return self.writer == PLUMBING_WRITER

    @property
    def writer_text(self) -> str:
        """Who wrote the text, in words a reader of the file or of a figure needs."""
        if self.plumbing:
            return "the offline plumbing templates (a plumbing figure, not the paper's model-written chains)"
        if self.writer.startswith("endpoint "):
            return f"the answer-model endpoint {self.writer.removeprefix('endpoint ')}"
        return f"the user's {self.writer}"


def load_templates(path: Path | None) -> tuple[dict[str, list[str]], str]:
    """(templates, writer name): the user's JSON file, checked ("templates <file>"), or the offline plumbing defaults
    ("plumbing")."""
    if path is None:
        return PLUMBING, PLUMBING_WRITER
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
    return {kind: list(data[kind]) for kind in TEMPLATE_KINDS}, f"templates {path.name}"


def inject(data: CorpusData, k: int, writer: Writer, writer_name: str, limit: int | None = None) -> Injected:
    """A new corpus: `data` with a noise chain of k revisions and a rollback after each chain question's state, its
    text from `writer` (`template_writer`, `endpoint_writer`); `writer_name` is recorded in the result."""
    if k < 1:
        raise ValueError("--k must be at least 1 (revisions per chain)")
    golds = {(s, g.question_id): g for s, g in data.golds}
    by_id = {(m.scope, m.id): m for m in data.messages}
    edges: dict[str, list[tuple]] = {}
    for scope, child, parent, *rest in data.links:
        edges.setdefault(scope, []).append((child, parent, rest[0] if rest else None))
    messages, links, new_golds, done, added = list(data.messages), list(data.links), dict(golds), 0, set()
    for q in data.questions:
        gold = golds.get((q.scope, q.id))
        if limit is not None and done >= limit:
            break
        if gold_chain(gold, edges.get(q.scope, ())) is None:
            continue
        state = _current_state(gold, q.scope, by_id)
        if state is None:
            continue
        chain = _noise(state, *writer(q, state, k, done))
        messages += chain
        added |= {(m.scope, m.id) for m in chain}
        ids = [state.id] + [m.id for m in chain]
        links += [(q.scope, child, parent, UPDATE) for parent, child in zip(ids, ids[1:])]
        new_golds[(q.scope, q.id)] = replace(gold, evidence=gold.evidence + ((chain[-1].id,),))
        done += 1
    messages.sort(key=lambda m: (m.scope, m.timestamp))
    out = CorpusData(messages, data.questions, [(s, g) for (s, _), g in new_golds.items()], links)
    return Injected(out, done, writer_name, frozenset(added))


def _current_state(gold: Gold, scope: str, by_id: Mapping) -> Message | None:
    """The latest-stated gold unit's message: the state the question asks for."""
    found = [by_id[(scope, i)] for unit in gold.evidence for i in unit[:1] if (scope, i) in by_id]
    return max(found, key=lambda m: m.timestamp) if found else None


def _noise(state: Message, revisions: Sequence[str], rollback: str) -> list[Message]:
    """The chain's messages after `state`, STEP apart, each replying to the one before."""
    out = []
    for i, text in enumerate([*revisions, rollback], start=1):
        suffix = "rollback" if i == len(revisions) + 1 else f"rev{i}"
        out.append(replace(state, id=f"{state.id}~{suffix}", text=text, timestamp=state.timestamp + i * STEP,
                           reply_to=out[-1].id if out else state.id))
    return out


def template_writer(templates: Mapping[str, Sequence[str]]) -> Writer:
    """Texts from format-string templates (the user's file or PLUMBING), rotated by the chain's index."""
    def write(question: Question, state: Message, k: int, salt: int) -> tuple[list[str], str]:
        fields = {"text": state.text, "author": state.author or "them", "k": k}

        def text(kind: str, i: int) -> str:
            options = templates[kind]
            return options[(salt + i) % len(options)].format(**fields, i=i)
        return [text("revision", i) for i in range(1, k + 1)], text("rollback", k + 1)
    return write


def noise_user_message(question: Question, state: Message, k: int) -> str:
    """The question and the state's message as data (JSON lines between BEGIN/END markers, as the roles send)."""
    from tmem.models.llm.roles import DATA_NOTE, block, message_line, question_block  # loads the openai client
    return "\n".join([DATA_NOTE, question_block(question), block("CURRENT STATE MESSAGE", [message_line(state)]),
                      f'Return only JSON: {{"revisions": [{k} strings], "rollback": "<string>"}}, with exactly '
                      f'{k} revision(s).'])


def parse_chain(k: int) -> Callable[[str], tuple[list[str], str]]:
    """The reply's k revisions and rollback: non-empty strings of at most MAX_CHARS (else MalformedReply, which the
    client retries with a repair request)."""
    from tmem.models.llm.openai_backend import parse_json_object  # loads the openai client

    def parse(text: str) -> tuple[list[str], str]:
        reply = parse_json_object(text, "revisions")
        revisions, rollback = reply["revisions"], reply.get("rollback")
        if not isinstance(revisions, list) or len(revisions) != k:
            raise MalformedReply(f"'revisions' must be a list of exactly {k} strings")
        for name, value in [*((f"revisions[{i}]", r) for i, r in enumerate(revisions)), ("rollback", rollback)]:
            if not isinstance(value, str) or not value.strip():
                raise MalformedReply(f"{name!r} must be a non-empty string")
            if len(value) > MAX_CHARS:
                raise MalformedReply(f"{name!r} is {len(value)} characters, over {MAX_CHARS}")
        return [r.strip() for r in revisions], rollback.strip()
    return parse


def endpoint_writer(client) -> Writer:
    """Texts written by the answer role's model (`client`: its tmem.models.llm.openai_backend.ChatClient), one call
    per chain. An unusable reply, after the client's retries, raises NoiseWriterError naming the question."""
    system = prompt_text("noise_chain_system")

    def write(question: Question, state: Message, k: int, salt: int) -> tuple[list[str], str]:
        try:
            value, _, _ = client.complete(system, noise_user_message(question, state, k), parse_chain(k),
                                          None, "noise_chain")
        except (CallFailed, BudgetExceeded) as exc:  # the cap stops the corpus like a bad reply: nothing written
            raise NoiseWriterError(f"question {question.id!r} (scope {question.scope!r}): no usable noise chain "
                                   f"from the endpoint: {exc}; nothing written") from None
        return value
    return write


def write_corpus(result: Injected, path: Path) -> None:
    """The noise corpus as the project's JSONL (typed gold edges as link records), to a new file only; each
    injected message and gold edge names its writer (`noise_writer`)."""
    if path.exists():
        raise FileExistsError(f"{path}: exists; a noise corpus is written to a new file, never over another")
    write_jsonl(result.data, path)
    lines = path.read_text(encoding="utf-8").splitlines()
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(_signed(line, result) + "\n" for line in lines)


def _signed(line: str, result: Injected) -> str:
    """One JSONL line, with `noise_writer` when it is an injected message or the gold edge to one."""
    record = json.loads(line)
    kind = record.get("kind", "message")
    key = (record.get("scope"), record.get("id") if kind == "message" else record.get("child_id"))
    if kind in ("message", "link") and key in result.injected:
        record[NOISE_WRITER] = result.writer_text
        return json.dumps(record, ensure_ascii=False)
    return line
