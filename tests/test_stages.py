"""The stage functions (tmem.pipeline.stages): `run_question` is them in a row under the variant's method, records
round-trip into the same trace, plans per method; baselines and the App. E.2 controls behave as specified."""
import dataclasses

import numpy as np
import pytest

from tmem.config import VARIANTS
from tmem.pipeline.baselines import conversation_neighbours, embedding_anchors, expanded_text, rerank
from tmem.pipeline.methods import get_method, methods
from tmem.pipeline.stages import Context, Earlier, assemble, plan, run_all


def timeless(trace):
    return dataclasses.replace(trace, stages=tuple(dataclasses.replace(s, seconds=0.0) for s in trace.stages))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_stage_wise_trace_equals_run_question(variant, golden_scope, offline):
    from tmem.demo.golden import GOLD, QUESTION
    from tmem.pipeline.run import run_question

    method = get_method(variant)
    expected = run_question(QUESTION, golden_scope, method.config, offline, corpus="g", variant=variant, gold=GOLD)
    got = run_all(QUESTION, golden_scope, Context(method, offline, gold=lambda q: GOLD), "g")
    assert timeless(got) == timeless(expected)


def test_records_round_trip_into_the_same_trace(golden_scope, offline):
    from tmem.demo.golden import GOLD, QUESTION
    from tmem.pipeline.stages import STAGE_FUNCTIONS

    ctx = Context(get_method("full"), offline, gold=lambda q: GOLD)
    earlier, outputs = Earlier(), {}
    for name in plan(ctx.method):
        out = STAGE_FUNCTIONS[name](QUESTION, golden_scope, ctx, earlier)
        earlier = earlier.then(out)
        outputs[name] = out
    direct = assemble(QUESTION, ctx, "g", outputs)
    via_json = assemble(QUESTION, ctx, "g", {k: v.to_record() for k, v in outputs.items()})
    assert via_json == direct


@pytest.mark.parametrize("variant", ["full", "no-compression", "flat"])
def test_each_stage_returns_its_typed_result(variant, golden_scope, offline):
    """Stages speak in types: each returns its own result record, whose non-empty fields are Trace fields; a
    branch that does not produce a field (truncation: no spans) leaves it out rather than overwriting it."""
    from tmem.demo.golden import GOLD, QUESTION
    from tmem.pipeline.stages import STAGE_FUNCTIONS, Answered, Compressed, Discovered, Judged, Seeds, Structured
    from tmem.types import Trace

    kinds = {"seed_retrieval": Seeds, "discovery": Discovered, "structuring": Structured, "compression": Compressed,
             "answer": Answered, "judge": Judged}
    ctx = Context(get_method(variant), offline, gold=lambda q: GOLD)
    fields: dict = {}
    earlier = Earlier()
    trace_fields = {f.name for f in dataclasses.fields(Trace)}
    for name in plan(ctx.method):
        out = STAGE_FUNCTIONS[name](QUESTION, golden_scope, ctx, earlier)
        assert type(out.result) is kinds[name] and set(out.fields) <= trace_fields
        fields.update(out.fields)
        earlier = earlier.then(out)
    assert earlier.trace_fields() == fields  # the one fold merges as the stages' fields in a row do
    assert ("spans" in fields) == (variant == "full")  # truncation and the flat list produce no spans
    assert ("context" in fields) and fields["answers"]


def test_plans():
    assert plan(get_method("full")) == ("seed_retrieval", "discovery", "structuring", "compression", "answer",
                                        "judge")
    assert plan(get_method("flat")) == plan(get_method("bm25")) == plan(get_method("embedding")) == \
        ("seed_retrieval", "answer", "judge")
    assert plan(get_method("bm25-forest")) == ("seed_retrieval", "structuring", "compression", "answer", "judge")
    assert "discovery" in plan(get_method("global-control")) and "discovery" in plan(get_method("tmem-reranked"))


def test_method_hashes():
    from tmem.config import config_hash, variant_config

    assert get_method("full").hash == config_hash(variant_config("full"))  # the app finds these traces
    hashes = {m.hash for m in methods().values()}
    assert get_method("bm25").hash == get_method("flat").hash  # the same configuration under two names
    assert len(hashes) == len(methods()) - 1
    assert get_method("full", k=12).config.retrieval.k == 12 and get_method("tmem-reranked", k=12).final_k == 12
    with pytest.raises(KeyError, match="unknown variant"):
        get_method("nope")


