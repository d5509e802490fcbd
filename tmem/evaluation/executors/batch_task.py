"""One stage of one question as an executor task: what `python -m tmem run --executor ray` sends to a worker
(tmem.evaluation.batch.run stays the one writer of the records). The stage function is the library's own
(`tmem.pipeline.stages.STAGE_FUNCTIONS`), called exactly as the local runner calls it, with the results of the
question's earlier records."""
from __future__ import annotations

from dataclasses import dataclass, field

from tmem.pipeline.methods import Method
from tmem.pipeline.stages import STAGE_FUNCTIONS, Context, Earlier, StageOutput
from tmem.types import Question


@dataclass(frozen=True)
class StageTask:
    corpus: str
    scope: str
    stage: str
    method: Method
    question: Question
    earlier: Earlier = field(default_factory=Earlier)  # the results of the earlier stages


def run_stage_task(task: StageTask, env) -> StageOutput:
    ctx = Context(task.method, env.roles, env.store, gold=env.gold)
    return STAGE_FUNCTIONS[task.stage](task.question, env.scope, ctx, task.earlier)
