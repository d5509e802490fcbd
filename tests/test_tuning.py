"""Dev/test discipline (tmem/evaluation/tuning.py): the dev/test table in docs/evaluation.md was measured with
the constants the code holds now, and any change to a tuned constant changes its group's hash; every look at a
sealed split is in data/sealed_looks.jsonl, and the docs state the ledger's count."""
import json
import os
import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from tmem import text as text_module
from tmem.cli import main as cli
from tmem.corpora.imports import import_corpus
from tmem.corpora.splits import Split
from tmem.evaluation import tuning
from tmem.models.embedders import LexicalEmbedder
from tmem.models.relation import revision_first
from tmem.models.relation import state as relation_state
from tmem.store import CorpusData, Store
from tmem.types import Message

DOCS = Path(__file__).resolve().parent.parent / "docs" / "evaluation.md"


def test_the_dev_test_table_matches_the_tuned_constants():
    stale = tuning.stale_groups(DOCS.read_text(encoding="utf-8"))
    if stale:
        lines = [f"{n}: tuned on {tuning.GROUPS[n].dev}, reported on {tuning.GROUPS[n].test}; re-measure with "
                 f"`{tuning.GROUPS[n].measure}`" for n in stale]
        pytest.fail("a tuned constant changed without the dev/test table in docs/evaluation.md being "
                    "re-measured:\n" + "\n".join(lines) + f"\nthen paste: {tuning.hash_line()}")


def test_the_table_has_a_dev_and_a_test_column_per_group():
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("## Dev/test discipline for tuned constants", 1)[1]
    header = next(line for line in table.splitlines() if line.startswith("| group"))
    assert "dev" in header and "test" in header
    for name in tuning.GROUPS:
        assert re.search(rf"^\| `{name}` \|", table, re.MULTILINE), name


def test_changing_a_constant_changes_its_group_hash(monkeypatch):
    before = {n: tuning.group_hash(n) for n in tuning.GROUPS}
    monkeypatch.setattr(text_module, "STOPWORDS", text_module.STOPWORDS | {"budget"})
    assert tuning.group_hash("stopwords") != before["stopwords"]
    assert tuning.group_hash("relation") == before["relation"]
    if hasattr(relation_state, "CALIBRATION"):
        changed = dict(relation_state.CALIBRATION) | {"reply": 0.5}
        monkeypatch.setattr(relation_state, "CALIBRATION", changed)
        assert tuning.group_hash("relation") != before["relation"]
    from tmem.models import offline

    fields = offline.OfflineEvidenceUtility.__dataclass_fields__
    monkeypatch.setattr(fields["max_key"], "default", 7)
    assert tuning.group_hash("evidence_utility") != before["evidence_utility"]


def test_every_weight_that_decides_is_in_the_relation_hash(monkeypatch):
    """The routing record (`unmarked_by_party`) and the update vector decide edges, so editing them by hand is a new
    version; what the weights record of their own fit (timing, notes) is not."""
    before = tuning.group_hash("relation")
    loaded = tuning.fitted.load_weights(str(tuning.fitted.WEIGHTS))
    for part, value in (("unmarked_by_party", {"few": {"children": 1, "fitted_right": 1, "state_right": 0}}),
                        ("update", {"bias": 9.0}), ("seconds", 1.0), ("about", "edited")):
        monkeypatch.setattr(tuning.fitted, "load_weights", lambda path, part=part, value=value: loaded | {part: value})
        changed = tuning.group_hash("relation") != before
        assert changed == (part not in tuning.WEIGHTS_PROVENANCE), part
    assert {"unmarked_by_party", "update", "pair", "root", "label"} <= set(tuning._relation()["fitted"])


def test_a_relation_constant_is_hashed_in_its_own_module(monkeypatch):
    """Two relation modules may hold a constant of one name (one importing the other's): each is hashed under its
    module, so neither hides a change to the other."""
    before = tuning.group_hash("relation")
    monkeypatch.setattr(revision_first, "CALIBRATION", {"reply": 0.0}, raising=False)
    after_copy = tuning.group_hash("relation")
    monkeypatch.setattr(relation_state, "CALIBRATION", dict(relation_state.CALIBRATION) | {"reply": 0.5})
    assert before != after_copy != tuning.group_hash("relation")
    assert "CALIBRATION" in tuning._relation()["module"]["state"]


