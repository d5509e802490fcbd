"""Re-scoring a run decodes only the fields of each stored trace it reads (gold_versions.RESCORE_FIELDS) and builds a
scope's gold UPDATE maps once (tmem.analysis.chains.UpdateEdges), for the Failures page's first visit (issue 42,
item 9). Neither may change a result: on a batch of the golden corpus and of the demo corpus, under the original
gold and under a gold version, the re-scored frame, what `on_trace` sees and the report's rows and what-if on k are
those of fully decoded traces."""
from __future__ import annotations

import json
from datetime import datetime

import pandas as pd
import pytest

from tmem.analysis import stale
from tmem.analysis.chains import UpdateEdges, gold_chain
from tmem.cli import main as cli
from tmem.evaluation import gold_versions
from tmem.evaluation.batch.jobs import MAIN_VARIANTS
from tmem.evaluation.gold_versions import ORIGINAL, read_corrections, rescore, save_version
from tmem.evaluation.report import build
from tmem.store import Store
from tmem.types import UPDATE, Gold, Trace


def _batch(db, corpus: str, out, limit: int | None) -> str:
    """The demo batch's variants (MAIN_VARIANTS) run offline over the corpus; -> the run id."""
    args = ["run", "--db", str(db), "--corpus", corpus, "--variants", ",".join(MAIN_VARIANTS), "--out", str(out),
            "--offline", "--quiet"]
    assert cli(args + (["--limit", str(limit)] if limit else [])) == 0
    return json.loads((out / "run.json").read_text())["run_id"]


def _version(store, corpus: str, run_id: str, path) -> int:
    """Gold version "v1": a wrong answer's gold answer replaced by the stand-in's own answer (its verdict changes),
    and the evidence of the question with the most units cut to its first unit, or, with one unit, joined by a
    second (one of its anchors; its recall and chain change); -> questions corrected."""
    rows = store.run_results(corpus, run_id).to_dict("records")

    def trace_of(row):
        return store.load_trace(corpus, row["scope"], row["question_id"], row["variant"], row["config_hash"],
                                row["backend"])

    def gold_of(row):
        return store.gold(corpus, row["scope"], row["question_id"])

    wrong = next(r for r in rows if r["correct"] is False or r["correct"] == 0)
    cut = max((r for r in rows if gold_of(r) is not None), key=lambda r: len(gold_of(r).evidence))
    units = [list(u) for u in gold_of(cut).evidence]
    extra = next(a.message_id for a in trace_of(cut).anchors if a.message_id not in gold_of(cut).evidence_ids)
    lines: dict[tuple, dict] = {}
    for row, fix in ((wrong, {"answer": trace_of(wrong).answers[0].text}),
                     (cut, {"evidence": units[:1] if len(units) > 1 else [*units, [extra]]})):
        key = (row["scope"], row["question_id"])
        lines.setdefault(key, {"scope": key[0], "question": key[1], "reason": "test"}).update(fix)
    path.write_text("\n".join(json.dumps(line) for line in lines.values()) + "\n")
    save_version(store, corpus, "v1", read_corrections(path, store, corpus))
    return len(lines)


def _scored(store, corpus: str, run_id: str) -> dict:
    """Per gold version: the re-scored frame (both judge policies), what on_trace saw, and the report's rows and
    what-if on k."""
    out = {}
    for version in (ORIGINAL, "v1"):
        seen: list[tuple] = []

        def keep(row, trace, gold, seen=seen):  # what the Failures page reads in its on_trace (pages/_verdict_rows.py)
            seen.append((row["variant"], row["question_id"], trace.answers[0].text if trace.answers else None,
                         gold.answer if gold else None, len(trace.decisions)))
        frames = [rescore(store, corpus, run_id, version, judge, on_trace=keep) for judge in ("keep", "offline")]
        site = build(store, corpus, run_id, version=version)
        out[version] = (frames, seen, site.rows, site.whatif)
    return out


