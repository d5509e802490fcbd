"""`python -m tmem run`: a stage-wise batch run end to end on a small generated corpus, its records, summary,
validators, and the rows and traces it leaves in DuckDB for the app."""
import json

import pytest
from mini_corpus import mini_db

from tmem.cli import main as cli


@pytest.fixture
def mini(tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    return mini_db(tmp_path)


def run(db, out, *extra):
    return cli(["run", "--db", str(db), "--corpus", "mini", "--out", str(out), "--offline", "--quiet", *extra])


@pytest.mark.integration
def test_a_batch_run_reports_and_stores_results(mini, tmp_path, capsys):
    from tmem.api import result_trace
    from tmem.evaluation.batch.records import read_records
    from tmem.store import Store

    out = tmp_path / "r1"
    assert run(mini, out, "--variants", "full,flat,embedding,bm25-forest,global-control", "--price-input", "1",
               "--price-output", "2") == 0
    printed = capsys.readouterr().out
    assert "Validators:" in printed and "VALIDATION FAILED" not in printed
    for label in ("overall", "evidence recall", "mean evidence msgs", "cost (USD)", "discovery", "structuring"):
        assert label in printed
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["variants"]) == {"full", "flat", "embedding", "bm25-forest", "global-control"}
    full = summary["variants"]["full"]
    assert full["questions"] == 22 and full["errors"] == 0 and 0 <= full["recall"]["recall"] <= 1
    assert full["accuracy"]["overall"]["judged"] == 22 and full["cost_usd"] == 0.0  # offline roles spend nothing
    assert set(full["stages"]) == {"seed_retrieval", "discovery", "structuring", "compression", "answer", "judge"}
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["corpus"] == "mini" and manifest["prompt_manifest_hash"] and "full" in manifest["variants"]
    record = read_records(out / "full" / "discovery.jsonl").latest
    one = next(iter(record.values()))
    for field in ("key", "config_hash", "prompt_hashes", "selected_ids", "outputs", "status", "error",
                  "record_id", "parent_id"):
        assert field in one
    store = Store(mini)
    rows = store.run_results("mini", manifest["run_id"])
    assert len(rows) == 5 * 22 and set(rows["status"]) == {"ok"}
    assert list(rows.columns) == list(store.RUN_RESULT_COLUMNS)
    answerable = rows[(rows["variant"] == "full") & (rows["qtype"] != "abstention")]
    assert answerable["units"].notna().all() and (answerable["units_recovered"] <= answerable["units"]).all()
    assert rows[rows["qtype"] == "abstention"]["units"].isna().all()  # Eq. 10 excludes abstention
    for _, row in rows.groupby("variant").head(1).iterrows():
        trace = result_trace(store, "mini", row.to_dict())
        assert trace is not None and trace.variant == row["variant"]
    store.close()


@pytest.mark.integration
def test_types_and_limit_select_a_subset(mini, tmp_path, capsys):
    from tmem.store import Store

    assert run(mini, tmp_path / "r2", "--variants", "flat", "--types", "temporal,multi_hop", "--limit", "3") == 0
    assert "subset run: 3 of 22" in capsys.readouterr().out
    rows = Store(mini).run_results("mini", json.loads((tmp_path / "r2" / "run.json").read_text())["run_id"])
    assert len(rows) == 3 and set(rows["qtype"]) <= {"temporal", "multi_hop"}


@pytest.mark.integration
def test_bad_arguments_are_reported(mini, tmp_path, capsys):
    assert run(mini, tmp_path / "r3", "--variants", "full,nope") == 1
    assert "unknown variant 'nope'" in capsys.readouterr().err
    assert run(mini, tmp_path / "r3", "--types", "poetry") == 1
    assert "no questions of type poetry" in capsys.readouterr().err


@pytest.mark.integration
def test_another_corpus_cannot_reuse_a_run_folder(mini, tmp_path, capsys):
    out = tmp_path / "r4"
    assert run(mini, out, "--variants", "flat", "--limit", "1") == 0
    manifest = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**manifest, "corpus": "other"}))
    assert run(mini, out, "--variants", "flat", "--limit", "1") == 1
    assert "holds a run of corpus 'other'" in capsys.readouterr().err


