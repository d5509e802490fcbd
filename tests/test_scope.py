"""Scope: the Python API refuses what the importers never produce, and converts aware timestamps to UTC."""
from datetime import datetime, timedelta, timezone

import pytest

from tmem.pipeline.scope import Scope
from tmem.types import Message


def test_duplicate_ids_and_non_datetime_timestamps_are_refused():
    a = Message("m1", "s", "hello", datetime(2025, 1, 1, 9))
    with pytest.raises(ValueError, match="scope 's': duplicate message id 'm1'"):
        Scope("c", "s", [a, a])
    with pytest.raises(ValueError, match="message 'm2' has timestamp None, expected a datetime"):
        Scope("c", "s", [a, Message("m2", "s", "hi", None)])


def test_aware_timestamps_become_naive_utc_and_order_across_zones():
    berlin = timezone(timedelta(hours=1))
    early = Message("late-looking", "s", "a", datetime(2025, 1, 1, 9, 30, tzinfo=berlin))  # 08:30 UTC
    later = Message("early-looking", "s", "b", datetime(2025, 1, 1, 9, 0))  # naive = UTC
    scope = Scope("c", "s", [later, early])
    assert [m.id for m in scope.messages] == ["late-looking", "early-looking"]
    assert scope.by_id["late-looking"].timestamp == datetime(2025, 1, 1, 8, 30)


def test_a_kept_reading_is_computed_once_per_scope_message_and_afresh_for_one_from_elsewhere():
    from dataclasses import replace
    a = Message("m1", "s", "hello", datetime(2025, 1, 1, 9))
    scope = Scope("c", "s", [a])
    calls = []

    def length(m):
        calls.append(m.text)
        return len(m.text)
    assert scope.kept(("len",), a, length) == 5 and scope.kept(("len",), a, length) == 5
    assert calls == ["hello"]
    other = replace(a, text="another text")  # the same id, not the scope's message
    assert scope.kept(("len",), other, length) == 12 and scope.kept(("len",), other, length) == 12
    assert calls == ["hello", "another text", "another text"]
    assert scope.kept(("other reading",), a, length) == 5 and len(calls) == 4


def test_a_derived_reading_is_computed_once_per_scope_and_reading():
    from tmem.pipeline.baselines import conversation_neighbours
    from tmem.pipeline.discovery import group_positions
    a = Message("m1", "s", "hello", datetime(2025, 1, 1, 9), topic="t1")
    b = Message("m2", "s", "again", datetime(2025, 1, 1, 10), topic="t2", reply_to="m1")
    c = Message("m3", "s", "more", datetime(2025, 1, 1, 11), topic="t1")
    scope, twin = Scope("c", "s", [a, b, c]), Scope("c", "s", [a, b, c])
    calls = []

    def size(s):
        calls.append(s)
        return len(s.messages)
    assert scope.derived(("size",), size) == 3 and scope.derived(("size",), size) == 3 and calls == [scope]
    assert twin.derived(("size",), size) == 3 and calls == [scope, twin]  # each scope its own
    assert scope.derived(("size", "again"), size) == 3 and len(calls) == 3  # each reading its own
    # the stages' scope-wide readings: topic t1 holds positions 0 and 2; m2 replies to m1
    assert group_positions(scope, ("topic", "t1")).tolist() == [0, 2]
    assert group_positions(scope, ("topic", "none such")).tolist() == []
    assert sorted(conversation_neighbours(scope, 0, 1)) == [(1, 1), (1, 2)]
