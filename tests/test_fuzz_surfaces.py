"""Property-based fuzzing of the surfaces issue 44 hardened, beside the importers' (tests/test_fuzz_importers.py):
a Batch API output line, a gold correction, a reviewer's annotation and the stale check, each fed valid input
mutated (a value replaced by another JSON type, a huge or non-finite number, a hostile string, deep nesting, a key
deleted or repeated). Every example must end in a result of the documented shape or a one-line refusal (CorpusError
or ValueError naming the line or field), never another exception; stored and exported text never carries a control
or bidirectional formatting character, and no exported CSV cell runs as a formula.

Profiles as the importers' fuzz suite: `ci` small and derandomized, TMEM_FUZZ=long thousands of examples.
"""
from __future__ import annotations

import copy
import io
import json
import os
import re
from datetime import datetime, timedelta

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmem.types import CorpusError

PROFILES = {
    "ci": settings(max_examples=12, derandomize=True, deadline=None, database=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture]),
    "long": settings(max_examples=3000, derandomize=False, deadline=None, database=None, print_blob=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.function_scoped_fixture]),
}
PROFILE = PROFILES[os.environ.get("TMEM_FUZZ", "ci")]  # read at import: conftest clears TMEM_* for the tests
if os.environ.get("TMEM_FUZZ_EXAMPLES"):  # e.g. a quick random round: TMEM_FUZZ=long TMEM_FUZZ_EXAMPLES=200
    PROFILE = settings(PROFILE, max_examples=int(os.environ["TMEM_FUZZ_EXAMPLES"]))