def test_progress_bar_shows_rate_and_eta():
    import io

    from tmem.commands.evaluate.run import Progress

    stream = io.StringIO()
    bar = Progress("full / discovery", 10, stream=stream)
    for i in range(1, 11):
        bar(i)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10 and "10/10" in lines[-1] and "ETA" in lines[-1] and "q/s" in lines[-1]


@pytest.mark.integration
def test_llm_roles_tokens_failures_and_retry(mini, tmp_path, capsys, monkeypatch):
    """All four roles on an OpenAI-compatible server (a scripted local fake): server-reported tokens reach the
    records and the summary; a persistent server failure leaves error records (with the fallback's output); the
    rerun retries exactly those stages and the later stages that depended on them."""
    from tmem.evaluation.batch.records import read_records
    from tmem.evaluation.scripted_server import FaultServer, scripted_reply

    monkeypatch.setenv("TMEM_TEST_API_KEY", "sk-test")
    server = FaultServer(default=("reply", scripted_reply))
    flags = ["--llm-model", "fault-model", "--llm-base-url", server.base_url, "--llm-api-key-env",
             "TMEM_TEST_API_KEY", "--llm-retries", "0", "--llm-timeout", "5", "--embedder", "lexical"]
    out = tmp_path / "llm"
    base = ["run", "--db", str(mini), "--corpus", "mini", "--out", str(out), "--quiet", "--variants", "full",
            "--limit", "3", "--jobs", "3", "--price-input", "1", "--price-output", "2", *flags]
    try:
        server.default = ("status", 500, "model overloaded")
        assert cli(base) == 0  # failures with fallbacks are warnings: the run completes and reports them
        printed = capsys.readouterr().out
        assert "failed and used a fallback; rerun the same command to retry them" in printed
        discovery = read_records(out / "full" / "discovery.jsonl")
        assert all(r["status"] == "error" and "fallback" not in r["error"] for r in discovery.latest.values())
        server.default = ("reply", scripted_reply)
        assert cli(base) == 0
        printed = capsys.readouterr().out
        assert "VALIDATION FAILED" not in printed and "rerun the same command" not in printed
        cache = json.loads((out / "summary.json").read_text())["response_cache"]
        assert cache["misses"] > 0 and f"Response cache (this process): {cache['hits']} hits" in printed
    finally:
        server.close()
    summary = json.loads((out / "summary.json").read_text())["variants"]["full"]
    assert summary["errors"] == 0 and summary["prompt_tokens"] > 0 and summary["cost_usd"] > 0
    assert summary["stages"]["answer"]["calls"] == 6  # forest + flat answers for 3 questions
    for stage in ("discovery", "structuring", "answer", "judge"):
        log = read_records(out / "full" / f"{stage}.jsonl")
        assert set(log.counts.values()) == {2}  # one failed attempt, one retry; history kept
        assert all(r["status"] == "ok" and "server" in r["usage"]["source"] for r in log.latest.values())
    assert set(read_records(out / "full" / "seed_retrieval.jsonl").counts.values()) == {1}  # never redone


def run_id_of(out):
    return json.loads((out / "run.json").read_text())["run_id"]


@pytest.mark.integration
def test_run_ids_are_unique_per_folder_and_kept_on_resume(mini, tmp_path, capsys):
    """Two folders with the same name get their own ids, so their rows never mix; a resumed run keeps its id; a
    folder from before unique ids (id = folder name) gets one."""
    from tmem.store import Store

    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert run(mini, a, "--variants", "flat", "--limit", "2") == 0
    assert run(mini, b, "--variants", "flat", "--limit", "3") == 0
    first = run_id_of(a)
    assert first.startswith("run-") and first != run_id_of(b)
    assert run(mini, a, "--variants", "flat", "--limit", "2") == 0
    assert run_id_of(a) == first and f"results stored as run {first!r}" in capsys.readouterr().out
    store = Store(mini)
    assert len(store.run_results("mini", first)) == 2 and len(store.run_results("mini", run_id_of(b))) == 3
    store.close()
    legacy = json.loads((a / "run.json").read_text())
    (a / "run.json").write_text(json.dumps({**legacy, "run_id": "run"}))
    assert run(mini, a, "--variants", "flat", "--limit", "2") == 0
    assert run_id_of(a) not in ("run", first) and "a name other folders can share" in capsys.readouterr().err


