"""tmem.viz.run_settings / results / corpus: question choice, configuration overrides, stored traces, imports,
results rebuilt from traces, corpus overview."""
from __future__ import annotations

import json
import re

import pytest

from tmem import api
from tmem.config import config_hash, variant_config
from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE
from tmem.models.offline import offline_roles
from tmem.store import CorpusData
from tmem.types import TraceRef
from tmem.viz import corpus as corpus_view
from tmem.viz import run_settings
from tmem.viz.batch import results


@pytest.fixture
def golden_store(fresh_store):
    fresh_store.replace_corpus("golden", CorpusData(MESSAGES, [QUESTION], [(SCOPE, GOLD)]), format="test")
    return fresh_store


def test_curated_question_falls_back_to_first_knowledge_update(golden_store):
    assert api.curated_question(golden_store, "golden") == (SCOPE, "q1")


def test_adhoc_question_ids_are_stable():
    a = api.adhoc_question("s", "When?", "u1")
    assert a == api.adhoc_question("s", "When?", "u1") and a.id.startswith("adhoc-")
    assert a.id != api.adhoc_question("s", "When?", "u2").id


def test_overrides_round_trip_and_apply():
    text = "retrieval.k=12,retrieval.metadata_fields=channel|topic,discovery.enabled=false,bogus.x=1,discovery.mu=x"
    parsed = api.url_overrides(text)  # a link: unknown names and bad values are dropped
    assert parsed == {"retrieval.k": 12, "retrieval.metadata_fields": ("channel", "topic"), "discovery.enabled": False}
    assert api.parse_overrides(api.format_overrides(parsed)) == parsed
    config = api.resolve_config("full", parsed)
    assert config.retrieval.k == 12 and not config.discovery.enabled
    assert config_hash(config) != config_hash(variant_config("full"))
    assert api.resolve_config("flat", {}) == variant_config("flat")


def test_config_rows_cover_every_parameter():
    rows = run_settings.config_rows(variant_config("full"))
    assert "retrieval.k" in set(rows["parameter"]) and rows["help"].str.len().min() > 0


def test_run_store_and_find(golden_store):
    roles = offline_roles()
    assert api.find_trace(golden_store, "golden", QUESTION, "full", variant_config("full"), roles) is None
    seen = []
    trace = api.run_and_store(golden_store, "golden", QUESTION, "full", variant_config("full"), roles, GOLD,
                                   progress=lambda stage, fraction: seen.append(stage))
    found = api.find_trace(golden_store, "golden", QUESTION, "full", variant_config("full"), roles)
    assert found == trace and "structuring" in seen
    assert 0 <= run_settings.overall_progress("structuring", 0.5) <= 1
    assert list(run_settings.trace_summary(trace)["stage"])[0] == "seed_retrieval"


def test_results_from_traces(golden_store):
    roles = offline_roles()
    for variant in ("full", "flat"):
        api.run_and_store(golden_store, "golden", QUESTION, variant, variant_config(variant), roles, GOLD)
    api.run_and_store(golden_store, "golden", QUESTION, "full",
                           api.resolve_config("full", {"retrieval.k": 12}), roles, GOLD)
    frame = api.trace_results(golden_store, "golden").set_index("variant")
    assert bool(frame.loc["full", "correct"]) and not bool(frame.loc["flat", "correct"])
    assert frame.loc["full", "units"] == 1 and frame.loc["full", "units_recovered"] == 1
    assert any(v.startswith("full@") for v in frame.index)
    row = frame.reset_index().iloc[0].to_dict()
    assert api.result_trace(golden_store, "golden", row) is not None


def test_import_corpus_jsonl(fresh_store, tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_IMPORT_DIRS", str(tmp_path))  # server paths are off unless allowed
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"m{i}", "text": f"hello {i}", "timestamp": f"2025-01-0{i + 1}T10:00",
                                          "channel": "#a"}) for i in range(3)))
    assert "jsonl" in api.import_formats()
    api.import_corpus(fresh_store, "tiny", "jsonl", path)
    assert fresh_store.counts("tiny")["messages"] == 3


