"""tmem.jsonable.to_jsonable by hand: the JSON values every stored trace and stage record is written as."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from tmem.jsonable import from_jsonable, to_jsonable


@dataclass(frozen=True)
class Leaf:
    at: datetime
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Node:
    name: str
    score: float
    leaves: tuple[Leaf, ...]
    extra: dict[str, int]
    parent: str | None = None


class Kind(enum.StrEnum):
    UPDATE = "UPDATE"


class Pair(NamedTuple):
    a: int
    b: int


def test_dataclasses_nest_into_dicts_in_field_order_and_tuples_become_lists():
    node = Node("n", 0.5, (Leaf(datetime(2025, 1, 2, 3, 4), ("x", "y")),), {"k": 1})
    assert to_jsonable(node) == {"name": "n", "score": 0.5,
                                 "leaves": [{"at": "2025-01-02T03:04:00", "tags": ["x", "y"]}],
                                 "extra": {"k": 1}, "parent": None}
    assert list(to_jsonable(node)) == ["name", "score", "leaves", "extra", "parent"]
    assert from_jsonable(Node, to_jsonable(node)) == node


def test_other_values_keep_their_meaning():
    assert to_jsonable(Node) is Node  # a dataclass type, not an instance: left as it is
    assert to_jsonable(Kind.UPDATE) is Kind.UPDATE  # a str subclass: json writes it as its value
    assert to_jsonable(Pair(1, 2)) == [1, 2]  # a tuple subclass: a list, as before
    assert to_jsonable({"d": [datetime(2025, 5, 6)]}) == {"d": ["2025-05-06T00:00:00"]}
    assert to_jsonable(True) is True and to_jsonable(3) == 3 and to_jsonable(None) is None