def test_every_relation_module_is_in_the_relation_hash(monkeypatch):
    """The hashed modules are found, not listed: every .py file of tmem/models/relation/ is one, and a constant of a
    module no list ever named (follow_ups.py's) changes the hash."""
    folder = Path(revision_first.__file__).parent
    files = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert set(tuning._relation()["module"]) == files and {"follow_ups", "query"} <= files
    from tmem.models.relation import follow_ups, query
    before = tuning.group_hash("relation")
    query._query_vector(LexicalEmbedder(), "when is the launch?")  # a run-time cache filled: no constant changed
    assert tuning.group_hash("relation") == before
    monkeypatch.setattr(follow_ups, "POST_RELEVANCE", follow_ups.POST_RELEVANCE + 0.05)
    assert tuning.group_hash("relation") != before


def test_documented_hashes_are_parsed():
    text = "x <!-- tuned: a=1 b=2 --> y"
    assert tuning.documented_hashes(text) == {"a": "1", "b": "2"}
    assert set(tuning.stale_groups(text)) == set(tuning.GROUPS)


def test_command_prints_the_hash_line_and_checks(tmp_path, capsys):
    assert cli(["tuning"]) == 0
    assert tuning.hash_line() in capsys.readouterr().out
    stale = tmp_path / "e.md"
    stale.write_text("<!-- tuned: stopwords=0 -->")
    assert cli(["tuning", "--check", str(stale)]) == 1
    assert "stale for evidence_utility, stopwords, relation" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ sealed looks
def sealed_db(tmp_path: Path) -> Path:
    """The GroupMemBench fixture (4 annotated children) under tmp_path/split/held, marked sealed test."""
    folder = tmp_path / "split" / "held"
    shutil.copytree(Path(__file__).resolve().parent / "fixtures" / "groupmembench", folder)
    (folder / "split.json").write_text('{"split": "test", "sealed": true}', encoding="utf-8")
    db = tmp_path / "x.duckdb"
    store = Store(db)
    import_corpus(store, "groupmembench", folder, corpus="c1")
    import_corpus(store, "groupmembench", folder, corpus="renamed")  # the same split under another name
    store.close()
    return db


def test_the_suite_never_writes_the_real_ledger():
    assert os.environ[tuning.LEDGER_ENV] and tuning.ledger_path() != tuning.LEDGER


