"""`python -m tmem links`: structuring against gold edges, computed by hand on a tiny IRC-like channel (untyped
reply links, a self-link = a gold root) and a tiny typed case (UPDATE / EXPAND / ROOT); the real Ubuntu IRC logs
are slow-marked (a few seconds)."""
import json
from datetime import datetime

import pytest

from tmem.cli import main as cli
from tmem.evaluation.links import (
    LinkScore,
    evaluate_links,
    gold_children,
    link_items,
    previous_message_baseline,
    score_links,
    score_trace,
)
from tmem.models.base import RelationResult
from tmem.types import EXPAND, ROOT, UPDATE, Edge, Message, ParentDecision, Question, RelationChoice, Trace


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

    def label_pairs(self, question, child, candidates, scope):
        nick = child.text.split(":")[0]
        return RelationResult(choices=tuple(RelationChoice(c.id, EXPAND, 0.9) for c in candidates
                                            if c.author == nick)[-1:])


def test_candidates_follow_eq4_and_same_minute_parents_are_not_covered():
    items = {i.child.id: i for i in link_items(MESSAGES, LINKS, 30, 20)}
    assert sorted(items) == ["1", "2", "3", "4", "5"]  # the self-link makes 2 a gold root, no parent
    assert items["2"].is_root and items["2"].covered and items["2"].relation == ROOT
    assert [c.id for c in items["4"].candidates] == ["0", "1", "2"]  # strictly earlier minutes only
    assert [items[c].covered for c in "1345"] == [True, True, True, False]  # 5's parent 3 is the same minute
    limited = {i.child.id: i for i in link_items(MESSAGES, LINKS, 30, 1)}
    assert [c.id for c in limited["4"].candidates] == ["2"] and not limited["4"].covered


def test_scores_by_hand():
    """Children 1, 2 (a root), 3, 4 are scored (5 is not covered). The addressee role picks 0 for 1, 2 for 3 and 1
    for 4, and nothing for 2 (carol addresses nobody): all four right. The previous-candidate baseline picks 0 for
    1 (right), 1 for 2 (a root: wrong), 2 for 3 (right) and 2 for 4 (wrong)."""
    items = link_items(MESSAGES, LINKS, 30, 20)
    s = score_links(items, AddresseeRole(), None)
    assert (s.children, s.correct, s.roots, s.wrong_parent, s.linked) == (4, 4, 1, 0, 5)
    d = s.as_dict()
    assert d["accuracy"] == 1.0 and d["link_accuracy"] == 1.0 and d["root_rate"] == 1.0 and d["coverage"] == 0.8
    assert d["update_precision"] is None and d["update_recall"] is None  # untyped gold: no UPDATE to score
    assert d["confusion"] == {"LINK->EXPAND": 3, "ROOT->ROOT": 1}
    b = previous_message_baseline(items)
    assert (b.children, b.correct, b.wrong_parent, b.spurious_parent) == (4, 2, 1, 1)
    assert b.as_dict()["root_rate"] == 0.0 and b.as_dict()["link_accuracy"] == round(2 / 3, 4)


T = datetime(2025, 3, 1, 9)
CASE = [Message(mid, "Case", text, T.replace(day=day), author, topic="freeze", reply_to=reply)
        for mid, day, author, text, reply in [
            ("d", 1, "rm", "Code freeze Thursday 18:00.", None),
            ("c", 2, "qa", "Thursday is too early, the suite is red?", "d"),
            ("r", 3, "rm", "Freeze moves to Tuesday 18:00.", "c"),
            ("e", 4, "qa", "Nothing merges after 16:00 on freeze day.", None),
            ("n", 5, "x", "Lunch anyone?", None)]]
CASE_EDGES = [("d", None, "ROOT"), ("c", "d", "EXPAND"), ("r", "d", "UPDATE"), ("e", "r", "EXPAND"),
              ("n", None, "ROOT")]


class ReplyRole:
    """EXPAND to what the child replies to (a reply-only rule: it cannot see that r revises d)."""

    backend, offline = "test:reply", True

    def label_pairs(self, question, child, candidates, scope):
        return RelationResult(choices=tuple(RelationChoice(c.id, EXPAND, 0.8) for c in candidates
                                            if c.id == child.reply_to))