@pytest.mark.integration
@pytest.mark.parametrize("corpus, limit", [("golden", None), ("demo", 16)])
def test_rescoring_partial_traces_gives_what_full_traces_give(app_db, tmp_path, monkeypatch, corpus, limit):
    run_id = _batch(app_db, corpus, tmp_path / "run", limit)
    store = Store(app_db)
    try:
        corrected = _version(store, corpus, run_id, tmp_path / "fix.jsonl")
        partial = _scored(store, corpus, run_id)
        monkeypatch.setattr(gold_versions, "read_trace", Trace.from_json)  # every field decoded, as before
        full = _scored(store, corpus, run_id)
    finally:
        store.close()
    for version in (ORIGINAL, "v1"):
        (frames, seen, rows, whatif), (full_frames, full_seen, full_rows, full_whatif) = partial[version], full[version]
        for mine, theirs in zip(frames, full_frames):
            pd.testing.assert_frame_equal(mine, theirs)
        pd.testing.assert_frame_equal(rows, full_rows)
        assert whatif == full_whatif and whatif, "the what-if on k counted gold units"
        assert [s[:4] for s in seen] == [s[:4] for s in full_seen] and len(seen) == 2 * len(frames[0])
        # not vacuous: the partial traces left the parent decisions out, the full ones had them
        assert all(s[4] == 0 for s in seen) and any(s[4] for s in full_seen)
    frame = partial["v1"][0][0]  # the comparison covers every path: corrected gold, failures, chains, stale answers
    assert frame["corrected"].sum() == corrected * len(MAIN_VARIANTS) and frame["verdict_changed"].any()
    assert frame["failure"].notna().any() and frame["chain_complete"].notna().any()
    if corpus == "demo":
        assert frame["stale"].any() and frame["rollback"].any()


def test_one_update_map_per_scope_gives_each_question_the_chain_of_its_own_edges():
    """A hand-built scope: a -> b -> c UPDATE (c replaces b replaces a), d -> e an EXTENSION. Shared by every
    question, the maps give what a fresh list gives, and reading them does not change them."""
    edges = [("a", None, "ROOT"), ("b", "a", UPDATE), ("c", "b", UPDATE), ("d", None, "ROOT"), ("e", "d", "EXTENSION")]
    shared = UpdateEdges(edges)
    assert shared.children == {"a": {"b"}, "b": {"c"}} and shared.parents == {"b": {"a"}, "c": {"b"}}
    golds = {"ends": Gold("q1", "c", (("a",), ("c",))),  # the states at both ends: b is between them
             "adjacent": Gold("q2", "b", (("b",), ("c",))),
             "extension": Gold("q3", "e", (("d",), ("e",))),  # no UPDATE between them, no superseded state
             "superseded": Gold("q4", "e", (("d",), ("e",)), superseded="d")}
    expected = {"ends": (("a",), ("c",), ("b",)), "adjacent": (("b",), ("c",)), "extension": None,
                "superseded": (("d",), ("e",))}
    for _ in range(2):
        assert {k: gold_chain(g, shared) for k, g in golds.items()} == expected
        assert {k: gold_chain(g, list(edges)) for k, g in golds.items()} == expected
    times = {m: datetime(2024, 1, day) for day, m in enumerate("abc", start=1)}
    found = stale.revision_without_rollback(_holding("a"), golds["ends"], times, shared)
    assert found.category == stale.ROLLBACK_MISSED and found.messages == ("a", "c")
    assert stale.revision_without_rollback(_holding("a", "c"), golds["ends"], times, shared) is None
    assert shared.children == {"a": {"b"}, "b": {"c"}} and shared.parents == {"b": {"a"}, "c": {"b"}}


def _holding(*ids: str) -> Trace:
    """A flat trace whose answer context holds exactly `ids`."""
    from tmem.demo.golden import QUESTION

    return Trace(QUESTION, "flat", "h", "golden", evidence_ids=ids)