def test_reranked_variants_return_exactly_k(golden_scope, offline):
    from tmem.demo.golden import GOLD, QUESTION

    for name in ("tmem-reranked", "global-control"):
        method = get_method(name, k=5)
        trace = run_all(QUESTION, golden_scope, Context(method, offline, gold=lambda q: GOLD), "g")
        assert len(trace.evidence_ids) == 5 and trace.stage("discovery").counts["reranked_to"] == 5


def test_global_control_searches_the_whole_topic_with_n_groups(golden_scope, offline):
    from tmem.demo.golden import QUESTION

    trace = run_all(QUESTION, golden_scope, Context(get_method("global-control"), offline), "g")
    accepted = [c for c in trace.clusters if c.accepted]
    assert len(trace.windows) == len(accepted)  # one candidate group per accepted temporal cluster
    topic_size = sum(m.topic == accepted[0].topic for m in golden_scope.messages)
    assert trace.windows[0].n_messages == topic_size  # the whole topic, not a temporal window


def test_embedding_anchors_are_the_top_cosines(golden_scope):
    vectors = np.eye(len(golden_scope))[:, :8].astype(np.float32)
    query = np.zeros(8, dtype=np.float32)
    query[[3, 5]] = [1.0, 0.5]
    anchors = embedding_anchors(None, golden_scope, vectors, query, 2)
    assert [a.message_id for a in anchors] == [golden_scope.messages[3].id, golden_scope.messages[5].id]
    assert [a.rank for a in anchors] == [1, 2] and anchors[0].score == 1.0


def test_expanded_text_carries_the_bm25_metadata(golden_scope):
    m = golden_scope.by_id["m04"]
    assert expanded_text(m) == ("launch / #release / Planning - User_4 (Legal Counsel): " + m.text)


def test_conversation_neighbours_stay_in_the_topic(golden_scope):
    p = golden_scope.position["m04"]
    around = [(d, golden_scope.messages[q].id) for d, q in conversation_neighbours(golden_scope, p, 2)]
    # #release/launch only, in time order; m05 replies to m04, so it is also a reply neighbour
    assert around == [(1, "m03"), (1, "m05"), (2, "m02"), (2, "m09"), (1, "m05")]
    back = [golden_scope.messages[q].id for _, q in conversation_neighbours(golden_scope, golden_scope.position["m05"],
                                                                           1)]
    assert back == ["m04", "m09", "m04"]


def test_rerank_is_deterministic_and_bounded(golden_scope, offline):
    from tmem.demo.golden import QUESTION

    vectors = golden_scope.vectors(offline.embedder)
    query = offline.embedder.embed([QUESTION.text], kind="query")[0]
    ids = ["m01", "m02", "m03", "m04", "m06", "m06"]
    top = rerank(QUESTION, ids, golden_scope, vectors, query, 3)
    assert len(top) == 3 and len(set(top)) == 3 and set(top) <= set(ids)
    assert top == rerank(QUESTION, ids, golden_scope, vectors, query, 3)
    assert rerank(QUESTION, [], golden_scope, vectors, query, 3) == ()
    assert "m06" not in top  # lunch chatter is the least relevant


def test_an_executor_task_runs_a_stage_as_the_local_runner_does(golden_scope, offline):
    """The task a Ray worker runs (tmem.evaluation.executors.batch_task) carries the earlier results and gives the
    same stage outputs, hence the same trace, as `run_all`."""
    from types import SimpleNamespace

    from tmem.demo.golden import GOLD, QUESTION
    from tmem.evaluation.executors.batch_task import StageTask, run_stage_task

    method = get_method("full")
    env = SimpleNamespace(roles=offline, store=None, scope=golden_scope, gold=lambda q: GOLD)
    earlier, outputs = Earlier(), {}
    for name in plan(method):
        outputs[name] = out = run_stage_task(StageTask("g", "golden", name, method, QUESTION, earlier), env)
        earlier = earlier.then(out)
    ctx = Context(method, offline, gold=lambda q: GOLD)
    assert timeless(assemble(QUESTION, ctx, "g", outputs)) == timeless(run_all(QUESTION, golden_scope, ctx, "g"))
