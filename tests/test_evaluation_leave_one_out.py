"""Leave-one-style-out (tmem/evaluation/diagnostics/leave_one_out.py, `links --leave-one-out`) on three tiny
hand-written styles: each style held out in turn, the fitted weights fitted on the others in memory (the shipped
weights.json untouched), every offline rule scored on the held-out style; the worst style per rule; sealed splits
refused."""
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

import pytest

from tmem.cli import main as cli
from tmem.config import StructuringConfig
from tmem.evaluation.diagnostics.leave_one_out import Fold, sealed_reason, with_weights, worst_styles
from tmem.evaluation.fit_relation import fit_weights
from tmem.evaluation.links import evaluate_links
from tmem.models.embedders import LexicalEmbedder
from tmem.models.relation import RULES, WEIGHTS, CueOverlapRelation, FittedRelation, StateRelation
from tmem.store import CorpusData, Store
from tmem.types import EXPAND, ROOT, UPDATE, Message

DEFAULT = StructuringConfig().relation_rule


def style(scope, rows):
    """(messages, typed links) of one scope: rows are (id, day, author, text, gold parent or None, relation)."""
    messages = [Message(f"{scope}-{i}", scope, text, datetime(2025, 6, day, 9), author, topic=scope.lower())
                for i, day, author, text, _, _ in rows]
    links = [(scope, f"{scope}-{i}", f"{scope}-{p if p else i}", rel) for i, day, author, text, p, rel in rows]
    return messages, links


STYLES = {
    "offsite": style("Offsite", [
        ("a", 1, "ana", "The offsite is in Hall A.", None, ROOT),
        ("b", 2, "ana", "Hall A is booked, the offsite moves to Hall B.", "a", UPDATE),
        ("q", 3, "cat", "Does Hall B have a projector?", "b", EXPAND),
        ("c", 4, "ben", "Hall B flooded; the offsite is in Hall C now.", "b", UPDATE),
        ("n", 5, "dan", "Who orders lunch for the offsite?", None, ROOT)]),
    "tickets": style("Printer", [
        ("a", 1, "desk", "Ticket 88: third floor printer jams, status open.", None, ROOT),
        ("b", 2, "desk", "Ticket 88 status: waiting for the toner part.", "a", UPDATE),
        ("c", 3, "lee", "Ticket 88: which toner part did you order?", "b", EXPAND),
        ("d", 4, "desk", "Ticket 88 status: closed, the part is in.", "b", UPDATE)]),
    "standup": style("Standup", [
        ("a", 1, "kim", "Migration to the new database is on track for Friday.", None, ROOT),
        ("b", 2, "raj", "Is the migration rehearsal done?", "a", EXPAND),
        ("c", 3, "kim", "Migration slips to Monday, the rehearsal failed.", "a", UPDATE),
        ("d", 4, "kim", "Migration is delayed again, now Wednesday.", "c", UPDATE)]),
}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "styles.duckdb"
    store = Store(path)
    for name, (messages, links) in STYLES.items():
        store.replace_corpus(name, CorpusData(messages, links=links), format="test")
    store.close()
    return path


def run_json(capsys, db, *corpora, extra=()):
    args = ["links", "--db", str(db), "--leave-one-out", "--json", "--offline", "--embedder", "lexical", *extra]
    for corpus in corpora:
        args += ["--corpus", corpus]
    assert cli(args) == 0
    return json.loads(capsys.readouterr().out)


def test_each_style_is_held_out_once_with_weights_fitted_on_the_others(db, capsys):
    shipped = hashlib.sha256(WEIGHTS.read_bytes()).hexdigest()
    out = run_json(capsys, db, "offsite", "tickets", "standup")
    assert hashlib.sha256(WEIGHTS.read_bytes()).hexdigest() == shipped  # never written
    assert [(f["held_out"], f["trained_on"]) for f in out["folds"]] == [
        ("offsite", ["tickets", "standup"]), ("tickets", ["offsite", "standup"]), ("standup", ["offsite", "tickets"])]
    roles = [r["role"] for r in out["folds"][0]["roles"]]
    assert roles == [RULES[n]().backend for n in (DEFAULT, *[r for r in RULES if r != DEFAULT])] + [
        "baseline: previous candidate"]  # every rule in the registry, the default first
    assert out["default"] == RULES[DEFAULT]().backend == "offline:revision-first"
    # revision-first decides its revisions first and leaves the rest to the fitted rule: it reads the fold's weights
    assert [r["refit"] for r in out["folds"][0]["roles"]] == [
        r in ("offline:revision-first", "offline:fitted-relation") for r in roles]
    store = Store(db)
    lexical = LexicalEmbedder()
    differs = []
    for fold in out["folds"]:
        held = fold["held_out"]
        # a fixed rule scores exactly as `links` does on the held-out style alone
        fixed = evaluate_links(store, held, [CueOverlapRelation(),
                                               StateRelation.from_config(StructuringConfig(), lexical)])
        by_role = {r["role"]: r for r in fold["roles"]}
        for score in fixed[:2]:
            assert by_role[score.role]["edge_accuracy"] == score.as_dict()["edge_accuracy"]
        # the fitted rule scores as with weights fitted on the other two styles only
        weights = fit_weights(store, fold["trained_on"], lexical)
        assert weights["unmarked_children"] == weights["children"] > 0  # these styles mark no reply link
        path = db.parent / f"w-{held}.json"
        path.write_text(json.dumps(weights))
        refit = evaluate_links(store, held, [FittedRelation(weights_path=str(path), embedder=lexical)])[0].as_dict()
        assert {k: by_role["offline:fitted-relation"][k] for k in ("edge_accuracy", "update_recall", "matrix")} == \
            {k: refit[k] for k in ("edge_accuracy", "update_recall", "matrix")}
        shipped = evaluate_links(store, held, [FittedRelation(embedder=lexical)])[0].as_dict()
        differs.append(shipped["matrix"] != refit["matrix"])
    assert any(differs)  # measured: 2 of the 3 folds build other edges than the shipped weights do
    store.close()
    # the worst style per role is its lowest held-out figure
    for role, entry in out["worst"].items():
        values = {f["held_out"]: next(r for r in f["roles"] if r["role"] == role)["edge_accuracy"]
                  for f in out["folds"]}
        assert entry["edge_accuracy"]["value"] == min(values.values())
        assert values[entry["edge_accuracy"]["style"]] == min(values.values())


