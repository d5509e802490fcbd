"""The bounds every input and output goes through (tmem.limits), case by case by hand: limits from the
environment, safe names, paths kept inside their base, truncation with its mark, JSON depth, control characters."""
from datetime import datetime

import pytest

from tmem import limits


def test_an_environment_limit_is_a_positive_whole_number_or_an_error(monkeypatch):
    monkeypatch.delenv("TMEM_TEST_LIMIT", raising=False)
    assert limits.env_limit("TMEM_TEST_LIMIT", 7) == 7
    monkeypatch.setenv("TMEM_TEST_LIMIT", "  ")
    assert limits.env_limit("TMEM_TEST_LIMIT", 7) == 7  # blank = unset
    monkeypatch.setenv("TMEM_TEST_LIMIT", "1024")
    assert limits.env_limit("TMEM_TEST_LIMIT", 7) == 1024
    for bad, says in (("1.5", "whole number"), ("ten", "whole number"), ("0", "positive"), ("-3", "positive")):
        monkeypatch.setenv("TMEM_TEST_LIMIT", bad)
        with pytest.raises(ValueError, match=rf"\$TMEM_TEST_LIMIT must be .*{says}"):
            limits.env_limit("TMEM_TEST_LIMIT", 7)


@pytest.mark.parametrize("name", ["demo", "locomo-interleaved", "run 2 (k=12)", "_x", "a" * 100, "é"])
def test_safe_names(name):
    assert limits.safe_name(name, "corpus") == name


@pytest.mark.parametrize("name", ["", "../up", "a/b", "-flag", ".hidden", "trailing ", "dot.", "a" * 101, "tab\t",
                                  None, 3])
def test_unsafe_names_are_refused_with_what_they_name(name):
    with pytest.raises(ValueError, match=r"^corpus .* is not a single safe name"):
        limits.safe_name(name, "corpus")


def test_a_path_stays_inside_its_base(tmp_path):
    assert limits.path_under(tmp_path, "runs", "r1") == (tmp_path / "runs" / "r1").resolve()
    for parts in (("..", "x"), ("runs", "..", ".."), ("/etc",), (".",)):
        with pytest.raises(ValueError, match="outside"):
            limits.path_under(tmp_path, *parts)


def test_truncation_says_how_much_it_dropped():
    assert limits.truncate("abc", 3) == ("abc", False)
    assert limits.truncate("abcdef", 2) == ("ab […truncated by tmem: 4 more characters]", True)
    text, cut = limits.cap_answer("x" * (limits.MAX_ANSWER_CHARS + 1234))
    assert cut and text.endswith("[…truncated by tmem: 1,234 more characters]")


def test_json_depth_counts_containers_only():
    assert not limits.json_depth_exceeds({"a": [1, {"b": "deep text"}]}, limit=3)
    assert limits.json_depth_exceeds({"a": [1, {"b": []}]}, limit=3)  # dict > list > dict > list: 4
    assert not limits.json_depth_exceeds("a string", limit=0)
    nested: list = []
    for _ in range(limits.MAX_JSON_DEPTH):
        nested = [nested]
    assert limits.json_depth_exceeds(nested)  # MAX_JSON_DEPTH + 1 lists


def test_control_characters_and_other_bounds():
    assert limits.strip_control("ok\x1b[31mred\x07\tand\nnew\x9b") == "ok\ufffd[31mred\ufffd\tand\nnew\ufffd"
    assert limits.time_in_range(datetime(2024, 5, 1)) and not limits.time_in_range(datetime(1, 1, 1))
    assert limits.finite(1.5) and not limits.finite(float("nan")) and not limits.finite(float("inf"))
    assert limits.check_trace_size("{}", "q1") == "{}"
