"""Each model role's prompt and response for one trace, as the Stages tab shows them (what a tracing tool shows per
call).

A trace keeps the answer context and each answer's prompt hash, not the prompt text: the answer and judge prompts
are rebuilt here from the paper's templates (App. I, J; tmem.prompts) with the stored question, context and gold
answer, and the rebuilt answer prompt is checked against the recorded hash (as the batch validators do), so a
prompt that does not rebuild is said to. The evidence-utility and relation roles make one call per message: their
replies are the trace's selections and parent decisions (label or relation, confidence, reason), listed as tables.
Pure functions.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tmem.prompts import answer_prompt, judge_prompt
from tmem.types import Gold, Trace


@dataclass(frozen=True)
class RoleCall:
    role: str  # "answer (forest)", "judge (flat)", ...
    backend: str
    system: str
    user: str
    response: str
    rebuilt: bool | None  # the rebuilt prompt's hash equals the recorded one (None: no hash recorded)


def role_calls(trace: Trace, gold: Gold | None) -> list[RoleCall]:
    """The answer role's call per presentation, then the judge's (when the gold has an answer)."""
    typed = (trace.config.get("structuring") or {}).get("typed", True)
    q = trace.question
    calls = []
    for a in trace.answers:
        passages = trace.context if a.presentation == "forest" else trace.flat_context
        prompt = answer_prompt(a.presentation, q.asking_user, q.text, passages, typed)
        calls.append(RoleCall(f"answer ({a.presentation})", a.backend, prompt.system, prompt.user,
                              a.text + (f"\n\n(reason: {a.reason})" if a.reason else ""),
                              prompt.hash == a.prompt_hash if a.prompt_hash else None))
    for v in trace.verdicts:
        answer = trace.answer(v.presentation)
        if answer is None or gold is None or not gold.answer:
            continue
        prompt = judge_prompt(q.text, gold.answer, answer.text)
        calls.append(RoleCall(f"judge ({v.presentation})", v.backend, prompt.system, prompt.user,
                              v.raw or ("correct" if v.correct else "incorrect"), None))
    return calls


def selection_replies(trace: Trace) -> pd.DataFrame:
    """The evidence-utility role's reply per window candidate it judged."""
    return pd.DataFrame([{"message": s.message_id, "window": s.window_id, "label": s.label,
                          "score": round(s.score, 3), "reason": s.reason} for s in trace.selections],
                        columns=["message", "window", "label", "score", "reason"])


def relation_replies(trace: Trace) -> pd.DataFrame:
    """The relation role's decision per message: the parent and relation it chose, its confidence and reason."""
    return pd.DataFrame([{"message": d.child_id, "parent": d.parent_id or "—", "relation": d.relation,
                          "confidence": round(d.confidence, 3), "candidates": len(d.candidate_ids),
                          "reason": d.note or "—"} for d in trace.decisions],
                        columns=["message", "parent", "relation", "confidence", "candidates", "reason"])
