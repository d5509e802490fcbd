"""The JSON round trip of tmem's records: frozen dataclasses (tmem.types) to plain JSON values and back, guided by
their type hints, so a stored trace or stage record reads back losslessly."""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from datetime import datetime
from typing import Any


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
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
