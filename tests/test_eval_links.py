"""`python -m tmem links`: structuring's parent choice against human reply links, computed by hand on a tiny
channel, and on the real Ubuntu IRC dev+test logs (slow-marked; a few seconds)."""
import json
from datetime import datetime

import pytest

from tmem.cli import main as cli
from tmem.evaluation.links import evaluate_links, link_items, previous_message_baseline, score_links
from tmem.models.base import RelationResult
from tmem.types import EXPAND, Message, RelationChoice


def m(mid, minute, author, text):
    return Message(mid, "chan", text, datetime(2024, 1, 1, 9, minute), author)


MESSAGES = [
    m("0", 0, "alice", "anyone know how to fix wifi after suspend?"),
    m("1", 1, "bob", "alice: try sudo modprobe -r iwlwifi"),
    m("2", 2, "carol", "how do I install vim?"),
    m("3", 3, "dave", "carol: sudo apt install vim"),
    m("4", 3, "alice", "bob: that fixed my wifi, thanks"),
    m("5", 3, "eve", "dave: thanks from me too"),
]
LINKS = [("1", "0"), ("3", "2"), ("4", "1"), ("5", "3"), ("2", "2")]  # (child, parent); 2-2 starts a thread


class AddresseeRole:
    """Picks the candidate whose author the child addresses ("nick: ..."); NONE otherwise."""

    backend, offline = "test:addressee", True

    def choose_parent(self, question, child, candidates, scope):
        nick = child.text.split(":")[0]
        return RelationResult(choices=tuple(RelationChoice(c.id, EXPAND, 0.9) for c in candidates
                                            if c.author == nick)[-1:])


def test_candidates_follow_eq4_and_same_minute_parents_are_not_covered():
    items = {i.child.id: i for i in link_items(MESSAGES, LINKS, 30, 20)}
    assert sorted(items) == ["1", "3", "4", "5"]  # self-links are no parents
    assert [c.id for c in items["4"].candidates] == ["0", "1", "2"]  # strictly earlier minutes only
    assert [i.covered for i in items.values()] == [True, True, True, False]  # 5's parent 3 is the same minute
    limited = {i.child.id: i for i in link_items(MESSAGES, LINKS, 30, 1)}
    assert [c.id for c in limited["4"].candidates] == ["2"] and not limited["4"].covered


def test_scores_by_hand():
    """Children 1, 3, 4 are scored (5 is not covered). The addressee role picks 0 for 1, 2 for 3 and 1 for 4: all
    right. The previous-candidate baseline picks 0 for 1 (right), 2 for 3 (right) and 2 for 4 (wrong)."""
    items = link_items(MESSAGES, LINKS, 30, 20)
    s = score_links(items, AddresseeRole(), None)
    assert (s.children, s.correct, s.roots, s.wrong_parent, s.linked) == (3, 3, 0, 0, 4)
    assert s.as_dict()["accuracy"] == 1.0 and s.as_dict()["coverage"] == 0.75
    b = previous_message_baseline(items)
    assert (b.children, b.correct, b.wrong_parent) == (3, 2, 1)


def test_links_cli_on_a_stored_channel(tmp_path, capsys):
    from tmem.store import CorpusData, Store

    db = tmp_path / "c.duckdb"
    store = Store(db)
    store.replace_corpus("chat", CorpusData(MESSAGES, links=[("chan", c, p) for c, p in LINKS if c != p]),
                         format="test")
    totals = evaluate_links(store, "chat", [AddresseeRole()])
    assert [(t.role, t.children, t.correct) for t in totals] == [("test:addressee", 3, 3),
                                                                  ("baseline: previous candidate", 3, 2)]
    store.close()
    assert cli(["links", "--db", str(db), "--corpus", "chat", "--json", "--offline"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["candidates"] == 20 and [r["role"] for r in out["roles"]] == [
        "offline:cue-overlap-relation", "baseline: previous candidate"]
    assert set(out["roles"][0]) >= {"accuracy", "wrong_root", "wrong_parent", "coverage", "children"}


def test_a_corpus_without_links_is_refused(tmp_path, capsys):
    from tmem.store import CorpusData, Store

    db = tmp_path / "c.duckdb"
    Store(db).replace_corpus("plain", CorpusData(MESSAGES), format="test")
    assert cli(["links", "--db", str(db), "--corpus", "plain"]) == 1
    assert "no gold reply links" in capsys.readouterr().err


@pytest.mark.slow
def test_real_irc_links(tmp_path, capsys):
    from conftest import benchmark_db

    db = benchmark_db(tmp_path, "irc", "ubuntu-irc-disentanglement", "irc")
    assert cli(["links", "--db", str(db), "--corpus", "irc", "--json", "--offline"]) == 0
    out = json.loads(capsys.readouterr().out)
    offline, baseline = out["roles"]
    with capsys.disabled():
        print(f"\nIRC links: {offline}\n  {baseline}")
    assert offline["linked_children"] > 5000 and offline["children"] == baseline["children"]
    # the importer orders each minute by the log, so nearly every gold parent is a candidate (0.50 without)
    assert offline["coverage"] > 0.9
    # regression guards on the measured figures (0.469 offline, 0.344 previous-candidate baseline)
    assert offline["accuracy"] > baseline["accuracy"] + 0.05 and offline["wrong_parent"] < 0.3


def test_an_llm_relation_role_is_scored_beside_the_offline_one(tmp_path, capsys, monkeypatch):
    """With a relation model configured (here a scripted local OpenAI-compatible fake that always links a child to
    its latest candidate), `links` scores it beside the offline role: it must then equal the baseline."""
    from llm_server import FaultServer, scripted_reply

    from tmem.store import CorpusData, Store

    db = tmp_path / "c.duckdb"
    store = Store(db)
    store.replace_corpus("chat", CorpusData(MESSAGES, links=[("chan", c, p) for c, p in LINKS if c != p]),
                         format="test")
    store.close()
    monkeypatch.setenv("TMEM_TEST_API_KEY", "sk-test")
    server = FaultServer(default=("reply", scripted_reply))
    try:
        assert cli(["links", "--db", str(db), "--corpus", "chat", "--json", "--relation-model", "fault-model",
                    "--relation-base-url", server.base_url, "--llm-api-key-env", "TMEM_TEST_API_KEY",
                    "--embedder", "lexical"]) == 0
    finally:
        server.close()
    offline, llm, baseline = json.loads(capsys.readouterr().out)["roles"]
    assert offline["role"].startswith("offline:") and llm["role"].startswith("openai:fault-model@")
    assert {k: llm[k] for k in ("children", "accuracy", "wrong_root")} == \
        {k: baseline[k] for k in ("children", "accuracy", "wrong_root")}
    assert llm["errors"] == 0