def test_the_table_names_each_fold_and_the_worst_style(db, capsys):
    assert cli(["links", "--db", str(db), "--leave-one-out", "--corpus", "offsite", "--corpus", "standup",
                "--offline", "--embedder", "lexical", "--rule", "cue-overlap"]) == 0
    table = capsys.readouterr().out
    assert "Leave one style out over offsite, standup" in table and "worst style per role" in table
    assert "offline:fitted-relation" not in table  # --rule narrows the rules
    assert cli(["links", "--db", str(db), "--leave-one-out", "--corpus", "offsite", "--corpus", "standup",
                "--offline", "--embedder", "lexical"]) == 0
    table = capsys.readouterr().out
    assert "offline:revision-first (default)" in table and "standup: misses of the default: rooted-revision" in table


def test_a_fold_whose_other_styles_have_no_typed_edge_skips_the_refit_rules(db, capsys):
    from test_evaluation_links import LINKS, MESSAGES

    store = Store(db)
    store.replace_corpus("chat", CorpusData(MESSAGES, links=[("chan", c, p) for c, p in LINKS]), format="test")
    store.close()
    out = run_json(capsys, db, "chat", "offsite")
    chat, offsite = out["folds"]
    assert chat["fit_error"] is None and offsite["fit_error"] and "typed" in offsite["fit_error"]
    layered, fitted = offsite["roles"][:2]  # revision-first leaves what it does not decide to the fitted rule
    assert [layered["role"], fitted["role"]] == ["offline:revision-first", "offline:fitted-relation"]
    assert "skipped" in layered and "skipped" in fitted
    assert all("skipped" not in r for r in offsite["roles"][2:])  # the fixed rules are still scored
    assert out["worst"]["offline:fitted-relation"]["edge_accuracy"]["style"] == "chat"
    assert out["worst"]["offline:revision-first"]["edge_accuracy"]["style"] == "chat"


def test_sealed_splits_are_refused(db, capsys):
    store = Store(db)
    messages, links = STYLES["tickets"]
    store.replace_corpus("tickets-test", CorpusData(messages, links=links), format="test")
    store.close()
    assert cli(["links", "--db", str(db), "--leave-one-out", "--corpus", "offsite", "--corpus", "tickets-test",
                "--offline", "--embedder", "lexical"]) == 1
    assert "tickets-test" in capsys.readouterr().err
    assert cli(["links", "--db", str(db), "--leave-one-out", "--corpus", "offsite"]) == 1
    assert "at least two" in capsys.readouterr().err
    assert cli(["links", "--db", str(db), "--corpus", "offsite", "--corpus", "standup"]) == 1
    assert "--leave-one-out" in capsys.readouterr().err


def test_the_sealed_marker_wins_over_the_name():
    assert sealed_reason({}, "cases-test") and sealed_reason({}, "cases-dev") is None
    assert sealed_reason({"split": "test"}, "styles-chat") and sealed_reason({"sealed": True}, "x")
    assert sealed_reason({"split": "dev"}, "odd-test") is None
    # the columns as helper ledger-38 adds them: '' / None = no marker, so the name decides
    assert sealed_reason({"split": "", "sealed": False}, "cases-test")
    assert sealed_reason({"split": None, "sealed": None}, "cases-dev") is None
    assert sealed_reason({"split": "dev", "sealed": True}, "x")


@dataclass(frozen=True)
class Layered:  # a rule layered over the fitted one (as a precision-first rule may be)
    inner: FittedRelation = FittedRelation()
    backend: str = "test:layered"
    offline: bool = True


def test_the_fold_weights_reach_every_rule_that_reads_them():
    fitted, refit = with_weights(FittedRelation(), "/tmp/fold.json")
    assert refit and fitted.weights_path == "/tmp/fold.json"
    layered, refit = with_weights(Layered(), "/tmp/fold.json")
    assert refit and layered.inner.weights_path == "/tmp/fold.json"
    assert with_weights(CueOverlapRelation(), "/tmp/fold.json") == (CueOverlapRelation(), False)


def test_worst_styles_ignores_figures_a_style_does_not_measure():
    folds = [Fold("irc", ("a",), ({"role": "r", "edge_accuracy": 0.5, "update_precision": None,
                                   "update_recall": None},)),
             Fold("a", ("irc",), ({"role": "r", "edge_accuracy": 0.7, "update_precision": 0.4,
                                   "update_recall": 0.2},))]
    assert worst_styles(folds) == {"r": {"edge_accuracy": {"style": "irc", "value": 0.5},
                                         "update_precision": {"style": "a", "value": 0.4},
                                         "update_recall": {"style": "a", "value": 0.2}}}
