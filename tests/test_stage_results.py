"""What the stages hand each other (tmem.pipeline.stage_results): `Earlier` reads the latest result of each kind, folds
the results into Trace fields once (a later stage's over an earlier one's, None left out), and reads them back
from their record form."""
import pytest

from tmem.pipeline.stage_results import (
    Answered,
    Compressed,
    Discovered,
    Earlier,
    Judged,
    Seeds,
    StageOutput,
    Structured,
    decode_result,
)
from tmem.types import Anchor, Answer, Edge, StageTrace, Usage

SEEDS = Seeds((Anchor("m1", 2.0, 1), Anchor("m2", 1.0, 2)), ("m1", "m2"), "q")
FOUND = Discovered((), (), (), ("m1", "m2", "m7"))
EDGE = Edge("m1", "m7", "UPDATE", 0.9)
FOREST = Structured((), (EDGE,), ())
SQUEEZED = Compressed(120, 80, "forest context")
ANSWERED = Answered("flat context", (Answer("forest", "Friday", "offline", True, "h", 80),))


def output(result) -> StageOutput:
    return StageOutput(result, StageTrace("x", 0.0, {}, Usage(source="offline"), "offline", True, ()))


def test_evidence_is_discoverys_when_it_ran_else_the_seeds():
    assert Earlier.of(SEEDS).evidence_ids == ("m1", "m2")
    assert Earlier.of(SEEDS, FOUND).evidence_ids == ("m1", "m2", "m7")
    assert Earlier.of(SEEDS).seeds.anchors[1].message_id == "m2"


def test_what_a_stage_has_not_produced_reads_empty():
    before = Earlier.of(SEEDS)
    assert (before.nodes, before.edges, before.spans, before.context, before.answers) == ((), (), (), "", ())
    assert Earlier.of(SEEDS, SQUEEZED).spans == ()  # truncation only: no spans
    with pytest.raises(ValueError, match="no seed retrieval result"):
        _ = Earlier().evidence_ids


def test_then_accepts_outputs_and_results_and_leaves_the_earlier_value_alone():
    first = Earlier().then(output(SEEDS))
    second = first.then(FOUND)
    assert first.results == (SEEDS,) and second.results == (SEEDS, FOUND)
    assert second.edges == () and second.then(FOREST).edges == (EDGE,)


def test_the_fold_takes_the_later_stages_field_and_skips_none():
    fields = Earlier.of(SEEDS, FOUND, FOREST, SQUEEZED, ANSWERED, Judged(())).trace_fields()
    assert fields["evidence_ids"] == ("m1", "m2", "m7")  # discovery's over the seeds'
    assert fields["context"] == "forest context"  # the answer stage's context is None after compression
    assert fields["tokens_after_compression"] == 80 and fields["flat_context"] == "flat context"
    assert "spans" not in fields and "budget_met" not in fields  # None: not produced, not overwritten
    assert fields["verdicts"] == () and fields["query"] == "q"


def test_records_read_back_into_the_same_results():
    records = [{"stage": stage, "outputs": output(result).to_record()}
               for stage, result in (("seed_retrieval", SEEDS), ("discovery", FOUND), ("structuring", FOREST),
                                     ("compression", SQUEEZED), ("answer", ANSWERED))]
    back = Earlier.from_records(records)
    assert back == Earlier.of(SEEDS, FOUND, FOREST, SQUEEZED, ANSWERED)
    assert decode_result("judge", {"verdicts": []}) == Judged(())
