"""`python -m tmem run`: a stage-wise batch run end to end on a small generated corpus, its records, summary,
validators, and the rows and traces it leaves in DuckDB for the app."""
import json

import pytest

from tmem.cli import main as cli


@pytest.fixture
def mini(tmp_path, monkeypatch):
    from tmem.demo import generate
    from tmem.store import Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    db = tmp_path / "mini.duckdb"
    store = Store(db)
    store.replace_corpus("mini", generate(7, 600, 1), format="demo")
    store.close()
    return db


def run(db, out, *extra):
    return cli(["run", "--db", str(db), "--corpus", "mini", "--out", str(out), "--offline", "--quiet", *extra])


def test_a_batch_run_reports_and_stores_results(mini, tmp_path, capsys):
    from tmem.evaluation.records import read_records
    from tmem.store import Store
    from tmem.viz.results import result_trace

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
    rows = store.run_results("mini", "r1")
    assert len(rows) == 5 * 22 and set(rows["status"]) == {"ok"}
    assert list(rows.columns) == list(store.RUN_RESULT_COLUMNS)
    answerable = rows[(rows["variant"] == "full") & (rows["qtype"] != "abstention")]
    assert answerable["units"].notna().all() and (answerable["units_recovered"] <= answerable["units"]).all()
    assert rows[rows["qtype"] == "abstention"]["units"].isna().all()  # Eq. 10 excludes abstention
    for _, row in rows.groupby("variant").head(1).iterrows():
        trace = result_trace(store, "mini", row.to_dict())
        assert trace is not None and trace.variant == row["variant"]
    store.close()


def test_types_and_limit_select_a_subset(mini, tmp_path, capsys):
    from tmem.store import Store

    assert run(mini, tmp_path / "r2", "--variants", "flat", "--types", "temporal,multi_hop", "--limit", "3") == 0
    assert "subset run: 3 of 22" in capsys.readouterr().out
    rows = Store(mini).run_results("mini", "r2")
    assert len(rows) == 3 and set(rows["qtype"]) <= {"temporal", "multi_hop"}


def test_bad_arguments_are_reported(mini, tmp_path, capsys):
    assert run(mini, tmp_path / "r3", "--variants", "full,nope") == 1
    assert "unknown variant 'nope'" in capsys.readouterr().err
    assert run(mini, tmp_path / "r3", "--types", "poetry") == 1
    assert "no questions of type poetry" in capsys.readouterr().err


def test_another_corpus_cannot_reuse_a_run_folder(mini, tmp_path, capsys):
    out = tmp_path / "r4"
    assert run(mini, out, "--variants", "flat", "--limit", "1") == 0
    manifest = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**manifest, "corpus": "other"}))
    assert run(mini, out, "--variants", "flat", "--limit", "1") == 1
    assert "holds a run of corpus 'other'" in capsys.readouterr().err


def test_progress_bar_shows_rate_and_eta():
    import io

    from tmem.evaluation.batch import Progress

    stream = io.StringIO()
    bar = Progress("full / discovery", 10, stream=stream)
    for i in range(1, 11):
        bar(i)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10 and "10/10" in lines[-1] and "ETA" in lines[-1] and "q/s" in lines[-1]


def test_llm_roles_tokens_failures_and_retry(mini, tmp_path, capsys, monkeypatch):
    """All four roles on an OpenAI-compatible server (a scripted local fake): server-reported tokens reach the
    records and the summary; a persistent server failure leaves error records (with the fallback's output); the
    rerun retries exactly those stages and the later stages that depended on them."""
    from llm_server import FaultServer, scripted_reply

    from tmem.evaluation.records import read_records

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
        assert "failed; rerun the same command to retry them" in printed
        discovery = read_records(out / "full" / "discovery.jsonl")
        assert all(r["status"] == "error" and "fallback" not in r["error"] for r in discovery.latest.values())
        server.default = ("reply", scripted_reply)
        assert cli(base) == 0
        printed = capsys.readouterr().out
        assert "VALIDATION FAILED" not in printed and "rerun the same command" not in printed
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
