"""The JSON round trip of tmem's records: frozen dataclasses (tmem.types) to plain JSON values and back, guided by
their type hints, so a stored trace or stage record reads back losslessly."""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from datetime import datetime
from typing import Any

_PLAIN = (str, int, float, bool, type(None))


@functools.cache
def _field_names(tp: type) -> tuple[str, ...] | None:
    """A dataclass type's field names, or None for any other type: `dataclasses.fields` builds its tuple on every
    call, and a demo batch turns thousands of traces into JSON (a third of `to_jsonable`'s time went there)."""
    return tuple(f.name for f in dataclasses.fields(tp)) if dataclasses.is_dataclass(tp) else None


def to_jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:  # most values: exact types first, the general checks below only for the rest
        return value
    if kind is list or kind is tuple:
        return [to_jsonable(v) for v in value]
    if kind is dict:
        return {k: to_jsonable(v) for k, v in value.items()}
    names = _field_names(kind)  # a dataclass instance (a dataclass type as a value is `type`: returned as is)
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


@functools.cache
def _field_hints(tp: type) -> tuple[tuple[str, Any], ...]:
    """(field name, resolved type) of a dataclass: get_type_hints re-evaluates every annotation string, which made
    it most of the time of loading a stored trace."""
    hints = typing.get_type_hints(tp)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(tp))


def from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild a value of type `tp` from `to_jsonable` output, guided by the dataclass type hints."""
    return _decoder(tp)(data)


def _identity(data: Any) -> Any:
    return data


@functools.cache
def _decoder(tp: Any):
    """A function decoding `to_jsonable` output into `tp`, built once per type: inspecting the hints per value
    (get_origin, is_dataclass) was most of the time of loading a stored trace."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = _decoder([a for a in typing.get_args(tp) if a is not type(None)][0])
        return lambda data: None if data is None else inner(data)
    if dataclasses.is_dataclass(tp):
        fields = [(name, _decoder(hint)) for name, hint in _field_hints(tp)]
        return lambda data: None if data is None else tp(**{name: dec(data[name]) for name, dec in fields
                                                              if name in data})
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return lambda data: None if data is None else tuple(item(v) for v in data)
        items = [_decoder(a) for a in args]
        return lambda data: None if data is None else tuple(dec(v) for dec, v in zip(items, data))
    if origin is dict:
        value = _decoder(typing.get_args(tp)[1])
        return lambda data: None if data is None else {k: value(v) for k, v in data.items()}
    if tp is datetime:
        return lambda data: None if data is None else datetime.fromisoformat(data)
    if tp is float:
        return lambda data: float(data) if isinstance(data, int) and not isinstance(data, bool) else data
    return _identity
