"""Field parsing shared by the importers; every error names the file, the line or record, and the field."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from tmem.store import CorpusError


def where(source: str, record: str | int) -> str:
    return f"{source}:{record}" if isinstance(record, int) else f"{source} [{record}]"


def parse_timestamp(value: Any, at: str, field: str = "timestamp") -> datetime:
    """ISO 8601 (a zone is converted to UTC and dropped) or Unix seconds -> naive datetime."""
    if isinstance(value, bool) or value is None or value == "":
        raise CorpusError(f"{at}: field {field!r} is missing")
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), tz=timezone.utc).replace(tzinfo=None)
    if not isinstance(value, str):
        raise CorpusError(f"{at}: field {field!r} must be an ISO 8601 string, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CorpusError(f"{at}: field {field!r}: cannot parse timestamp {value!r} (expected ISO 8601)") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return parsed


def required_str(record: dict, field: str, at: str) -> str:
    value = record.get(field)
    if value is None or value == "":
        raise CorpusError(f"{at}: required field {field!r} is missing")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise CorpusError(f"{at}: field {field!r} must be a string, got {type(value).__name__}")
    return value


def optional_str(record: dict, field: str, at: str) -> str | None:
    value = record.get(field)
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise CorpusError(f"{at}: field {field!r} must be a string, got {type(value).__name__}")
    return value


def optional_number(record: dict, field: str, at: str, kind: type = int) -> Any:
    value = record.get(field)
    if value is None or value == "":
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        number = kind(value)
    except (TypeError, ValueError):
        raise CorpusError(f"{at}: field {field!r} must be a {kind.__name__}, got {value!r}") from None
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise CorpusError(f"{at}: field {field!r} must be an integer, got {value!r}")
    return number