def test_typed_gold_edges_by_hand():
    """The reply-only role: d root (right), c EXPAND d (right), r EXPAND c (gold UPDATE d: wrong parent and label),
    e root (gold EXPAND r: wrong), n root (right). Edge accuracy 3/5; no UPDATE built, one expected."""
    items = gold_children(CASE, CASE_EDGES, None, 0)
    assert [i.relation for i in items] == ["ROOT", "EXPAND", "UPDATE", "EXPAND", "ROOT"]
    assert [c.id for c in items[3].candidates] == ["d", "c", "r"]  # no window, no cap
    d = score_links(items, ReplyRole(), None).as_dict()
    assert (d["children"], d["accuracy"], d["edge_accuracy"], d["relation_accuracy"]) == (5, 0.6, 0.6, 0.6)
    assert d["update_recall"] == 0.0 and d["update_precision"] is None and d["root_rate"] == 1.0
    assert d["confusion"] == {"EXPAND->EXPAND": 1, "EXPAND->ROOT": 1, "ROOT->ROOT": 2, "UPDATE->EXPAND": 1}
    # reliability: the three "no eligible candidate / NONE" roots and the two EXPANDs, by confidence bin
    assert sum(b["n"] for b in d["reliability"]) == 5


def test_update_precision_and_recall():
    s = LinkScore("x")
    item = gold_children(CASE, CASE_EDGES, None, 0)
    s.add(item[2], ParentDecision("r", ("d", "c"), (), "d", UPDATE, 0.9))  # right UPDATE
    s.add(item[1], ParentDecision("c", ("d",), (), "d", UPDATE, 0.6))  # an EXPAND built as UPDATE
    d = s.as_dict()
    assert (d["update_precision"], d["update_recall"], d["edge_accuracy"], d["link_accuracy"]) == (0.5, 1.0, 0.5, 1.0)


def test_score_trace_scores_the_evidence_only():
    """Per question: children in the evidence are scored against their gold edge; a gold parent outside the
    evidence cannot be chosen, so that child is skipped."""
    q = Question("q", "Case", "When is the freeze?", None, None)
    decisions = (ParentDecision("d", (), (), None, ROOT, 1.0), ParentDecision("r", ("d",), (), "d", UPDATE, 0.6),
                 ParentDecision("e", ("d", "r"), (), "d", EXPAND, 0.4))
    trace = Trace(q, "full", "h", "cases", evidence_ids=("d", "r", "e"), decisions=decisions,
                  edges=(Edge("d", "r", UPDATE, 0.6), Edge("d", "e", EXPAND, 0.4)))
    s = score_trace(trace, CASE_EDGES)
    assert (s.children, s.edge_right) == (3, 2)  # d and r right; e's gold parent is r, it got d
    assert [r["child"] for r in s.rows if not r["right"]] == ["e"]


