"""The front door (tmem.api and its modules): what the app and the commands call instead of the library's modules
-- the methods a batch can run and the stages each runs, the operator's backend settings and prices, a corpus file
imported by path, and the offline relation rules the `links` command compares."""
import pytest

from tmem import api
from tmem.api import backends, corpora, errors, models
from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE, write_jsonl

PAPER_STAGES = ("seed_retrieval", "discovery", "structuring", "compression", "answer", "judge")


def test_method_names_are_the_presets_then_the_baselines():
    names = api.method_names()
    assert names[0] == "full" and {"flat", "no-discovery", "bm25", "embedding"} <= set(names)
    assert len(names) == len(set(names))
    for name in names:  # every listed name is one a batch can run
        assert api.get_method(name).name == name


def test_the_stage_plan_follows_the_variant():
    full = api.stage_plan(api.method_for(api.resolve_config("full"), "full"))
    assert full == PAPER_STAGES  # the paper's pipeline (Fig. 1), every stage on
    no_discovery = api.stage_plan(api.method_for(api.resolve_config("no-discovery"), "no-discovery"))
    assert no_discovery == tuple(s for s in PAPER_STAGES if s != "discovery")
    assert api.stage_plan(api.get_method("bm25")) == ("seed_retrieval", "answer", "judge")  # a flat baseline


def test_operator_settings_and_prices_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("TMEM_BACKEND_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./tmem.toml
    monkeypatch.setenv("TMEM_PRICE_INPUT", "2.5")
    monkeypatch.setenv("TMEM_PRICE_OUTPUT", "10")
    assert backends.operator_prices() == backends.Prices(2.5, 10.0)
    assert backends.operator_prices().cost(1_000_000, 100_000) == pytest.approx(2.5 + 1.0)
    assert backends.operator_settings({"embedder.kind": "lexical"}).embedder.kind == "lexical"


def test_a_corpus_file_imported_by_path_prints_its_counts(tmp_path):
    path = tmp_path / "golden.jsonl"
    write_jsonl(path)
    store = api.open_store(tmp_path / "db.duckdb", demo=False)
    assert set(corpora.format_names()) >= {"jsonl", "locomo", "slack"}
    lines = corpora.import_path(store, "jsonl", path, "golden")
    units = len(GOLD.evidence)
    # the golden file writes no gold edges (a reply_to is the message's own field, not a gold link)
    assert lines[0] == (f"corpus 'golden': 1 scopes, {len(MESSAGES)} messages, 1 questions, {units} evidence units, "
                        "0 gold links")
    assert lines[1] == f"  {QUESTION.type}: 1"
    assert store.scopes("golden") == [SCOPE]
    with pytest.raises(errors.CorpusError):  # a bad file names itself and leaves the database unchanged
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"kind": "message"}\n', encoding="utf-8")
        corpora.import_path(store, "jsonl", bad, "golden")
    assert store.counts("golden")["messages"] == len(MESSAGES)


def test_offline_relation_roles_follow_the_named_rules():
    config = api.resolve_config("full")
    rules = ["state", "cue-overlap"]
    roles = models.offline_relation_roles(rules, config, None)
    assert len(roles) == len(rules) and all(role.offline for role in roles)
    assert len({type(role) for role in roles}) == len(rules)  # two rules, two kinds of role


