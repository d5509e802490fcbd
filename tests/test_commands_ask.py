"""`python -m tmem ask`: the forest printout, the JSON trace, stored traces, and clear errors."""
import re

import pytest

from tmem.cli import main
from tmem.corpora.jsonl import load_jsonl_file
from tmem.demo.golden import write_jsonl
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
    out, err = capsys.readouterr()
    # the first question of a fresh database embeds the messages its windows rank (not the whole scope), and says
    # so; structuring reports in quarters
    from tmem.demo.golden import MESSAGES

    embedded = [int(n) for n, total in re.findall(r"embedding messages: (\d+)/(\d+)$", err, re.MULTILINE)
                if n == total]
    assert embedded and sum(embedded) < len(MESSAGES)
    assert 2 <= len(re.findall(r"^  structuring: ", err, re.MULTILINE)) <= 5
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


def test_ask_reports_the_response_cache_hit_rate(db, capsys, monkeypatch):
    from tmem.evaluation.scripted_server import FaultServer, scripted_reply

    server = FaultServer(default=("reply", scripted_reply))
    for name, value in {"TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": server.base_url,
                        "TMEM_EMBEDDER": "lexical"}.items():
        monkeypatch.setenv(name, value)
    try:
        assert main(["ask", "--db", db, "--corpus", "g", "--question", "q1", "--no-save"]) == 0
        first = capsys.readouterr().out
        calls = len(server.requests)
        assert main(["ask", "--db", db, "--corpus", "g", "--question", "q1", "--no-save"]) == 0
        second = capsys.readouterr().out
    finally:
        server.close()
    assert calls > 0 and len(server.requests) == calls  # the second ask is served from the cache
    hits, misses = map(int, re.search(r"^Response cache: (\d+) hits, (\d+) misses \(\d+% hit rate\)$", first,
                                      re.MULTILINE).groups())
    assert misses == calls
    assert f"Response cache: {hits + misses} hits, 0 misses (100% hit rate)" in second
    assert main(["ask", "--db", db, "--corpus", "g", "--question", "q1", "--no-save", "--offline"]) == 0
    assert "Response cache" not in capsys.readouterr().out  # offline roles have no cache to report


def test_cli_and_app_store_the_same_adhoc_trace(db, capsys):
    """An ad-hoc question asked in the terminal is the app's question: same id (a hash of scope, text and user),
    same stored trace, which the app finds without re-running; another question never overwrites it."""
    from tmem import api
    from tmem.demo.golden import SCOPE

    text = "Who owns the regression pass?"
    assert main(["ask", "--db", db, "--corpus", "g", "--text", text, "--user", "U", "--json"]) == 0
    cli_trace = Trace.from_json(capsys.readouterr().out)
    store = api.open_store(db, demo=False)
    question = api.adhoc_question(SCOPE, text, "U")  # what the Question page builds from its text box
    assert cli_trace.question == question and question.id.startswith("adhoc-")
    roles = api.build_roles({}, store)  # the app's roles with no backend overrides
    stored = api.find_trace(store, "g", question, "full", api.resolve_config("full"), roles)
    assert stored is not None and stored.to_json() == cli_trace.to_json()
    app_trace = api.run_and_store(store, "g", question, "full", api.resolve_config("full"), roles, save=False)
    assert (app_trace.evidence_ids, app_trace.nodes, app_trace.answers, app_trace.config_hash) == \
        (cli_trace.evidence_ids, cli_trace.nodes, cli_trace.answers, cli_trace.config_hash)
    store.close()
    assert main(["ask", "--db", db, "--corpus", "g", "--text", "Who drafted the newsletter?", "--user", "U"]) == 0
    store = Store(db)
    assert len(store.trace_index("g")) == 2  # two ad-hoc questions, two traces ("adhoc" used to be shared)
    store.close()


def test_a_link_overrides_value_works_with_set(db, capsys):
    """One override grammar: the value of the app's cfg= parameter pasted into --set."""
    from tmem.config import format_overrides

    link = format_overrides({"retrieval.k": 5, "retrieval.metadata_fields": ("topic", "author")})
    assert main(["ask", "--db", db, "--corpus", "g", "--question", "q1", "--json", "--no-save", "--set", link]) == 0
    trace = Trace.from_json(capsys.readouterr().out)
    assert len(trace.anchors) == 5 and trace.config["retrieval"]["metadata_fields"] == ["topic", "author"]