@pytest.mark.integration
def test_a_run_id_is_a_safe_name_whatever_its_folder_is_called(mini, tmp_path, capsys):
    """Issue 44: run ids came from the --out folder's name unchecked ("r<img src=x>" plus ESC); an id names stored
    rows, report folders and URLs, so it is made a safe name (tmem.limits.safe_slug), and an unsafe one found in a
    run.json is refused."""
    from tmem.limits import safe_name

    out = tmp_path / "r<img src=x>\x1b]52;c;aGk=\x07"
    assert run(mini, out, "--variants", "flat", "--limit", "1", "--no-store") == 0
    run_id = run_id_of(out)
    assert safe_name(run_id, "run id") and run_id.startswith("r_img src=x___52_c_aGk=_-")
    capsys.readouterr()
    manifest = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**manifest, "run_id": "../x\x1b[31m"}))
    assert run(mini, out, "--variants", "flat", "--limit", "1", "--no-store") == 1
    err = capsys.readouterr().err
    assert "the run id in" in err and "is not a single safe name" in err and "\x1b" not in err


@pytest.mark.integration
def test_a_run_that_fails_validation_stores_nothing(mini, tmp_path, capsys):
    """A leak planted in a recorded context (with its record chain intact) fails validation on the resumed run:
    the command exits 1, says nothing was stored, and removes the rows the earlier, valid pass stored."""
    from tmem.evaluation.batch.records import RecordWriter, read_records
    from tmem.store import Store

    out = tmp_path / "leaky"
    assert run(mini, out, "--variants", "flat", "--limit", "2") == 0
    run_id = run_id_of(out)
    store = Store(mini)
    assert len(store.run_results("mini", run_id)) == 2
    store.close()
    path = out / "flat" / "answer.jsonl"
    key, record = next(iter(read_records(path).latest.items()))
    fields = record["outputs"]["fields"]
    gold = Store(mini).gold("mini", key[0], key[2]).answer
    fields["flat_context"] = fields["flat_context"].replace("\n<<<END", f"\nnote: {gold}\n<<<END")
    with RecordWriter(path) as w:
        w.append(record)  # same record id: the later stages still build on it
    capsys.readouterr()
    assert run(mini, out, "--variants", "flat", "--limit", "2") == 1
    printed = capsys.readouterr().out
    assert "gold answer outside the message bodies of the flat answer prompt" in printed
    assert "VALIDATION FAILED" in printed
    assert f"nothing stored for the app (the 2 result rows an earlier pass stored as run {run_id!r} were " \
           "removed)" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["valid"] is False and summary["stored"].startswith("validation failed")
    store = Store(mini)
    assert len(store.run_results("mini", run_id)) == 0
    store.close()


@pytest.mark.integration
def test_the_summary_reports_evidence_context_tokens_offline(mini, tmp_path, capsys):
    """With offline roles no model reports usage; the evidence passages' tokens are still counted, per variant."""
    out = tmp_path / "tok"
    assert run(mini, out, "--variants", "full,flat", "--limit", "3") == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["token_counter"] and f"counted with {summary['token_counter']}" in printed
    for name in ("full", "flat"):
        v = summary["variants"][name]
        assert v["prompt_tokens"] == 0  # no model call
        tokens = v["context_tokens"]
        assert tokens["questions"] == 3 and 0 < tokens["mean_after_compression"] <= tokens["mean_before_compression"]
    assert "context tok. after" in printed


@pytest.mark.integration
def test_each_variant_names_the_relation_role_that_built_its_forests(mini, tmp_path, capsys):
    """The roles line names the configured default; a variant that runs another offline rule says so in the header,
    the summary, the manifest and every record of its stages (issue 21: `state-structuring` ran under the default
    role's name)."""
    from tmem.evaluation.batch.records import read_records

    out = tmp_path / "rel"
    assert run(mini, out, "--variants", "state-structuring,full,flat", "--limit", "2") == 0
    printed = capsys.readouterr().out
    assert "relation=offline:revision-first" in printed
    assert ("relation role per variant: state-structuring=offline:state-relation, full=offline:revision-first, "
            "flat=no forest") in printed
    summary = json.loads((out / "summary.json").read_text())
    assert {n: v["relation"] for n, v in summary["variants"].items()} == {
        "state-structuring": "offline:state-relation", "full": "offline:revision-first", "flat": None}
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["variants"]["state-structuring"]["relation"] == "offline:state-relation"
    assert manifest["variants"]["flat"]["relation"] is None
    for variant, role in (("state-structuring", "offline:state-relation"), ("full", "offline:revision-first")):
        records = read_records(out / variant / "structuring.jsonl").latest.values()
        assert records and {r["role"] for r in records} == {role}
        # `backend` stays the key of the configured roles (resume and stored traces use it)
        assert {r["backend"] for r in records} == {manifest["backend"]}
    answers = read_records(out / "flat" / "answer.jsonl").latest.values()
    assert {r["role"] for r in answers} == {"offline:extractive-answerer"}