def test_role_rows_mark_offline_roles():
    rows = run_settings.role_rows(offline_roles()).set_index("role")
    assert rows.loc["answer", "offline"] == "yes" and run_settings.all_offline(offline_roles())


def test_corpus_overview(golden_store):
    frame = golden_store.messages_frame("golden", SCOPE)
    channels = corpus_view.group_counts(frame, "channel")
    assert channels["messages"].sum() == len(frame) and channels.iloc[0]["channel"] == "#general"
    assert "Staff" in corpus_view.people(frame).set_index("author").loc["User_7", "roles"]
    counts = corpus_view.volume_counts(frame, "channel", "D")
    assert counts.to_numpy().sum() == len(frame) and counts.columns[0] == "#general"  # the largest group first
    svg = corpus_view.volume_svg(frame, "channel", "D")
    titles = re.findall(r"<title>[^<]*: (\d+) messages</title>", svg)  # one bar per non-empty (day, channel)
    assert len(titles) == (counts.to_numpy() > 0).sum() and sum(map(int, titles)) == len(frame)
    assert len(corpus_view.search_messages(frame, "GO-LIVE")) == 1
    assert len(corpus_view.search_messages(frame, channel="#release")) == 6
    assert len(corpus_view.search_messages(frame, "m04")) == 1


def test_a_one_day_corpus_gets_whole_day_ticks_not_milliseconds():
    """One day of messages in daily bars (plotly alone once spanned milliseconds of axis, "23:59:59.9996"): the axis
    covers five days, a tick per day, labelled by date (one hour of messages in hourly bars: by hour); a long corpus
    gets at most MAX_TICKS ticks, on whole periods."""
    import pandas as pd

    day = pd.DataFrame({"id": ["a", "b", "c"], "channel": ["#x", "#x", "#y"],
                        "timestamp": pd.to_datetime(["2025-03-01 09:00", "2025-03-01 11:30", "2025-03-01 18:00"])})
    periods = corpus_view.volume_counts(day, "channel", "D").index
    lo, hi, ticks = corpus_view.period_axis(periods, "D")
    assert hi - lo == pd.Timedelta(days=5) and lo < pd.Timestamp("2025-03-01") < hi
    assert ticks == list(pd.date_range("2025-02-27", "2025-03-03", freq="D"))
    svg = corpus_view.volume_svg(day, "channel", "D")
    assert ">Mar 01<tspan" in svg and ":00" not in svg.split("<title>")[0]  # day labels, no clock times on ticks
    hourly = corpus_view.volume_counts(day, "channel", "h").index
    assert corpus_view.period_axis(hourly, "h")[2][:3] == list(pd.to_datetime(["2025-03-01 09:00", "2025-03-01 10:00",
                                                                                "2025-03-01 11:00"]))
    assert ">09:00<tspan" in corpus_view.volume_svg(day, "channel", "h")
    long = day.assign(timestamp=pd.to_datetime(["2025-01-01", "2025-02-01", "2025-03-01"]))
    lo, hi, ticks = corpus_view.period_axis(corpus_view.volume_counts(long, "channel", "D").index, "D")
    assert 5 <= len(ticks) <= corpus_view.MAX_TICKS and all(t == t.floor("D") for t in ticks)
    assert ticks[0] == pd.Timestamp("2025-01-01") and ticks[-1] <= hi


def test_the_volume_chart_escapes_group_names_and_sums_small_groups():
    import pandas as pd

    names = [f"#c{i}" for i in range(corpus_view.MAX_GROUPS)] + ["<script>alert(1)</script>", "#tiny"]
    rows = [(n, 3) for n in names[:corpus_view.MAX_GROUPS]] + [(names[-2], 1), (names[-1], 1)]
    frame = pd.DataFrame([{"id": f"{n}-{k}", "channel": n, "timestamp": pd.Timestamp("2025-03-01 10:00")}
                          for n, count in rows for k in range(count)])
    counts = corpus_view.volume_counts(frame, "channel", "D")
    assert list(counts.columns) == names[:corpus_view.MAX_GROUPS] + ["(other)"] and counts["(other)"].sum() == 2
    svg = corpus_view.volume_svg(frame, "channel", "D")
    assert "<script>" not in svg and "(other): 2 messages" in svg


