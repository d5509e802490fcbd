"""The pipeline for one question (paper Fig. 1): seed retrieval -> temporal evidence discovery -> temporal memory
structuring -> compression -> linearization and answer (forest and, for comparison, flat over the same evidence)
-> judge (only when a gold answer is given, which never reaches any earlier stage). Every stage records its timing,
counts, token usage, backend, and errors with the fallback taken. A batch run (tmem.evaluation.batch.run) calls the
same stage functions (tmem.pipeline.stages), stage-wise over many questions.
"""
from __future__ import annotations

from collections.abc import Callable

from tmem.config import TMemConfig
from tmem.models.base import Roles
from tmem.pipeline.methods import method_for
from tmem.pipeline.scope import Scope
from tmem.pipeline.stages import Context, run_all
from tmem.types import Gold, Question, Trace

Progress = Callable[[str, float], None]  # (stage name, fraction done)


def run_question(question: Question, scope: Scope, config: TMemConfig, roles: Roles, *, corpus: str,
                 variant: str = "custom", gold: Gold | None = None, progress: Progress | None = None) -> Trace:
    if question.scope != scope.name:
        raise ValueError(f"question {question.id!r} belongs to scope {question.scope!r}, not {scope.name!r}")
    context = Context(method_for(config, variant), roles, gold=(lambda q: gold) if gold is not None else None,
                      progress=progress)
    return run_all(question, scope, context, corpus)