HOSTILE = st.sampled_from([
    "", " ", "\x00", "\x1b]52;c;aGk=\x07", "\x9b31m", "\u202egnp.exe\u202c", "\u2066x\u2069", "=HYPERLINK(\"x\")",
    "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", " =1", "x" * 5000, "NaN", "Infinity", "1e999", "é\u2028ü",
])
NUMBERS = (st.integers(min_value=-(10 ** 30), max_value=10 ** 30) | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from([0, -1, -9_900_000, 2 ** 63, 1e308]))
LEAVES = st.none() | st.booleans() | NUMBERS | HOSTILE | st.text(max_size=12)
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
BAD_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def paths(value, prefix=()):
    """Every path to a value inside nested dicts and lists."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, prefix + (i,))
    return out


@st.composite
def mutated(draw, base: dict) -> str:
    """`base` with one to three mutations, as a JSON line (NaN and Infinity written as JavaScript does)."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([p for p in paths(doc) if p]))
        *head, last = path
        parent = doc
        for k in head:
            parent = parent[k]
        action = draw(st.sampled_from(["replace", "delete", "deep"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[last]
        elif action == "deep":
            parent[last] = "__DEEP__"
        else:
            parent[last] = draw(VALUES)
    line = json.dumps(doc)
    if draw(st.booleans()):  # a key twice in one object: the last one wins in json.loads
        line = line.replace("{", '{"answer": "first", ', 1) if line.startswith("{") else line
    return line.replace('"__DEEP__"', "[" * 200 + "]" * 200)


# --------------------------------------------------------------------------------------- Batch API output
REPLY = {"id": "r", "custom_id": "c1", "error": None, "response": {"status_code": 200, "body": {
    "choices": [{"message": {"role": "assistant", "content": "a reply"}}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2}}}}


@PROFILE
@given(lines=st.lists(mutated(REPLY), min_size=1, max_size=5))
def test_batch_output_lines_are_a_reply_or_a_failure(lines):
    from tmem.models.llm.batch_client import parse_results

    for custom_id, result in parse_results(lines):
        assert isinstance(custom_id, str) and custom_id
        if result.text is None:
            assert isinstance(result.error, str) and 0 < len(result.error) <= 300
        else:
            assert isinstance(result.text, str) and result.text.strip()
            assert all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                       for t in (result.prompt_tokens, result.completion_tokens))


# ---------------------------------------------------------------------------------------- gold corrections
@pytest.fixture(scope="module")
def gold_store(tmp_path_factory):
    from tmem.corpora.imports import import_corpus
    from tmem.store import Store

    root = tmp_path_factory.mktemp("gold-fuzz")
    lines = [{"id": f"m{i}", "text": f"state {i}", "timestamp": f"2025-01-01T10:0{i}"} for i in range(5)]
    lines.append({"kind": "question", "id": "q", "text": "?", "gold_answer": "a", "gold_evidence": [["m0"]]})
    (root / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    store = Store(root / "gold.duckdb")
    import_corpus(store, "jsonl", root / "c.jsonl", "c")
    yield store, root
    store.close()


CORRECTION = {"scope": "default", "question": "q", "answer": "b", "evidence": [["m1"], ["m2", "m3"]], "reason": "r"}


@PROFILE
@given(line=mutated(CORRECTION))
def test_a_correction_line_is_bounded_or_refused_naming_its_line(gold_store, line):
    from tmem import limits
    from tmem.evaluation.gold_versions import read_corrections

    store, root = gold_store
    path = root / "fix.jsonl"
    path.write_text(line + "\n")
    try:
        fixes = read_corrections(path, store, "c")
    except CorpusError as exc:
        assert str(exc).startswith(f"{path}:1") and "\n" not in str(exc), str(exc)[:200]
        return
    for fix in fixes:
        assert fix.answer is None or len(fix.answer) <= limits.message_chars()
        assert fix.evidence is None or len(fix.evidence) <= limits.MAX_GOLD_UNITS
        assert len(fix.reason) <= limits.message_chars()


# ------------------------------------------------------------------------------------------- annotations
@PROFILE
@given(label=HOSTILE | st.text(max_size=90), note=HOSTILE | st.text(max_size=200),
       author=HOSTILE | st.text(max_size=90))
def test_an_annotation_is_stored_clean_or_refused_and_exports_as_text(tmp_path_factory, label, note, author):
    from tmem.analysis.annotations import annotate, with_annotations
    from tmem.store import Store
    from tmem.viz.safe import spreadsheet_safe

    store = Store(tmp_path_factory.mktemp("notes") / "n.duckdb")
    row = {"run_id": "r", "scope": "s", "question_id": "q", "variant": "full", "config_hash": "h", "backend": "b"}
    try:
        try:
            saved = annotate(store, "c", row, label, note, author)
        except ValueError as exc:
            assert "the annotation's" in str(exc) and "\n" not in str(exc)
            return
        assert not any(BAD_TEXT.search(saved[k]) for k in ("label", "note", "author"))
        shown = with_annotations(pd.DataFrame([row]), store.annotations("c"))
        csv = io.StringIO()
        spreadsheet_safe(shown).to_csv(csv, index=False)
        cells = pd.read_csv(io.StringIO(csv.getvalue()), dtype=str, keep_default_na=False).iloc[0]
        assert not [c for c in cells if c.lstrip(" ").startswith(("=", "+", "-", "@", "\t", "\r"))]
    finally:
        store.close()


# --------------------------------------------------------------------------------------------- stale check
IDS = [f"x{i}" for i in range(8)]


@PROFILE
@given(units=st.lists(st.lists(st.sampled_from(IDS), min_size=1, max_size=3), min_size=0, max_size=8),
       edges=st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from(IDS + [None, ""]),
                                st.sampled_from(["UPDATE", "EXPAND", "ROOT", "update"])), max_size=12),
       kept=st.lists(st.sampled_from(IDS), max_size=8), superseded=st.sampled_from([None, "", "old", "x" * 3000]),
       minutes=st.lists(st.integers(0, 5), min_size=len(IDS), max_size=len(IDS)))
def test_the_stale_check_never_fails_on_any_gold_edges_or_context(units, edges, kept, superseded, minutes):
    """Cycles, self-loops, repeated ids and units, ties in time: a finding names held and replacing ids, or none."""
    from tmem.analysis import stale
    from tmem.types import Gold, Question, StageTrace, Trace, Usage

    times = {m: datetime(2025, 1, 1) + timedelta(minutes=d) for m, d in zip(IDS, minutes)}
    gold = Gold("q", "now", tuple(tuple(u) for u in units), superseded=superseded)
    trace = Trace(Question("q", "s", "?"), "full", "h", "c", evidence_ids=tuple(kept),
                  stages=(StageTrace("seed_retrieval", 0.0, {}, Usage(), "offline", True),))
    found = stale.revision_without_rollback(trace, gold, times, edges)
    if found is not None:
        held, later = found.messages
        assert held in kept and later not in kept and later in gold.evidence_ids
