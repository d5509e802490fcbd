"""Figures cannot drift (issue 39): every figure README.md and docs/*.md (the reference tables included:
docs/reference.md) state about the shipped demo is in one checked-in file, docs/figures.json, written by
`python -m tmem figures`; each sentence of tmem.evaluation.figures.STATED, filled from that file, must appear in its
document verbatim. When the demo's figures move (a change of the relation role, say), re-run the command and edit the
sentences this test names."""
import re
from pathlib import Path

import pytest

from tmem.evaluation import figures

ROOT = Path(__file__).resolve().parent.parent


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)  # documents wrap sentences over lines


def test_every_stated_figure_is_the_files():
    data = figures.read()
    missing = [(doc, sentence) for doc, sentence in figures.stated(data["figures"])
               if _flat(sentence) not in _flat((ROOT / doc).read_text(encoding="utf-8"))]
    assert missing == [], "stated figures that differ from docs/figures.json (re-run `python -m tmem figures`?)"


def test_the_file_records_when_and_on_which_commit_it_was_measured():
    data = figures.read()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", data["measured_at"])
    assert re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?", data["commit"])
    assert {f for _, t in figures.STATED for f in re.findall(r"\{(\w+)\}", t)} <= set(data["figures"])


def test_batch_figures_by_hand():
    delta = {"delta": 0.275, "ci_low": 0.15, "ci_high": 0.425, "p_mcnemar": 0.0004}
    assert figures.delta_text(delta) == "+27.5 pp [+15.0, +42.5], McNemar p < 0.001"
    assert figures.delta_text({**delta, "delta": -0.062, "ci_low": -0.146, "p_mcnemar": 0.375}) == \
        "−6.2 pp [−14.6, +42.5], p = 0.375"
    types = [{"n": 40, "ci_low": 0.1, "ci_high": 0.4, "p_mcnemar": 0.001, "p_holm": None},  # overall: not counted
             {"n": 8, "ci_low": 0.6, "ci_high": 1.0, "p_mcnemar": 0.016, "p_holm": 0.078},
             {"n": 8, "ci_low": 0.5, "ci_high": 1.0, "p_mcnemar": 0.004, "p_holm": 0.02}]
    counts = {"stale — states the superseded state": 1, "revision without rollback": 2, "chains": 6,
              "chains_complete": 5}
    summary = {"comparisons": [{"baseline": "flat", **delta, "measures": {"evidence": types, "accuracy": [delta]},
                                "matched": {**delta, "outcome": "inconclusive", "mean_messages": 75.46,
                                            "reading": "more evidence, not better evidence"}}],
               "review": {"counts": {"full": counts, "flat": counts}},
               "variants": {"full": {"accuracy": {"overall": {"accuracy": 0.0625}}},
                            "flat": {"accuracy": {"overall": {"accuracy": 0.125}}}}}
    out = figures.from_batch(summary, {"full": {"forest rule": 1}})
    assert out["holm_wins"] == "2 before Holm, 1 after" and out["accuracy_range"] == "6 to 12 %"
    assert out["matched_messages"] == "75.5" and out["full_flat_matched"].endswith(
        "(inconclusive: more evidence, not better evidence)")
    assert out["stale_sentence"].startswith("full 1 stale (forest rule 1), 2 revision(s) without rollback; flat 1")
    assert out["chain_sentence"] == "full 5 of 6; flat 5 of 6"


@pytest.mark.slow
def test_the_file_matches_a_fresh_measurement():
    """Minutes: the demo batch, recall and the small-B runs, offline (`python -m tmem figures --check`)."""
    from tmem.cli import main

    assert main(["figures", "--check"]) == 0


@pytest.mark.integration
def test_evidence_counts_at_two_budgets_from_a_batchs_records_are_the_counts_computed_anew(tmp_path, monkeypatch):
    """`figures` counts evidence at B and SMALL_B continuing from the batch's records of the stages before
    compression (`batch_records`, the chain the batch itself resumes from): the counts are the ones computed
    anew; a variant the batch did not run, or other roles, get no records."""
    from mini_corpus import mini_db

    from tmem.api import build_roles
    from tmem.cli import main
    from tmem.pipeline.methods import get_method
    from tmem.store import Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    db = mini_db(tmp_path)
    assert main(["run", "--db", str(db), "--corpus", "mini", "--out", str(tmp_path / "run"), "--offline", "--quiet",
                 "--variants", "full,flat", "--types", "knowledge_update,temporal"]) == 0
    store = Store(db)
    roles = build_roles({"backend.preset": "offline"}, store)
    recorded = figures.batch_records(store, "mini", tmp_path / "run", roles)
    asked = [q for q in store.questions("mini") if q.type in ("knowledge_update", "temporal")]
    assert all(set(recorded(get_method("full"), q)) == {"seed_retrieval", "discovery", "structuring",
                                                        "compression", "answer", "judge"} for q in asked)
    assert recorded(get_method("bm25-forest"), asked[0]) == {}
    other = build_roles({"backend.preset": "offline", "embedder.kind": "minilm"}, store)
    assert figures.batch_records(store, "mini", tmp_path / "run", other)(get_method("full"), asked[0]) == {}
    variants = ("full", "flat", "no-compression")
    counts = figures.budget_counts(store, "mini", roles, variants, small=300, recorded=recorded)
    assert counts == figures.budget_counts(store, "mini", roles, variants, small=300)
    assert counts["full"][1] < counts["full"][0]  # the small budget is seen
    store.close()