def test_a_sealed_look_is_recorded_and_a_second_needs_a_reason(tmp_path, capsys, monkeypatch):
    ledger = tmp_path / "looks.jsonl"
    monkeypatch.setenv(tuning.LEDGER_ENV, str(ledger))
    db = sealed_db(tmp_path)
    links = ["links", "--db", str(db), "--embedder", "lexical", "--json"]
    assert cli([*links, "--corpus", "c1"]) == 0
    scored = json.loads(capsys.readouterr().out)["roles"]
    [look] = tuning.read_looks(ledger)
    assert look["split_of"] == "split/held" and look["corpus"] == "c1" and look["hash"] == tuning.group_hash("relation")
    assert look["default_role"] == "offline:revision-first" and look["commit"] and look["time"].endswith("Z")
    assert look["figures"]["offline:revision-first"] == {k: scored[0][k] for k in tuning.FIGURES}
    assert look["figures"]["offline:revision-first"]["children"] == 4 and "again" not in look
    # the same split under another corpus name, same constants: refused before scoring, one line
    assert cli([*links, "--corpus", "renamed"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "sealed split split/held was already scored" in captured.err and "--again REASON" in captured.err
    assert len(tuning.read_looks(ledger)) == 1
    assert cli([*links, "--corpus", "renamed", "--again", "checking the ledger"]) == 0
    assert [x.get("again") for x in tuning.read_looks(ledger)] == [None, "checking the ledger"]
    assert tuning.look_counts(tuning.read_looks(ledger)) == {"split/held": 2}


def test_changed_relation_constants_are_a_new_look_without_a_reason(tmp_path, monkeypatch):
    monkeypatch.setenv(tuning.LEDGER_ENV, str(tmp_path / "looks.jsonl"))
    split = Split("test", True, "cases/test")
    tuning.record_look(split, "c", [], {})
    with pytest.raises(tuning.SealedLookRefused):
        tuning.check_look(split)
    changed = dict(relation_state.CALIBRATION) | {"reply": 0.5}
    monkeypatch.setattr(relation_state, "CALIBRATION", changed)
    assert tuning.check_look(split) == tuning.group_hash("relation")  # a new version: its first look


def test_a_non_sealed_split_leaves_the_ledger_alone(tmp_path, monkeypatch):
    ledger = tmp_path / "looks.jsonl"
    monkeypatch.setenv(tuning.LEDGER_ENV, str(ledger))
    db = tmp_path / "x.duckdb"
    msgs = [Message("a", "s", "we ship on Monday", datetime(2024, 1, 1)),
            Message("b", "s", "ok, Monday", datetime(2024, 1, 2))]
    Store(db).replace_corpus("plain", CorpusData(msgs, links=[("s", "b", "a")]), format="test")
    assert cli(["links", "--db", str(db), "--corpus", "plain", "--embedder", "lexical", "--json"]) == 0
    assert not ledger.exists()


def test_a_bad_ledger_line_is_one_error_naming_the_line(tmp_path):
    ledger = tmp_path / "looks.jsonl"
    ledger.write_text('{"split_of": "a/b", "looks": 3, "reconstructed": true}\n{"split_of": \n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"looks\.jsonl:2: not a JSON line"):
        tuning.read_looks(ledger)
    ledger.write_text('{"split_of": "a/b", "looks": 3, "reconstructed": true}\n{"time": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"looks\.jsonl:2: field 'split_of' is missing"):
        tuning.read_looks(ledger)
    ledger.write_text('{"split_of": "a/b", "looks": 3, "reconstructed": true}\n{"split_of": "a/b"}\n',
                      encoding="utf-8")
    assert tuning.look_counts(tuning.read_looks(ledger)) == {"a/b": 4}


def test_the_docs_state_the_sealed_looks_the_ledger_holds():
    """docs/evaluation.md, "Sealed looks": one row per sealed split, its cumulative looks, how many of them are
    reconstructed and how many the tool recorded, all counted from data/sealed_looks.jsonl."""
    looks = tuning.read_looks(tuning.LEDGER)
    section = DOCS.read_text(encoding="utf-8").split("### Sealed looks", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| (\d+) \| (\d+) \| (\d+) \|$", section, re.MULTILINE)
    documented = {split: tuple(map(int, counts)) for split, *counts in rows}
    ledger = {}
    for split, total in tuning.look_counts(looks).items():
        rebuilt = sum(int(x.get("looks", 1)) for x in looks if x["split_of"] == split and x.get("reconstructed"))
        ledger[split] = (total, rebuilt, total - rebuilt)
    assert documented == ledger, f"docs/evaluation.md says {documented}, data/sealed_looks.jsonl holds {ledger}"
    assert ledger.get("cases/test", (0,))[0] >= 9  # issue 38: scored at least nine times before the ledger


def test_the_docs_sealed_figures_are_the_ledgers():
    """docs/evaluation.md's table of this version's sealed look states, per split and role, the edge accuracy and
    UPDATE precision / recall the tool wrote into data/sealed_looks.jsonl when it scored the split (a sealed figure
    cannot be re-measured, so the ledger is its source)."""
    section = DOCS.read_text(encoding="utf-8").split("### Sealed looks", 1)[1].split("\n#", 1)[0]
    roles = ("offline:revision-first", "offline:fitted-relation", "offline:state-relation",
             "offline:cue-overlap-relation")
    rows = re.findall(r"^\| ([a-z]+/test) \((\d+)\) \|(.+)\|$", section, re.MULTILINE)
    by_split = {x["split_of"]: x for x in tuning.read_looks(tuning.LEDGER) if x.get("figures")}
    assert sorted(split for split, *_ in rows) == sorted(by_split)  # every split the tool scored, each once
    hashes = {by_split[split]["hash"] for split in by_split}
    assert hashes == {tuning.group_hash("relation")}, "the table is the current version's look"
    for split, children, cells in rows:
        figures = by_split[split]["figures"]
        for role, cell in zip(roles, cells.split("|"), strict=True):
            edge, precision, recall = re.fullmatch(r"\s*\**([\d.]+) · ([\d.]+)/([\d.]+)\**\s*", cell).groups()
            got = figures[role]
            assert got["children"] == int(children)
            for stated, value in ((edge, got["edge_accuracy"]), (precision, got["update_precision"] or 0.0),
                                  (recall, got["update_recall"])):
                assert abs(float(stated) - value) < 0.0006, (split, role, stated, value)
