"""Gold corrections as named versions, and stored runs re-scored under any version without re-running the pipeline.

A corrections file is JSON Lines, one corrected question per line:
  {"scope": "conv-26", "question": "conv-26_q2", "answer": "...", "evidence": [["D1:3"]], "reason": "..."}
`answer` and/or `evidence` (a list of units, each a list of acceptable message ids, as in the jsonl format) say
what changes; `reason` (required) says why, in the reviewer's words. Blank lines and lines starting with "//" are
skipped. Every line is checked against the corpus: the question must exist in its scope and every evidence id must
be a message of that scope; a bad line stops the load with its line number and field, and nothing is stored.
The version "original" is the imported gold; a named version is the original with its corrections applied.
Under "original" a run's stored verdicts are kept as they are.

Re-scoring reads each stored trace of a run and recomputes under the version's gold, with no model call:
key-evidence recall (units recovered in R'(q)), the evidence verdict (context after compression holds every
unit), the failure attribution, stale answers and revisions without rollback. The answers are judged again only
by the offline lexical judge, and never mixed with another judge:
- stored verdicts from the offline judge: every answer is re-judged by today's offline judge (so an uncorrected
  question's verdict changes only if the judge's rules changed since the run; the result counts them);
- stored verdicts from an LLM judge, `judge="keep"` (default): uncorrected questions keep the LLM's verdict,
  a question whose gold answer changed gets no verdict (None: it needs the LLM judge again) and is counted;
  `judge="offline"`: every answer is re-judged by the offline judge, and the rows say so.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from tmem import limits
from tmem.analysis.funnel import attribute_failure
from tmem.corpora.common import expect, parse_json, read_text
from tmem.evaluation.metrics import recall_eligible, units_recovered
from tmem.evaluation.review import GoldContext
from tmem.models.offline import OfflineJudge
from tmem.types import CorpusError, Gold, Trace, Verdict

ORIGINAL = "original"
JUDGE_MODES = ("keep", "offline")
# The fields of a stored trace re-scoring reads: the answers and verdicts (rejudge), the evidence funnel and the
# failure attribution (anchors, windows, evidence_ids, nodes, edges, spans, cuts -- or the contexts they are read off
# when a trace predates them --, stages, config), the stale checks and the full variant's reference forest (nodes,
# edges), and report's what-if on k through `on_trace` (anchors, evidence_ids, stages, config). The others (the
# parent decisions, clusters, selections, memories, ...) stay at their defaults: decoding every field of the demo
# batch's 192 traces was over half of the Failures page's first visit. A test compares the frames of partial and
# full traces (tests/test_rescore_partial.py).
RESCORE_FIELDS = ("question", "variant", "config_hash", "corpus", "anchors", "windows", "evidence_ids", "nodes",
                  "edges", "spans", "cuts", "context", "flat_context", "answers", "verdicts", "stages", "config")


@dataclass(frozen=True)
class Correction:
    scope: str
    question_id: str
    answer: str | None
    evidence: tuple[tuple[str, ...], ...] | None
    reason: str

    def apply(self, gold: Gold | None) -> Gold:
        gold = gold or Gold(self.question_id)
        return replace(gold, answer=gold.answer if self.answer is None else self.answer,
                       evidence=gold.evidence if self.evidence is None else self.evidence)


def read_corrections(path: str | Path, store, corpus: str) -> list[Correction]:
    """Parse and check a corrections file against the corpus (module docstring); CorpusError names the line."""
    path = Path(path)
    questions = {(q.scope, q.id) for q in store.questions(corpus)}
    out, seen = [], set()
    for number, line in enumerate(read_text(path).split("\n"), start=1):  # size-checked, UTF-8 or one error
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        at = f"{path}:{number}"
        fix = _correction(expect(parse_json(line, str(path), number, unique_keys=True), dict, at, "line"), at)
        if (fix.scope, fix.question_id) not in questions:
            raise CorpusError(f"{at}: field 'question': no question {fix.question_id!r} in scope {fix.scope!r} of "
                              f"corpus {corpus!r}")
        if (fix.scope, fix.question_id) in seen:
            raise CorpusError(f"{at}: field 'question': {fix.question_id!r} is corrected twice")
        seen.add((fix.scope, fix.question_id))
        ids = {m for unit in fix.evidence or () for m in unit}
        known = {m.id for m in store.messages_by_ids(corpus, fix.scope, ids)} if ids else set()
        if ids - known:
            raise CorpusError(f"{at}: field 'evidence': {', '.join(sorted(ids - known)[:5])} not a message of scope "
                              f"{fix.scope!r}")
        out.append(fix)
    return out


def _correction(item: dict, at: str) -> Correction:
    """One line's correction, bounded as an import bounds a question (tmem.limits): the answer and the reason at
    most limits.message_chars() characters (a 1 MB answer made every re-scoring 5x slower), names and ids at most
    MAX_NAME_CHARS, at most MAX_GOLD_UNITS units of at most MAX_GOLD_UNITS ids."""
    def text(field: str, required: bool) -> str | None:
        value = item.get(field)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise CorpusError(f"{at}: field {field!r} must be a non-empty string")
        limit = limits.message_chars() if field in ("answer", "reason") else limits.MAX_NAME_CHARS
        if len(value) > limit:
            raise CorpusError(f"{at}: field {field!r} is {len(value):,} characters, over the limit of {limit:,}; "
                              "refused")
        return value.strip()

    evidence = item.get("evidence")
    if evidence is not None:
        if not isinstance(evidence, list) or not all(isinstance(u, list) and u and all(
                isinstance(m, str) and m for m in u) for u in evidence):
            raise CorpusError(f"{at}: field 'evidence' must be a list of units, each a non-empty list of ids")
        most = max([len(evidence), *map(len, evidence)])
        if most > limits.MAX_GOLD_UNITS or any(len(m) > limits.MAX_NAME_CHARS for u in evidence for m in u):
            raise CorpusError(f"{at}: field 'evidence': at most {limits.MAX_GOLD_UNITS:,} units of at most "
                              f"{limits.MAX_GOLD_UNITS:,} ids of at most {limits.MAX_NAME_CHARS:,} characters "
                              f"(it has {len(evidence):,} units); refused")
        evidence = tuple(tuple(u) for u in evidence)
    fix = Correction(text("scope", True), text("question", True), text("answer", False), evidence,
                     text("reason", True))
    if fix.answer is None and fix.evidence is None:
        raise CorpusError(f"{at}: a correction needs 'answer' and/or 'evidence'")
    return fix


def save_version(store, corpus: str, name: str, corrections: list[Correction], source: str = "") -> None:
    if not name or name == ORIGINAL or len(name) > 80:
        raise ValueError(f"a gold version needs a name other than {ORIGINAL!r} (at most 80 characters)")
    store.replace_gold_version(corpus, name, [{"scope": c.scope, "question_id": c.question_id, "answer": c.answer,
                                               "evidence": None if c.evidence is None else [list(u) for u in
                                                                                             c.evidence],
                                               "reason": c.reason} for c in corrections], source)


def load_version(store, corpus: str, name: str) -> dict[tuple[str, str], Correction]:
    """{(scope, question id): Correction} of a stored version ({} for "original"); KeyError for an unknown name."""
    if name == ORIGINAL:
        return {}
    rows = store.gold_corrections(corpus, name)
    if not rows:
        known = [v for v, *_ in store.gold_versions(corpus)]
        raise KeyError(f"corpus {corpus!r} has no gold version {name!r} (versions: {', '.join([ORIGINAL, *known])})")
    return {(r["scope"], r["question_id"]): Correction(
        r["scope"], r["question_id"], r["answer"],
        None if r["evidence"] is None else tuple(tuple(u) for u in r["evidence"]), r["reason"]) for r in rows}


def gold_function(store, corpus: str, corrections: Mapping[tuple[str, str], Correction]):
    """(scope, question id) -> Gold under the version, each scope's gold read at once (Store.scope_golds; a
    question at a time was two queries per row of a run, for the report and the pages alike)."""
    golds: dict[str, dict] = {}

    def stored(scope: str, question_id: str) -> Gold | None:
        if scope not in golds:
            golds[scope] = store.scope_golds(corpus, scope)
        return golds[scope].get(question_id)
    return _corrected(stored, corrections)


def _corrected(gold_of, corrections: Mapping[tuple[str, str], Correction]):
    def corrected(scope: str, question_id: str) -> Gold | None:
        gold = gold_of(scope, question_id)
        fix = corrections.get((scope, question_id))
        return fix.apply(gold) if fix else gold
    return corrected


def rejudge(trace: Trace, gold: Gold | None, judge: str, answer_changed: bool) -> tuple[Trace, str]:
    """The trace with its verdicts under `gold` and the judge policy (module docstring); -> (trace, judge label)."""
    if not trace.verdicts:
        return trace, "none"
    if judge == "stored":  # the original gold: the verdicts as the run stored them
        return trace, trace.verdicts[0].backend
    llm = any(not v.offline for v in trace.verdicts)
    if llm and judge == "keep":
        if not answer_changed:
            return trace, trace.verdicts[0].backend
        return replace(trace, verdicts=()), "none: the gold answer changed, the LLM judge must judge again"
    offline = OfflineJudge()
    verdicts = []
    for v in trace.verdicts:
        answer = trace.answer(v.presentation)
        if gold is None or not gold.answer or answer is None:
            verdicts.append(v)
            continue
        result = offline.judge(trace.question, gold.answer, answer.text, None)
        verdicts.append(Verdict(v.presentation, result.correct, result.raw, offline.backend, True))
    return replace(trace, verdicts=tuple(verdicts)), offline.backend + (" (re-judged, was an LLM)" if llm else "")


def rescore(store, corpus: str, run_id: str, version: str, judge: str = "keep", on_trace=None) -> pd.DataFrame:
    """The run's result rows re-scored under gold `version` (module docstring; under "original" the stored
    verdicts are kept and only the review columns are added), with the review columns, the
    judge that decided each row (`judge`), whether the row's gold was corrected (`corrected`), whether its
    verdict changed (`verdict_changed`) and whether its primary answer came from an offline stand-in
    (`answer_offline`). `on_trace(row, trace, gold)` sees each stored trace as it is read (one in memory at a
    time), for callers that need more from it: the trace holds RESCORE_FIELDS only (read_trace)."""
    if judge not in JUDGE_MODES:
        raise ValueError(f"judge must be one of {', '.join(JUDGE_MODES)}")
    rows = store.run_results(corpus, run_id)
    if not len(rows):
        raise KeyError(f"no stored run {run_id!r} in corpus {corpus!r}")
    fixes = load_version(store, corpus, version)
    ctx = GoldContext(store, corpus, run_id=run_id)  # the run's full-variant forests are the stale references
    if fixes:
        ctx.gold_of = _corrected(ctx.stored_gold, fixes)
    out = []
    for scope, part in rows.groupby("scope", sort=False):  # one read of a scope's traces, gold and messages
        stored = store.run_trace_json(corpus, run_id, scope)
        keyed = [(row, stored.get((row["question_id"], row["variant"], row["config_hash"], row["backend"])))
                 for row in part.to_dict("records")]
        traces = [(row, read_trace(text) if text else None) for row, text in keyed]
        ctx.prefetch(scope, [t for _, t in traces if t is not None])
        ctx.use_forests([t for _, t in traces], "same run")
        for row, trace in traces:
            key = (row["scope"], row["question_id"])
            if on_trace is not None and trace is not None:
                on_trace(row, trace, ctx.gold_of(*key))
            out.append(_rescored(row, trace, ctx, fixes.get(key), judge if fixes else "stored"))
    frame = pd.DataFrame(out)
    frame["gold_version"] = version
    return frame


def read_trace(text: str) -> Trace:
    """A stored trace with RESCORE_FIELDS decoded and every other field at its default (empty): for re-scoring,
    never for a view that shows or stores the trace."""
    return Trace.from_json(text, RESCORE_FIELDS)


def _rescored(row: dict, trace: Trace | None, ctx: GoldContext, fix: Correction | None, judge: str) -> dict:
    new = {**row, "corrected": fix is not None, "judge": None, "verdict_changed": False, "answer_offline": None}
    if trace is None:
        return {**new, **ctx.review(None, row["scope"], row["question_id"])}
    gold = ctx.gold_of(row["scope"], row["question_id"])
    trace, new["judge"] = rejudge(trace, gold, judge, bool(fix and fix.answer is not None))
    primary = trace.answers[0] if trace.answers else None
    verdict = trace.verdict(primary.presentation) if primary else None
    flat = trace.verdict("flat") if primary and primary.presentation != "flat" else None
    new["answer_offline"] = primary.offline if primary else None
    new.update(correct=verdict.correct if verdict else None, correct_flat=flat.correct if flat else None,
               units=None, units_recovered=None, failure=None, failure_detail=None)
    new["verdict_changed"] = _changed(row["correct"], new["correct"])
    if recall_eligible(trace.question, gold):
        new.update(units=len(gold.evidence), units_recovered=units_recovered(gold, trace.evidence_ids))
        if verdict is not None:
            messages = ctx.messages(row["scope"], gold.evidence_ids | {a.message_id for a in trace.anchors})
            blame = attribute_failure(trace, gold, messages)
            new.update(failure=blame.category, failure_detail=blame.detail)
    return {**new, **ctx.review(trace, row["scope"], row["question_id"])}


def _changed(before, after) -> bool:
    before = None if before is None or pd.isna(before) else bool(before)
    return before != after
