"""`python -m tmem import`: every format through the CLI, idempotent re-imports, bad input that leaves the
database unchanged, the size limit, and import speed at GroupMemBench scale."""
import json
import shutil
import time
from pathlib import Path

import pytest
from waiting import scaled

from tmem.cli import main
from tmem.corpora.imports import import_corpus
from tmem.store import CorpusError, Store

FIXTURES = Path(__file__).parent / "fixtures"
GOOD = {  # format -> (fixture path, scopes, messages, questions, evidence units, gold links)
    "locomo": (FIXTURES / "locomo" / "mini.json", 2, 7, 7, 7, 0),
    "irc": (FIXTURES / "irc", 1, 7, 0, 0, 4),
    "slack": (FIXTURES / "slack" / "acme", 1, 8, 0, 0, 0),
    "groupmembench": (FIXTURES / "groupmembench", 1, 6, 3, 0, 2),  # its 2 reply_to links become EXPAND gold
    "evermembench": (FIXTURES / "evermembench", 1, 5, 3, 4, 0),
}


@pytest.mark.parametrize("fmt", sorted(GOOD))
def test_cli_imports_each_format(fmt, tmp_path, capsys):
    path, scopes, messages, questions, units, links = GOOD[fmt]
    db = str(tmp_path / "cli.duckdb")
    assert main(["import", fmt, str(path), "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"corpus '{fmt}': {scopes:,} scopes, {messages:,} messages, {questions:,} questions, " \
           f"{units:,} evidence units, {links:,} gold links" in out
    assert "imported in" in out
    assert main(["import", fmt, str(path), "--db", db]) == 0  # idempotent: replaced, not doubled
    store = Store(db)
    assert store.corpora() == [fmt]
    assert store.counts(fmt) == {"scopes": scopes, "messages": messages, "questions": questions,
                                 "evidence_units": units, "gold_links": links}
    assert store.corpus_info(fmt)["format"] == fmt


def test_cli_prints_questions_by_type_and_notes(tmp_path, capsys):
    assert main(["import", "locomo", str(GOOD["locomo"][0]), "--db", str(tmp_path / "d.duckdb"),
                 "--corpus", "mini"]) == 0
    out = capsys.readouterr().out
    assert "  adversarial: 1" in out and "  temporal: 1" in out and "  open_domain: 2" in out
    assert "malformed evidence 'D9:9' unresolved" in out
    notes = Store(tmp_path / "d.duckdb").corpus_info("mini")["notes"]
    assert "malformed evidence 'D1:2; D2:1' repaired to D1:2, D2:1" in notes  # the full list is kept


def test_jsonl_is_wired_with_the_file_name_as_default_corpus(tmp_path, capsys):
    demo = tmp_path / "tiny.jsonl"
    demo.write_text('{"id": "m1", "text": "hello", "timestamp": "2025-01-01T10:00:00"}\n'
                    '{"kind": "question", "id": "q1", "text": "hi?", "gold_answer": "hello", '
                    '"gold_evidence": ["m1"]}\n')
    assert main(["import", "jsonl", str(demo), "--db", str(tmp_path / "d.duckdb")]) == 0
    assert "corpus 'tiny': 1 scopes, 1 messages, 1 questions, 1 evidence units" in capsys.readouterr().out


def test_cli_reports_errors_without_a_traceback(tmp_path, capsys):
    assert main(["import", "locomo", str(tmp_path / "missing.json"), "--db", str(tmp_path / "d.duckdb")]) == 1
    assert "no such file or folder" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- bad input
def _truncated(tmp: Path) -> Path:
    path = tmp / "mini.json"
    path.write_text(GOOD["locomo"][0].read_text()[:700])
    return path


def _locomo_edit(edit):
    def make(tmp: Path) -> Path:
        data = json.loads(GOOD["locomo"][0].read_text())
        edit(data)
        path = tmp / "mini.json"
        path.write_text(json.dumps(data, indent=1))
        return path
    return make


def _jsonl(text: str):
    def make(tmp: Path) -> Path:
        path = tmp / "bad.jsonl"
        path.write_text(text)
        return path
    return make


def _irc_link(tmp: Path) -> Path:
    shutil.copytree(FIXTURES / "irc", tmp / "irc")
    (tmp / "irc" / "2024-01-31_00.annotation.txt").write_text("0 2 -\n3 x -\n")
    return tmp / "irc"


def _slack_type(tmp: Path) -> Path:
    shutil.copytree(FIXTURES / "slack" / "acme", tmp / "acme")
    (tmp / "acme" / "users.json").write_text('{"id": "U1"}')
    return tmp / "acme"


M = '{"id": "m1", "text": "a", "timestamp": "2025-01-01T10:00:00"}\n'
BAD = {
    "truncated-json": ("locomo", _truncated, r"mini.json:\d+: not valid JSON"),
    "wrong-type": ("locomo", _locomo_edit(lambda d: d[0].update(qa="none")),
                   r"\[conversation 0\]: field 'qa' must be a list, got str"),
    "missing-field": ("locomo", _locomo_edit(lambda d: d[0]["conversation"]["session_1"][1].pop("dia_id")),
                      r"session_1\[1\]: required field 'dia_id' is missing"),
    "duplicate-id": ("locomo", _locomo_edit(lambda d: d[0]["conversation"]["session_2"][0].update(dia_id="D1:1")),
                     r"\[conversation 0\]: field 'dia_id': duplicate turn id 'D1:1'"),
    "duplicate-scope": ("locomo", _locomo_edit(lambda d: d[1].update(sample_id="conv-a")),
                        r"\[conversation 1\]: field 'sample_id': duplicate conversation 'conv-a'"),
    "bad-category": ("locomo", _locomo_edit(lambda d: d[0]["qa"][0].update(category=9)),
                     r"qa\[0\]: field 'category' must be one of 1-5"),
    "jsonl-duplicate": ("jsonl", _jsonl(M + M), r"bad.jsonl:2: field 'id': duplicate message id 'm1'"),
    "jsonl-unknown-evidence": ("jsonl", _jsonl(M + '{"kind": "question", "id": "q", "text": "?", '
                                                   '"gold_evidence": ["m9"]}\n'),
                               r"bad.jsonl:2: field 'gold_evidence': unknown message id 'm9'"),
    "jsonl-link-unknown-id": ("jsonl", _jsonl(M + '{"kind": "link", "child_id": "m1", "parent_id": "m0"}\n'),
                              r"bad.jsonl:2: field 'parent_id': unknown message id 'm0' in scope 'default'"),
    "jsonl-link-unknown-scope": ("jsonl", _jsonl(M + '{"kind": "link", "scope": "x", "child_id": "m1", '
                                                     '"parent_id": "m1"}\n'),
                                 r"bad.jsonl:2: field 'scope': the link names scope 'x', which has no messages"),
    "irc-annotation": ("irc", _irc_link, r"annotation.txt:2: expected 'LINE LINE -'"),
    "slack-wrong-type": ("slack", _slack_type, r"users.json: field 'top level' must be a list, got dict"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_leaves_the_previous_corpus_intact(case, fresh_store, tmp_path):
    fmt, make, message = BAD[case]
    good = GOOD[fmt][0] if fmt != "jsonl" else _jsonl(M)(tmp_path)
    import_corpus(fresh_store, fmt, good, corpus="c")
    before = (fresh_store.counts("c"), fresh_store.corpus_info("c"), fresh_store.messages_frame("c"))
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    with pytest.raises(CorpusError, match=message):
        import_corpus(fresh_store, fmt, make(bad_dir), corpus="c")
    assert fresh_store.counts("c") == before[0] and fresh_store.corpus_info("c") == before[1]
    assert fresh_store.messages_frame("c").equals(before[2])


DEMO_JSONL = Path(__file__).parent.parent / "data" / "demo.jsonl"


@pytest.mark.parametrize("fmt", ["locomo", "irc", "groupmembench", "evermembench", "slack", "jsonl"])
def test_files_over_the_size_limit_are_refused(fmt, fresh_store, monkeypatch):
    monkeypatch.setenv("TMEM_MAX_IMPORT_BYTES", "100")
    with pytest.raises(CorpusError, match="over the import limit of 100 bytes"):
        import_corpus(fresh_store, fmt, DEMO_JSONL if fmt == "jsonl" else GOOD[fmt][0])
    assert fresh_store.corpora() == []


def test_cli_refuses_jsonl_over_the_size_limit(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TMEM_MAX_IMPORT_BYTES", "100")
    assert main(["import", "jsonl", str(DEMO_JSONL), "--db", str(tmp_path / "d.duckdb")]) == 1
    assert "demo.jsonl: file is" in capsys.readouterr().err
    assert Store(tmp_path / "d.duckdb").corpora() == []


@pytest.mark.slow
def test_120k_messages_import_in_seconds(tmp_path, fresh_store):
    from tmem.demo import generate, write_groupmembench

    write_groupmembench(generate(7, 120_000, domains=4), tmp_path / "gmb")
    started = time.perf_counter()
    import_corpus(fresh_store, "groupmembench", tmp_path / "gmb")
    elapsed = time.perf_counter() - started
    assert fresh_store.counts("groupmembench")["messages"] == 120_000
    # the one speed budget the suite keeps (slow-marked): 60 s on an idle 2-core machine, x TMEM_TEST_SLOW on a busy one
    assert elapsed < scaled(60), f"import took {elapsed:.1f} s"
