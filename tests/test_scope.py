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
