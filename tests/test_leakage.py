"""Gold answers, gold evidence and gold links are unreachable from the retrieval and answer code paths (paper
Sec. 3: "reference answers and evidence annotations are used only for evaluation")."""
import dataclasses
import re
from pathlib import Path

import pytest

from tmem.corpora.imports import import_corpus
from tmem.types import Question

TMEM = Path(__file__).resolve().parent.parent / "tmem"
FIXTURES = Path(__file__).parent / "fixtures"
GOLD_READ = re.compile(r"\bgold_(answers|evidence|links)\b|\.gold\(|\.gold_links\(|\.gold_edges\(")
ALLOWED = ("store/", "corpora/", "evaluation/", "demo/")  # the store, importers, evaluation, the generator
# Entry points outside those folders that read gold for *evaluation after the fact*; each needs its reason here
# (and is a candidate to move under tmem/evaluation/):
EVALUATION_ENTRY_POINTS = {
    "api/__init__.py": "stored_question returns a question's gold beside it; run_and_store hands it to run_question "
                       "only for the judge, after the answers exist (the CLI's ask and the app's Question page both go "
                       "through it)",
    "api/traces.py": "trace_results builds result rows of stored traces: failure attribution and evidence funnel after "
                     "the run",
    "api/explorer.py": "the app's door to the store: question_gold hands a page a stored question's gold for the judge "
                       "stage and for review after the run (Question, Failures, Compare, Judge audit)",
    "pipeline/stages.py": "only the judge stage calls the context's gold source, after the answer stage; no earlier "
                          "stage receives it (test_stages_before_the_judge_never_see_gold)",
    "commands/evaluate/links.py": "the `links` command checks that a corpus has gold edges before scoring "
                                  "structuring (tmem.evaluation.links) against them",
    "baselines/stage.py": "hands gold to a memory system only when the system says it uses gold (uses_gold: the two "
                          "oracle bounds alone), after the question; every other system is given none",
    "baselines/oracle.py": "the oracle bounds (oracle-evidence, oracle-forest) are gold by definition: the answer model"
                           " sees the gold evidence, or T-Mem's evidence linked by the gold edges; labelled oracle",
    "commands/corpus/noise_chains.py": "`noise-chains` reads a corpus's gold UPDATE chains to write a new corpus "
                                       "with revision noise injected after them (paper Exp-5); it runs no pipeline",
}
STAGES = tuple(f"pipeline/{m}.py" for m in ("retrieval", "discovery", "structuring", "compression", "linearize",
                                             "scope")) + ("text.py",)


def test_questions_carry_no_gold():
    assert [f.name for f in dataclasses.fields(Question)] == ["id", "scope", "text", "asking_user", "type"]


@pytest.mark.parametrize("fmt,path", [("locomo", FIXTURES / "locomo" / "mini.json"),
                                      ("evermembench", FIXTURES / "evermembench"),
                                      ("groupmembench", FIXTURES / "groupmembench")])
def test_store_questions_and_messages_have_no_gold(fmt, path, fresh_store):
    _, imported = import_corpus(fresh_store, fmt, path, corpus="c")
    answers = {g.answer for _, g in imported.data.golds if g.answer}
    for q in fresh_store.questions("c"):
        stem = q.text.split("\nOptions:")[0]  # multiple-choice options are part of the question, by design
        assert type(q) is Question and not any(a in stem for a in answers if len(a) > 12)
    columns = set(fresh_store.messages_frame("c").columns)
    assert not {c for c in columns if "gold" in c or "answer" in c or "evidence" in c}


def test_only_store_importers_and_evaluation_read_gold_tables():
    readers = sorted(str(p.relative_to(TMEM)) for p in TMEM.rglob("*.py") if GOLD_READ.search(p.read_text()))
    unexpected = [r for r in readers if not r.startswith(ALLOWED) and r not in EVALUATION_ENTRY_POINTS]
    assert not unexpected, f"modules reading gold tables outside store/corpora/evaluation: {unexpected}"
    assert sorted(set(EVALUATION_ENTRY_POINTS) - set(readers)) == [], "an entry point that no longer reads gold leaves"


def test_stage_modules_never_mention_gold():
    for name in STAGES:
        assert "gold" not in (TMEM / name).read_text().lower(), name


def test_pipeline_output_before_judging_does_not_depend_on_gold():
    """Run the curated demo question with the real gold, with a poisoned gold, and with none: everything up to
    and including the answers is identical; only the verdicts differ."""
    from tmem.config import variant_config
    from tmem.demo import CURATED_QUESTION, generate
    from tmem.models.offline import offline_roles
    from tmem.pipeline import run as pipeline  # an import error fails this test: a leakage check must never skip
    from tmem.pipeline.scope import Scope
    from tmem.types import Gold

    data = generate(7, 3000)
    scope = Scope("demo", CURATED_QUESTION[0], [m for m in data.messages if m.scope == CURATED_QUESTION[0]])
    question = next(q for q in data.questions if (q.scope, q.id) == CURATED_QUESTION)
    real = next(g for s, g in data.golds if g.question_id == question.id)
    poison = Gold(question.id, "ZZLEAK answer", ((scope.messages[0].id,),), "ZZLEAK superseded")
    traces = [pipeline.run_question(question, scope, variant_config("full"), offline_roles(), corpus="demo",
                                    gold=gold) for gold in (None, real, poison)]
    keep = ("anchors", "clusters", "windows", "selections", "evidence_ids", "decisions", "edges", "nodes", "spans",
            "context", "flat_context", "answers")
    views = [{k: getattr(t, k) for k in keep} for t in traces]
    assert views[0] == views[1] == views[2]
    assert "ZZLEAK" not in traces[2].context and not traces[0].verdicts and traces[1].verdicts


def test_stages_before_the_judge_never_see_gold(golden_scope):
    """Every stage before the judge runs with a gold source that fails when called; the judge then calls it."""
    from tmem.config import variant_config
    from tmem.demo.golden import QUESTION
    from tmem.models.offline import offline_roles
    from tmem.pipeline.methods import Method
    from tmem.pipeline.stages import STAGE_FUNCTIONS, Context, Earlier, plan

    calls = []

    def gold_source(question):
        calls.append(question.id)
        return None

    ctx = Context(Method("full", "", variant_config("full")), offline_roles(), gold=gold_source)
    earlier = Earlier()
    for name in plan(ctx.method):
        if name == "judge":
            assert calls == [], "a stage before the judge read the gold source"
        earlier = earlier.then(STAGE_FUNCTIONS[name](QUESTION, golden_scope, ctx, earlier))
    assert calls == [QUESTION.id]
