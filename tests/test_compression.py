"""Budgeted span compression (Eq. 6-7): spans, scores, protection, budget, leaves first, >= 1 span per node."""
from datetime import datetime

from tmem.pipeline.compression import (
    OMISSION,
    compress_forest,
    protection,
    query_entities,
    span_gain,
    split_spans,
    truncate_to_budget,
)
from tmem.types import EXPAND, ROOT, UPDATE, ForestNode

T = datetime(2025, 1, 1)


def words(text: str) -> int:
    return len(text.split())


def test_split_spans_on_sentences_clauses_and_lines():
    assert split_spans("One. Two? Three; four\nfive") == ["One.", "Two?", "Three;", "four", "five"]
    assert split_spans("no break") == ["no break"]


def test_query_entities_are_the_name_like_words_of_the_question():
    assert query_entities('Did Caroline move the PII-vault review (Msg_12, v2) to the "blue plan" in Q3?') == {
        "caroline", "pii", "vault", "msg_12", "v2", "blue", "plan", "q3"}
    assert query_entities("What is the current approach for tagging fields?") == set()  # no name-like word
    assert query_entities("What didn't Bob's team ship?") == {"bob"}  # apostrophes are not quotes


def test_protection_reasons():
    q = {"budget"}
    assert protection("The budget grew.", q, False) == "query entity"
    assert protection("It may slip.", q, False) is None  # "may", the verb, is no date
    assert protection("Due May 12.", q, False) == "date/time"
    assert protection("See you on 2025-03-04.", q, False) == "date/time"
    assert protection("We need 40 seats.", q, False) == "number"
    assert protection("We switched to the blue vendor instead.", q, True) == "state change"
    assert protection("We switched to the blue vendor instead.", q, False) is None
    assert protection("Nice weather outside.", q, True) is None


def test_gain_rewards_query_terms_and_novelty_over_the_parent():
    idf = lambda u: 2.0  # noqa: E731
    # U(s) = {alpha, beta, gamma}; U(q) = {alpha}; U(p) = {beta}: 2 (query) + 2 * 2 (alpha, gamma new) = 6
    assert span_gain("alpha beta gamma", {"alpha"}, {"beta"}, idf) == 6.0


def node(i, parent, rel, depth, mid, text):
    return ForestNode(i, parent, rel, depth, 1, mid, T, "a", text)


FILLER = " ".join(f"Filler sentence about nothing in particular {w}." for w in
                  ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"])


def render(texts):
    return " ".join(texts.values())


def test_under_budget_nothing_is_omitted():
    nodes = [node(1, 0, ROOT, 0, "r", "Root says hello.")]
    done = compress_forest(nodes, "hello", lambda u: 1.0, words, lambda t: "Root says hello.", 100)
    assert done.budget_met and all(s.kept for s in done.spans) and done.tokens_before == done.tokens_after


def test_leaves_are_compressed_before_parents_and_protected_spans_survive():
    nodes = [node(1, 0, ROOT, 0, "r", FILLER), node(2, 1, EXPAND, 1, "leaf", "Budget of Globex grew. " + FILLER)]
    full = {n.message_id: n.text for n in nodes}
    budget = words(render(full)) - 20  # removing ~3 leaf sentences is enough
    done = compress_forest(nodes, "what is the budget of Globex", lambda u: 1.0, words,
                           lambda t: render({**full, **t}), budget)
    assert done.budget_met and done.tokens_after <= budget
    root_spans = [s for s in done.spans if s.message_id == "r"]
    leaf_spans = [s for s in done.spans if s.message_id == "leaf"]
    assert all(s.kept for s in root_spans)  # the parent level was not needed
    assert leaf_spans[0].kept and leaf_spans[0].protected == "query entity"
    assert any(not s.kept for s in leaf_spans) and OMISSION in done.texts["leaf"]


def test_every_node_keeps_a_span_and_an_infeasible_budget_is_reported():
    nodes = [node(1, 0, ROOT, 0, "r", FILLER), node(2, 1, UPDATE, 1, "c", FILLER)]
    full = {n.message_id: n.text for n in nodes}
    done = compress_forest(nodes, "zzz", lambda u: 1.0, words, lambda t: render({**full, **t}), 3)
    assert not done.budget_met
    for mid in ("r", "c"):
        assert sum(s.kept for s in done.spans if s.message_id == mid) == 1
    assert len(done.spans) == 12  # nothing deleted: every span is still recorded


def test_lowest_density_spans_go_first():
    text = "Rare zebra quokka axolotl. Common the the the the the."
    nodes = [node(1, 0, ROOT, 0, "r", "x"), node(2, 1, EXPAND, 1, "leaf", text)]
    idf = lambda u: 5.0 if u in {"zebra", "quokka", "axolotl", "rare"} else 0.1  # noqa: E731
    full = {"r": "x", "leaf": text}
    done = compress_forest(nodes, "question", idf, words, lambda t: render({**full, **t}), words(render(full)) - 1)
    kept = {s.text: s.kept for s in done.spans if s.message_id == "leaf"}
    assert kept == {"Rare zebra quokka axolotl.": True, "Common the the the the the.": False}


def test_truncate_to_budget():
    text = " ".join(f"w{i}" for i in range(100))
    assert words(truncate_to_budget(text, words, 10)) <= 10
    assert truncate_to_budget("short", words, 10) == "short"