@pytest.mark.integration
def test_decoding_settings_are_part_of_the_backend_identity(mini, tmp_path, capsys, monkeypatch):
    """Records made at another answer temperature are not reused (the backend identity covers all roles, so every
    stage reruns). run.json records each role's decoding settings, and never the key."""
    from tmem.evaluation.batch.records import read_records
    from tmem.evaluation.scripted_server import FaultServer, scripted_reply

    monkeypatch.setenv("TMEM_TEST_API_KEY", "sk-test-secret-value")
    server = FaultServer(default=("reply", scripted_reply))
    out = tmp_path / "decoding"
    base = ["run", "--db", str(mini), "--corpus", "mini", "--out", str(out), "--quiet", "--variants", "flat",
            "--limit", "2", "--llm-model", "fault-model", "--llm-base-url", server.base_url, "--llm-api-key-env",
            "TMEM_TEST_API_KEY", "--llm-retries", "0", "--embedder", "lexical"]
    try:
        assert cli(base) == 0
        assert cli(base + ["--answer-temperature", "0.7"]) == 0
    finally:
        server.close()
    assert "backend changed" in capsys.readouterr().err
    counts = {s: set(read_records(out / "flat" / f"{s}.jsonl").counts.values())
              for s in ("seed_retrieval", "answer", "judge")}
    assert counts == {"seed_retrieval": {2}, "answer": {2}, "judge": {2}}
    manifest = (out / "run.json").read_text()
    decoding = json.loads(manifest)["decoding"]
    assert decoding["answer"]["temperature"] == 0.7 and decoding["judge"]["temperature"] == 0.2
    assert "temperature=0.7" in json.loads(manifest)["roles"]["answer"]
    assert "sk-test-secret-value" not in manifest + (out / "flat" / "answer.jsonl").read_text()


def test_the_role_label_names_what_changes_a_reply():
    from tmem.models.llm.openai_backend import ChatClient, Endpoint
    from tmem.models.settings import BackendSettings

    def label(**values):
        settings = BackendSettings.from_sources({}, {}, {"roles.answer.model": "m", **values}).answer
        return ChatClient(settings, Endpoint("http://127.0.0.1:1/v1", "NO_SUCH_KEY_VAR", 5, env={}), None).label

    plain = label()
    assert plain == "openai:m@http://127.0.0.1:1/v1 [temperature=0.2 max_tokens=8192 response_format=text]"
    for change in ({"roles.answer.temperature": "0.7"}, {"roles.answer.temperature": "unset"},
                   {"roles.answer.max_tokens": "100"}, {"roles.answer.response_format": "object"},
                   {"roles.answer.reasoning_effort": "high"}):
        assert label(**change) != plain, change
    assert label(**{"roles.answer.timeout": "9", "roles.answer.retries": "0"}) == plain  # no effect on replies


def test_replacing_a_runs_results_keeps_its_other_variants(fresh_store):
    def row(variant, qid):
        return {"run_id": "r-1", "corpus": "c", "variant": variant, "config_hash": "h", "backend": "b", "scope": "s",
                "question_id": qid, "status": "ok"}

    assert fresh_store.replace_run_results("r-1", ["full", "flat"], [row("full", "q1"), row("flat", "q1")]) == 0
    assert fresh_store.replace_run_results("r-1", ["flat"], [row("flat", "q2")]) == 1
    rows = fresh_store.run_results("c", "r-1")
    assert sorted(zip(rows["variant"], rows["question_id"])) == [("flat", "q2"), ("full", "q1")]
    assert fresh_store.replace_run_results("r-1", ["full", "flat"], []) == 2 and fresh_store.run_ids("c") == []