def test_links_cli_on_a_stored_channel(tmp_path, capsys):
    from tmem.store import CorpusData, Store

    db = tmp_path / "c.duckdb"
    store = Store(db)
    store.replace_corpus("chat", CorpusData(MESSAGES, links=[("chan", c, p) for c, p in LINKS]), format="test")
    assert store.gold_links("chat", "chan") == [(c, p) for c, p in LINKS if c != p]  # roots are not links
    assert ("2", None, "ROOT") in store.gold_edges("chat", "chan")
    totals = evaluate_links(store, "chat", [AddresseeRole()], window=30, candidates=20)
    assert [(t.role, t.children, t.correct) for t in totals] == [("test:addressee", 4, 4),
                                                                  ("baseline: previous candidate", 4, 2)]
    store.close()
    assert cli(["links", "--db", str(db), "--corpus", "chat", "--json", "--offline", "--embedder", "lexical"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["role"] for r in out["roles"]] == [  # the default role (structuring.relation_rule) first
        "offline:revision-first", "offline:fitted-relation", "offline:state-relation",
        "offline:cue-overlap-relation", "baseline: previous candidate"]
    assert [r["default"] for r in out["roles"]] == [True, False, False, False, False]
    assert set(out["roles"][0]) >= {"accuracy", "link_accuracy", "root_rate", "edge_accuracy", "update_precision",
                                    "confusion", "reliability", "wrong_root", "wrong_parent", "coverage", "children"}
    assert cli(["links", "--db", str(db), "--corpus", "chat", "--offline", "--embedder", "lexical",
                "--rule", "cue-overlap"]) == 0
    table = capsys.readouterr().out
    assert "offline:cue-overlap-relation" in table and "offline:state-relation" not in table
    assert "(default)" not in table
    assert cli(["links", "--db", str(db), "--corpus", "chat", "--offline", "--embedder", "lexical",
                "--set", "structuring.relation_rule=state"]) == 0
    assert "offline:state-relation (default)" in capsys.readouterr().out


def test_links_samples_every_nth_child_of_each_scope_and_states_the_interval(tmp_path, capsys):
    """Two copies of the channel: --every 2 scores 2 of each scope's 4 children (8 -> 4), states the sample and an
    interval over the 2 scopes that holds each accuracy; a full run says how far it is, scope by scope."""
    from dataclasses import replace

    from tmem.store import CorpusData, Store

    copy = [replace(x, id=f"b{x.id}", scope="chan2") for x in MESSAGES]
    links = [("chan", c, p) for c, p in LINKS] + [("chan2", f"b{c}", f"b{p}") for c, p in LINKS]
    db = tmp_path / "c.duckdb"
    Store(db).replace_corpus("chat", CorpusData(MESSAGES + copy, links=links), format="test")
    base = ["links", "--db", str(db), "--corpus", "chat", "--offline", "--embedder", "lexical", "--rule", "state"]
    assert cli([*base, "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert [r["children"] for r in full["roles"]] == [8, 8] and "interval" not in full["roles"][0]
    assert cli([*base, "--json", "--every", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["every"] == 2 and [r["children"] for r in out["roles"]] == [4, 4]
    assert all(r["interval"][0] <= r["accuracy"] <= r["interval"][1] for r in out["roles"])
    assert cli([*base, "--every", "2"]) == 0
    shown = capsys.readouterr()
    assert "Sample (--every 2): 95 % interval of each accuracy over 2 scopes:" in shown.out
    assert "  1/2 scopes (" in shown.err and "s left)" in shown.err and "  2/2 scopes (" in shown.err


def test_a_corpus_without_links_is_refused(tmp_path, capsys):
    from tmem.store import CorpusData, Store

    db = tmp_path / "c.duckdb"
    Store(db).replace_corpus("plain", CorpusData(MESSAGES), format="test")
    assert cli(["links", "--db", str(db), "--corpus", "plain"]) == 1
    assert "no gold edges" in capsys.readouterr().err


@pytest.mark.slow
def test_real_irc_links(tmp_path, capsys):
    from conftest import benchmark_db

    db = benchmark_db(tmp_path, "irc", "ubuntu-irc-disentanglement", "irc")
    # the lexical embedder keeps this a few seconds (MiniLM would embed 25,534 lines first; docs give both)
    assert cli(["links", "--db", str(db), "--corpus", "irc", "--json", "--offline", "--embedder", "lexical"]) == 0
    out = json.loads(capsys.readouterr().out)
    default, fitted, offline, cue, baseline = out["roles"]
    with capsys.disabled():
        print(f"\nIRC links: {offline}\n  {fitted}\n  {cue}\n  {baseline}")
    assert offline["linked_children"] > 5000 and offline["children"] == baseline["children"]
    # the importer orders each minute by the log, so nearly every gold parent is a candidate (0.50 without)
    assert offline["coverage"] > 0.9
    # regression guards on the measured figures (docs/evaluation.md): the state rule beats the cue-overlap
    # baseline, which beats the previous candidate; gold roots are credited
    assert offline["accuracy"] > cue["accuracy"] + 0.05 and cue["accuracy"] > baseline["accuracy"] + 0.05
    assert offline["accuracy"] > 0.6 and offline["root_rate"] > 0.6
    assert fitted["role"] == "offline:fitted-relation" and fitted["accuracy"] > cue["accuracy"] + 0.05
    # the default lets the revision layer decide first: on IRC it keeps the fitted role's parents within 0.01
    assert default["role"] == "offline:revision-first" and default["accuracy"] >= fitted["accuracy"] - 0.01


def test_an_llm_relation_role_is_scored_beside_the_offline_one(tmp_path, capsys, monkeypatch):
    """With a relation model configured (here a scripted local OpenAI-compatible fake that always links a child to
    its latest candidate), `links` scores it beside the offline role: it must then equal the baseline."""
    from tmem.evaluation.scripted_server import FaultServer, scripted_reply
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
    offline, _, _, _, llm, baseline = json.loads(capsys.readouterr().out)["roles"]
    assert offline["role"].startswith("offline:") and llm["role"].startswith("openai:fault-model@")
    assert llm["default"] and not offline["default"]  # structuring runs the configured model
    assert {k: llm[k] for k in ("children", "accuracy", "wrong_root")} == \
        {k: baseline[k] for k in ("children", "accuracy", "wrong_root")}
    assert llm["errors"] == 0


# measured with the lexical embedder on the 15 dev cases (the 4 written blind after the fit included): fitted
# 0.757 / 0.284, state rule precision 0.368 (MiniLM, as shipped: docs/evaluation.md)
FITTED_EDGE, FITTED_UPDATE_RECALL, STATE_UPDATE_PRECISION = 0.75, 0.32, 0.35  # measured 0.762, 0.332


def test_the_dev_cases_fitted_role_beats_the_state_rule_and_the_cue_overlap_baseline(tmp_path):
    """data/cases/dev (the project's App. G-style case studies, tuning data): with the lexical embedder (MiniLM
    figures in docs/evaluation.md) the fitted role reproduces more gold edges than the state rule, which finds far
    more UPDATEs than the cue-overlap rule. The held-out data/cases/test is never read by the suite."""
    from pathlib import Path

    from tmem.corpora.imports import import_corpus
    from tmem.models.embedders import LexicalEmbedder
    from tmem.models.relation import CueOverlapRelation, StateRelation
    from tmem.models.relation.fitted import FittedRelation
    from tmem.store import Store

    cases = Path(__file__).resolve().parent.parent / "data" / "cases" / "dev"
    if not (cases / "gold_edges.jsonl").exists():
        pytest.skip("data/cases/dev is not there")
    store = Store(tmp_path / "cases.duckdb")
    import_corpus(store, "groupmembench", cases, corpus="cases")
    fitted, state, cue, previous = (s.as_dict() for s in evaluate_links(
        store, "cases", [FittedRelation(embedder=LexicalEmbedder()), StateRelation(embedder=LexicalEmbedder()),
                         CueOverlapRelation()], keep_rows=True))
    print({k: (fitted[k], state[k], cue[k]) for k in ("edge_accuracy", "update_recall", "update_precision")})
    assert state["children"] == cue["children"] >= 400 and state["coverage"] == 1.0
    # the fitted role was fitted on these cases (with MiniLM similarities): a regression guard, not a held-out figure
    assert fitted["edge_accuracy"] > state["edge_accuracy"] > cue["edge_accuracy"] > previous["edge_accuracy"]
    assert fitted["edge_accuracy"] > FITTED_EDGE and fitted["update_recall"] > FITTED_UPDATE_RECALL
    assert state["edge_accuracy"] > 0.7 and state["update_recall"] > 0.3 > 2 * cue["update_recall"]
    # UPDATEs found by values and resolutions, not by labelling everything
    assert state["update_precision"] > STATE_UPDATE_PRECISION
    store.close()


def test_the_scored_rows_are_embedded_in_one_pass_per_scope():
    """`links` embeds the covered children and their candidates once, before scoring (one embedding call instead of
    one per child); a child that is not covered (5) adds nothing, and the scores are those of the on-demand path."""
    import numpy as np

    from tmem.evaluation.links import embed_once
    from tmem.pipeline.scope import Scope

    class Counting:
        name = "counting"

        def __init__(self):
            self.calls = []

        def embed(self, texts, kind="passage"):
            self.calls.append(len(texts))
            return np.ones((len(texts), 4), np.float32)

    items = link_items(MESSAGES, LINKS, 30, 20)
    embedder, scope = Counting(), Scope("c", "chan", MESSAGES)
    embed_once(scope, items, [embedder, None, embedder])
    assert embedder.calls == [5]  # messages 0-4: the children 1-4 and their candidates; 5 is not covered
    scope.vectors_at(embedder, [0, 1, 2, 3, 4])
    assert embedder.calls == [5]  # read from the rows held, not embedded again
    embed_once(scope, [], [embedder])
    assert embedder.calls == [5]


@pytest.mark.slow
def test_the_irc_test_figures_the_docs_state(tmp_path, capsys):
    """docs/evaluation.md's IRC test parent accuracies (the held-out split, MiniLM, every offline role), re-measured
    with the command the docs give: a change to the relation role or its weights must restate them."""
    import re
    from pathlib import Path

    from conftest import benchmark_db

    docs = Path(__file__).resolve().parent.parent / "docs" / "evaluation.md"
    db = benchmark_db(tmp_path, "irc", "ubuntu-irc-disentanglement/test", "irc-test")
    assert cli(["links", "--db", str(db), "--corpus", "irc-test", "--json"]) == 0
    measured = {r["role"]: r["accuracy"] for r in json.loads(capsys.readouterr().out)["roles"]}
    text = " ".join(docs.read_text(encoding="utf-8").split())
    stated = re.search(r"parent accuracy revision-first ([\d.]+), fitted ([\d.]+), state ([\d.]+), cue-overlap "
                       r"([\d.]+), previous message ([\d.]+)", text).groups()
    roles = ("offline:revision-first", "offline:fitted-relation", "offline:state-relation",
             "offline:cue-overlap-relation", "baseline: previous candidate")
    assert {r: round(measured[r], 3) for r in roles} == {r: float(v) for r, v in zip(roles, stated, strict=True)}