def test_a_kept_trace_is_read_again_once_it_is_stored_again(app_db):
    """Issue 42 item 4: the explorer keeps parsed stored traces per process (Failures' selected row, Compare's
    equal-budget pass and the Question page's steps read them on every rerun); a trace stored again under the same
    key -- by another writer, or by a re-run in the app within the same second -- is read again, never served stale."""
    import dataclasses
    import time
    from datetime import datetime

    from tmem.api import TraceRef, explorer

    path = explorer.open_database(app_db)
    c = explorer.ExplorerContext(database=path, corpus="golden", scope=SCOPE, variant="full", overrides={},
                                 config=api.resolve_config("full"), roles=explorer.database_roles(path))
    row = next(r for r in explorer.trace_index(c).to_dict("records")
               if r["question_id"] == "q1" and r["variant"] == "full" and r["backend"] == c.roles.label)
    ref = TraceRef.from_row(row)
    first = explorer.stored_trace(c, SCOPE, "q1", ref)
    assert first is not None and first.answers and explorer.stored_trace(c, SCOPE, "q1", ref) is first
    while datetime.now().replace(microsecond=0) <= row["created_at"]:  # times are stored to the second: another
        time.sleep(0.05)  # writer within the kept trace's second is not told apart (the app's own re-run is, below)
    explorer._store(path).save_trace(dataclasses.replace(first, answers=()), ref.backend)
    assert explorer.stored_trace(c, SCOPE, "q1", ref).answers == ()
    question = next(q for q in explorer.questions(c, SCOPE) if q.id == "q1")
    explorer.run_question_and_store(c, question, explorer.question_gold(c, SCOPE, "q1"))  # likely the same second
    assert explorer.stored_trace(c, SCOPE, "q1", ref).answers
    assert explorer.stored_trace(c, SCOPE, "q1", TraceRef("full", "no-such-hash", ref.backend)) is None


def test_a_trace_stored_again_within_the_same_second_is_read_again(app_db, monkeypatch):
    """Issue 42: the kept traces' versions were write times to the second, so another process storing the trace
    again within that second was not seen. The version is the time to the microsecond and the JSON's size (a
    file's st_mtime_ns + st_size): both a later write in the same second and a same-time write of another size
    are read again."""
    import dataclasses
    from datetime import datetime

    from tmem.api import TraceRef, explorer
    from tmem.store import traces as trace_table

    clock = iter([datetime(2026, 12, 6, 23, 0, 0, 100_000), datetime(2026, 12, 6, 23, 0, 0, 900_000),
                  datetime(2026, 12, 6, 23, 0, 0, 900_000)])

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return next(clock)
    monkeypatch.setattr(trace_table, "datetime", Clock)
    path = explorer.open_database(app_db)
    c = explorer.ExplorerContext(database=path, corpus="golden", scope=SCOPE, variant="full", overrides={},
                                 config=api.resolve_config("full"), roles=explorer.database_roles(path))
    row = next(r for r in explorer.trace_index(c).to_dict("records")
               if r["question_id"] == "q1" and r["variant"] == "full" and r["backend"] == c.roles.label)
    ref, store = TraceRef.from_row(row), explorer._store(path)
    original = explorer.stored_trace(c, SCOPE, "q1", ref)
    store.save_trace(original, ref.backend)  # 23:00:00.1
    assert explorer.stored_trace(c, SCOPE, "q1", ref).answers  # kept under this version
    store.save_trace(dataclasses.replace(original, answers=()), ref.backend)  # 23:00:00.9: the same second
    assert explorer.stored_trace(c, SCOPE, "q1", ref).answers == ()
    assert len(original.stages) > 1
    store.save_trace(dataclasses.replace(original, answers=(), stages=original.stages[:1]), ref.backend)
    assert len(explorer.stored_trace(c, SCOPE, "q1", ref).stages) == 1  # the very same time, another size


def test_a_partial_trace_holds_the_named_fields_as_stored_and_nothing_else(golden_trace):
    """api.explorer.partial_trace (Structuring reads three fields of every stored trace): the named fields and the
    four that name a trace equal the whole parse; every other field is at its empty default."""
    from tmem.api.explorer import partial_trace
    from tmem.types import TRACE_NAME, Trace

    trace = golden_trace[0]
    assert trace.decisions and trace.spans and trace.context  # the fields left out hold something
    part = partial_trace(trace.to_json(), ("evidence_ids", "decisions", "stages"))
    for name in (*TRACE_NAME, "evidence_ids", "decisions", "stages"):
        assert getattr(part, name) == getattr(trace, name), name
    empty = Trace(trace.question, trace.variant, trace.config_hash, trace.corpus)
    assert part.spans == empty.spans == () and part.nodes == () and part.context == "" and part.answers == ()
