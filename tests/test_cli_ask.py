"""`python -m tmem ask`: the forest printout, the JSON trace, stored traces, and clear errors."""
import pytest
from golden import write_jsonl

from tmem.cli import main
from tmem.corpora.jsonl import load_jsonl_file
from tmem.store import Store
from tmem.types import Trace


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "cli.duckdb"
    write_jsonl(tmp_path / "golden.jsonl")
    store = Store(path)
    store.replace_corpus("g", load_jsonl_file(tmp_path / "golden.jsonl"), format="jsonl")
    store.close()
    return str(path)


def test_ask_prints_the_forest_and_answers(db, capsys):
    assert main(["ask", "--db", db, "--corpus", "g", "--question", "q1"]) == 0
    out = capsys.readouterr().out
    assert "UPDATE  [R] m04" in out and "forest answer (offline):" in out and "verdict: correct" in out
    assert "Backends: evidence_utility=offline:" in out
    store = Store(db)
    assert len(store.trace_index("g")) == 1


def test_ask_json_is_a_trace(db, capsys):
    assert main(["ask", "--db", db, "--corpus", "g", "--question", "q1", "--variant", "flat", "--json",
                 "--no-save"]) == 0
    trace = Trace.from_json(capsys.readouterr().out)
    assert trace.variant == "flat" and trace.answers[0].presentation == "flat"


def test_ask_free_text(db, capsys):
    assert main(["ask", "--db", db, "--corpus", "g", "--text", "Who owns the regression pass?", "--user", "U",
                 "--no-save"]) == 0
    assert "regression pass" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--question", "nope"], "no question 'nope'"),
    (["--question", "q1", "--text", "x"], "exactly one of"),
    (["--text", "x", "--scope", "ghost"], "no scope 'ghost'"),
])
def test_ask_errors_are_clear(db, capsys, args, message):
    assert main(["ask", "--db", db, "--corpus", "g", *args]) == 1
    assert message in capsys.readouterr().err


def test_unknown_corpus(db, capsys):
    assert main(["ask", "--db", db, "--corpus", "nope", "--question", "q1"]) == 1
    assert "unknown corpus 'nope'" in capsys.readouterr().err