def test_settings_values_and_overrides_against_the_variant_preset():
    values = run_settings.config_values(variant_config("no-compression"))
    assert values["compression.mode"] == "truncate" and values["retrieval.k"] == 36
    assert run_settings.overrides_against_preset("no-compression", values) == {}
    flat = run_settings.config_values(variant_config("flat"))
    assert run_settings.overrides_against_preset("flat", {**flat, "discovery.enabled": True}) == {
        "discovery.enabled": True}
    assert api.resolve_config("flat", {"discovery.enabled": True}).discovery.enabled


def test_trace_ref_of_result_rows_and_links(golden_store):
    roles = offline_roles()
    config = api.resolve_config("full", {"retrieval.k": 12})
    stored = api.run_and_store(golden_store, "golden", QUESTION, "full", config, roles, GOLD)
    api.run_and_store(golden_store, "golden", QUESTION, "full", variant_config("full"), roles, GOLD)
    row = {"variant": f"full@{config_hash(config)[:6]}", "config_hash": config_hash(config), "backend": roles.label,
           "scope": SCOPE, "question_id": QUESTION.id}
    ref = TraceRef.from_row(row)
    assert ref == TraceRef("full", config_hash(config), roles.label) and ref.is_preset
    assert api.load_trace(golden_store, "golden", SCOPE, QUESTION.id, ref) == stored  # not the default config's
    assert TraceRef.from_params(ref.to_params()) == ref
    assert TraceRef.from_params({"trace_variant": "embedding", "trace_config": "abc"}) is None
    assert not TraceRef("embedding", "abc", "x").is_preset
    side = {"variant (bm25)": "bm25", "config_hash (bm25)": "h", "backend (bm25)": "b"}
    assert TraceRef.from_row(side, " (bm25)") == TraceRef("bm25", "h", "b")
    assert TraceRef.from_row({"variant": "full", "config_hash": float("nan"), "backend": "b"}) is None
    rows = results.backend_rows(roles.label)
    assert list(rows["role"])[:4] == ["evidence_utility", "relation", "answer", "judge"]
    assert dict(zip(rows["role"], rows["backend"])) == roles.describe()


def test_the_backend_banner_names_one_endpoint_once_with_its_roles():
    """"Apply to all roles" gives four labels that differ only in their decoding settings: one line, four roles."""
    from types import SimpleNamespace

    role = lambda tokens: SimpleNamespace(backend=f"openai:m@http://h:1/v1 [temperature=0 max_tokens={tokens}]")  # noqa: E731
    roles = SimpleNamespace(evidence_utility=role(64), relation=role(128), answer=role(512),
                            judge=SimpleNamespace(backend="offline:lexical-judge"))
    assert run_settings.backend_banner(roles) == ["openai:m@http://h:1/v1: evidence selection, relation, answer",
                                              "offline:lexical-judge: judge"]
    # the selected variant's relation role, or none for a variant that builds no forest
    assert run_settings.backend_banner(roles, "offline:state-relation") == [
        "openai:m@http://h:1/v1: evidence selection, answer", "offline:state-relation: relation",
        "offline:lexical-judge: judge"]
    assert run_settings.backend_banner(roles, "") == ["openai:m@http://h:1/v1: evidence selection, answer",
                                                  "offline:lexical-judge: judge"]


def test_settings_values_read_as_words_not_python():
    assert run_settings.shown_value(True) == "on" and run_settings.shown_value(("a", "b")) == "a, b"
    assert run_settings.shown_value(None) == "—" and run_settings.shown_value(0.5) == "0.5"
