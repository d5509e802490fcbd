"""The paper's prompts (App. I, J, K), kept verbatim as data files beside this module.

Placeholders are written as in the paper (`<question>`) and filled with plain string replacement, so braces or
angle brackets inside message text are never interpreted. Message text is inserted inside explicit
BEGIN/END delimiters by the serializers in `tmem.pipeline.linearize`.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

NAMES = ("answer_flat_system", "answer_forest_system", "answer_user", "judge_system", "judge_user",
         "evidence_utility", "relation")
# Prompts of this project, not the paper's: the untyped-forest control (App. E.3) gives no prompt, and the forest
# prompt of App. I explains UPDATE/EXPAND, which an untyped forest must not (it would name what was removed).
# noise_chain_system: the injected revision-noise chains of Exp-5 (the paper gives no prompt for writing them).
OWN_NAMES = ("answer_untyped_system", "noise_chain_system")


@cache
def prompt_text(name: str) -> str:
    if name not in NAMES + OWN_NAMES:
        raise KeyError(f"unknown prompt {name!r}")
    return resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8").rstrip("\n")


def prompt_hash(name: str) -> str:
    return text_hash(prompt_text(name))


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def fill(template: str, **values: str) -> str:
    """Replace `<name>` placeholders in one pass over the template (values are never re-scanned)."""
    out, i = [], 0
    while i < len(template):
        j = template.find("<", i)
        if j < 0:
            out.append(template[i:])
            break
        k = template.find(">", j)
        key = template[j + 1:k] if k > j else ""
        if key in values:
            out += [template[i:j], values[key]]
            i = k + 1
        else:
            out.append(template[i:j + 1])
            i = j + 1
    return "".join(out)


@dataclass(frozen=True)
class Prompt:
    """A system + user prompt pair and the hash that goes into run records."""

    name: str
    system: str
    user: str

    @property
    def hash(self) -> str:
        return text_hash(self.system + "\n\n" + self.user)


def answer_prompt(presentation: str, asking_user: str | None, question: str, passages: str,
                  typed: bool = True) -> Prompt:
    """`typed` False: a forest whose edges are all RELATED gets the untyped wording (App. E.3)."""
    system = prompt_text(("answer_forest_system" if typed else "answer_untyped_system") if presentation == "forest"
                         else "answer_flat_system")
    user = fill(prompt_text("answer_user"), asking_user_id=asking_user or "unknown", question=question,
                serialized_retrieved_messages=passages)
    return Prompt(f"answer_{presentation}", system, user)


def judge_prompt(question: str, gold_answer: str, agent_answer: str) -> Prompt:
    user = fill(prompt_text("judge_user"), question=question, gold_answer=gold_answer, agent_answer=agent_answer)
    return Prompt("judge", prompt_text("judge_system"), user)
