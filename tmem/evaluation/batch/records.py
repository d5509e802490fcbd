"""Append-only JSONL stage records with crash-safe resume (paper App. D.1-D.2).

Every stage of a batch run appends one record per question to `<out>/<variant>/<stage>.jsonl`. A record carries the
stable key (scope, question type, question id), the configuration hash, the backend label, the prompt hashes, the
selected message ids, the stage's outputs, its status and error. Each record is one line, written with a single
`write`, then flushed and fsynced, so a killed process leaves at most one torn (partial) last line.

On resume `read_records` keeps the latest record per key: successful records are skipped, failed or incomplete
ones are retried. Lines that do not parse are ignored and reported (`RecordLog.torn`). Before appending again, a
torn last line is moved out of the file into `<stage>.jsonl.torn` (kept for audit), so the next record starts on a
line of its own and the fragment can never be read as a record later.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

OK, ERROR = "ok", "error"
Key = tuple[str, str, str]  # (scope, question type, question id)


def record_key(record: dict) -> Key:
    scope, qtype, qid = record["key"]
    return (str(scope), str(qtype or ""), str(qid))


@dataclass
class RecordLog:
    """The parsed content of one stage file: latest record per key, how many records in all, unreadable lines."""

    path: Path
    latest: dict[Key, dict] = field(default_factory=dict)
    counts: dict[Key, int] = field(default_factory=dict)
    records: int = 0
    torn: list[tuple[int, str]] = field(default_factory=list)  # (1-based line number, why)

    def done(self, key: Key, config_hash: str, backend: str) -> bool:
        """A successful record of this key for this configuration and backend exists."""
        r = self.latest.get(key)
        return bool(r) and r["status"] == OK and r.get("config_hash") == config_hash and r.get("backend") == backend

    def ok_records(self) -> Iterator[dict]:
        return (r for r in self.latest.values() if r["status"] == OK)


def read_records(path: str | Path) -> RecordLog:
    """Parse a JSONL stage file (missing file: empty log). The last record of a key wins."""
    log = RecordLog(Path(path))
    if not log.path.exists():
        return log
    data = log.path.read_bytes()
    lines = data.split(b"\n")
    ends_clean = data.endswith(b"\n") or not data
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = number == len(lines) and not ends_clean
        try:
            record = json.loads(raw.decode("utf-8"))
            key = record_key(record)
            if record.get("status") not in (OK, ERROR):
                raise ValueError("no status")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            why = "torn last line (the process stopped while writing it)" if last else f"unreadable line: {exc}"
            log.torn.append((number, why))
            continue
        if last:  # parsed, but without its newline the write may not have finished: treat as torn
            log.torn.append((number, "last line without a newline (write not confirmed)"))
            continue
        log.records += 1
        log.latest[key] = record
        log.counts[key] = log.counts.get(key, 0) + 1
    return log


class RecordWriter:
    """Appends records to one stage file: one `write` per record, then flush and fsync."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.moved_torn = _move_torn_tail(self.path)
        self._handle = open(self.path, "ab")  # noqa: SIM115 - closed in close()

    def append(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=_default) + "\n"
        self._write(line.encode("utf-8"))

    def _write(self, data: bytes) -> None:
        self._handle.write(data)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _move_torn_tail(path: Path) -> int:
    """Cut a last line without its newline off `path` and append it to `<path>.torn`; -> bytes moved."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with open(path, "r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        block = min(size, 1 << 20)
        while True:
            handle.seek(size - block)
            tail = handle.read(block)
            if tail.endswith(b"\n"):
                return 0
            cut = tail.rfind(b"\n")
            if cut >= 0 or block == size:
                start = size - block + cut + 1
                break
            block = min(size, block * 2)
        handle.seek(start)
        fragment = handle.read()
        with open(f"{path}.torn", "ab") as torn:
            torn.write(fragment + b"\n")
            torn.flush()
            os.fsync(torn.fileno())
        handle.truncate(start)
        handle.flush()
        os.fsync(handle.fileno())
    return len(fragment)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def make_record(key: Key, *, run_id: str, variant: str, stage: str, config_hash: str, backend: str,
                prompt_hashes: dict[str, str], status: str, selected_ids: Iterable[str] = (),
                outputs: dict | None = None, error: str | None = None, seconds: float = 0.0,
                usage: dict | None = None, attempt: int = 1) -> dict:
    return {"key": list(key), "run_id": run_id, "variant": variant, "stage": stage, "config_hash": config_hash,
            "backend": backend, "prompt_hashes": prompt_hashes, "status": status,
            "selected_ids": list(selected_ids), "outputs": outputs or {}, "error": error,
            "seconds": round(seconds, 6), "usage": usage or {}, "attempt": attempt,
            "created_at": datetime.now().isoformat(timespec="seconds")}
