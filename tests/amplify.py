"""The amplification harness: hostile inputs for every importer (a long name copied into every message, a deep
structure, many notes) and a worker that imports each one in its own forked process and reports that process's
peak resident memory (os.wait4's ru_maxrss) and outcome. tests/test_amplification.py drives it with hypothesis.

The worker is a fresh interpreter with the importers loaded; it forks per input, so each child starts from the
same footprint as a fresh `tmem import` (about 160 MB) and the peak belongs to that import alone. A child whose
memory passes KILL_MB is killed (the machine is shared; an import that would take gigabytes must not)."""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from waiting import scaled

FIXTURES = Path(__file__).parent / "fixtures"
BASE_MB, PER_INPUT_BYTE = 300, 10  # the target: peak RSS <= 300 MB + 10 x the input's size
KILL_MB = 2500
TIMEOUT_S = scaled(60)  # a hung import; a busy machine (TMEM_TEST_SLOW) is given longer


def budget_mb(input_bytes: int) -> float:
    return BASE_MB + PER_INPUT_BYTE * input_bytes / 2 ** 20


def input_size(path: Path) -> int:
    """Bytes of the input: a file, or every file of a folder; an upload counts its files uncompressed (the upload
    limit counts them so too)."""
    if path.is_file():
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                return max(path.stat().st_size, sum(i.file_size for i in archive.infolist()))
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --------------------------------------------------------------------------------------- the hostile inputs
def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _jsonl(tmp: Path, field: str, value: str, n: int, raw_value: str | None = None) -> Path:
    path = tmp / "amp.jsonl"
    with path.open("w") as out:
        for i in range(n):
            record = {"id": f"m{i}", "text": "hello", "timestamp": f"2025-01-01T10:{i % 60:02d}:00", field: value}
            line = json.dumps(record)
            if raw_value is not None:  # a raw JSON value (a deep structure) in place of the string
                line = line.replace(json.dumps(value), raw_value)
            out.write(line + "\n")
    return path


def jsonl(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    field = {"name": "channel", "id": "id", "text": "text", "deep": "topic"}[kind]
    if kind == "deep":
        return "jsonl", _jsonl(tmp, field, "DEEP", max(1, n // 100), raw_value=deep(length))
    if kind == "id":
        path = tmp / "amp.jsonl"
        path.write_text(json.dumps({"id": "m" * length, "text": "hi", "timestamp": "2025-01-01T10:00"}) + "\n"
                        + json.dumps({"kind": "question", "id": "q", "text": "?", "gold_evidence": ["m" * length]})
                        + "\n")
        return "jsonl", path
    return "jsonl", _jsonl(tmp, field, "v" * length, max(1, n // 10))


def groupmembench(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    root = tmp / "gmb"
    shutil.copytree(FIXTURES / "groupmembench", root)
    conversation = next(root.rglob("synthetic_domain_channels*.json"))
    channels = json.loads(conversation.read_text())
    first = next(iter(channels.values()))[0]
    records = [first | {"msg_node": f"n{i}", "reply_to": None} for i in range(n)]
    if kind == "name":  # one long channel name, copied into every message of the channel
        channels["c" * length] = records
    elif kind == "text":  # a str-encoded dict of many small items: Python's literal parser takes ~300 B each
        metadata = "{'original_decision': 'x', 'steps': [" + "1," * (length // 2) + "]}"
        channels["x"] = [r | {"decision_type": "changed", "decision_change_metadata": metadata} for r in records[:3]]
    elif kind == "deep":
        channels["x"] = [records[0] | {"decision_change_metadata": "DEEP"}]
        conversation.write_text(json.dumps(channels).replace('"DEEP"', deep(length)))
        return "groupmembench", root
    else:  # a long id and reply_to
        channels["x"] = [first | {"msg_node": "n" * length, "reply_to": "r" * length}]
    conversation.write_text(json.dumps(channels))
    return "groupmembench", root


def evermembench(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    root = tmp / "ever"
    shutil.copytree(FIXTURES / "evermembench", root)
    dialogue_file = root / "01" / "dialogue.json"
    dialogue = json.loads(dialogue_file.read_text())
    day = dialogue["dialogues"]["2025-01-09"]
    speaker = next(iter(day.values()))[0]["speaker"]
    batch = [{"speaker": speaker, "time": "09:30", "dialogue": "hi", "message_index": i} for i in range(n)]
    if kind == "name":  # the group name: in every message's id, channel and topic
        day["g" * length] = batch
    elif kind == "id":  # a long date key
        dialogue["dialogues"]["2025-01-1" + "0" * length] = {"G": batch}
    elif kind == "text":  # a long role, joined to every message of its speaker
        profiles = json.loads((root / "profiles.json").read_text())
        profiles = profiles if isinstance(profiles, list) else list(profiles.values())
        profiles.append({"name": speaker, "role": "r" * length})
        (root / "profiles.json").write_text(json.dumps(profiles))
        day["G"] = batch
    else:
        day["G"] = batch[:1] + ["DEEP"]
        dialogue_file.write_text(json.dumps(dialogue).replace('"DEEP"', deep(length)))
        return "evermembench", root
    dialogue_file.write_text(json.dumps(dialogue))
    return "evermembench", root


def locomo(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    data = json.loads((FIXTURES / "locomo" / "mini.json").read_text())
    conv = data[0]
    session = conv["conversation"]["session_1"]
    turns = [session[0] | {"dia_id": f"D1:{i + 1}"} for i in range(n)]
    if kind == "name":
        conv["sample_id"] = "s" * length  # the scope of every turn
    elif kind == "id":
        turns = [t | {"speaker": "p" * length} for t in turns]
    elif kind == "text":
        conv["qa"].append({"question": "q" * length, "answer": "a", "evidence": ["D1:1"], "category": 1})
    conv["conversation"]["session_1"] = turns
    text = json.dumps(data)
    if kind == "deep":
        conv["qa"][0]["evidence"] = "DEEP"
        text = json.dumps(data).replace('"DEEP"', deep(length))
    path = tmp / "amp.json"
    path.write_text(text)
    return "locomo", path


def slack(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    root = tmp / "acme"
    shutil.copytree(FIXTURES / "slack" / "acme", root)
    users = json.loads((root / "users.json").read_text())
    uid = users[0]["id"]
    day = root / "general" / "2024-03-04.json"
    records = [{"type": "message", "user": uid, "text": "hi", "ts": f"1709543{i:03d}.000200"} for i in range(n)]
    if kind == "name":  # a long real name, the author of every message by that user
        users[0]["real_name"] = users[0].setdefault("profile", {})["real_name"] = "u" * length
    elif kind == "text":  # mentions that grow as they resolve
        records = records[:2] + [{"type": "message", "user": uid, "text": f"<@{uid}> " * (length // 8 + 1),
                                  "ts": "1709544000.000200"}]
        users[0]["real_name"] = users[0].setdefault("profile", {})["real_name"] = "u" * 900
    elif kind == "id":
        records = [r | {"thread_ts": "9" * length} for r in records[:3]]
    (root / "users.json").write_text(json.dumps(users))
    text = json.dumps(records)
    if kind == "deep":
        text = json.dumps(records[:1] + ["DEEP"]).replace('"DEEP"', deep(length))
    day.write_text(text)
    return "slack", root


def irc(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    root = tmp / "irc"
    root.mkdir()
    lines = [f"[10:{i % 60:02d}] <nick{i % 7}> hello {i}" for i in range(n)]
    if kind == "name":
        lines.append(f"[11:00] <{'n' * length}> hi")
    elif kind == "text":
        lines += ["garbage " * 4] * max(n, length // 40)  # every line a note
    elif kind == "id":
        lines.append("[11:00] <a> " + "t" * length)
    else:
        lines += ["=== " + "[" * length]
    (root / "2024-01-31_00.raw.txt").write_text("\n".join(lines) + "\n")
    (root / "2024-01-31_00.annotation.txt").write_text("".join(f"{i} {i + 1} -\n" for i in range(n))
                                                        + "999999 1 -\n" * min(length, 10_000))
    return "irc", root


def upload(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    """A compressible zip of an EverMemBench folder with a long group name (a 9.6 KB zip once took 5 GB)."""
    _, root = evermembench(tmp, "name" if kind in ("name", "id") else kind, length, n)
    path = tmp / "amp.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(root.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(tmp))
    shutil.rmtree(root)
    return "upload:evermembench", path


MAKERS = {"jsonl": jsonl, "groupmembench": groupmembench, "evermembench": evermembench, "locomo": locomo,
          "slack": slack, "irc": irc, "upload": upload}
KINDS = ("name", "id", "text", "deep")


# ------------------------------------------------------------------- the new surfaces (issue 44): beyond imports
# Each writes its hostile input into a folder; the child reads it as the product does (tmem/... paths below).
def _messages(n: int) -> list[dict]:
    return [{"id": f"m{i}", "text": f"state {i}", "timestamp": f"2025-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:"
             f"{i % 60:02d}"} for i in range(n)]


def _write_jsonl(path: Path, records: list[dict], raw: dict[str, str] | None = None) -> Path:
    with path.open("w") as out:
        for r in records:
            line = json.dumps(r)
            for placeholder, value in (raw or {}).items():
                line = line.replace(json.dumps(placeholder), value)
            out.write(line + "\n")
    return path


def stale_surface(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    """A corpus whose question has `superseded` and one-message gold units: `length` of them ("units", refused past
    limits.MAX_GOLD_UNITS), exactly the limit ("fit": imported, then checked), a `length`-character superseded state
    ("text"), or a deep evidence list ("deep"). The child imports it and runs the stale check on it."""
    from tmem.limits import MAX_GOLD_UNITS

    root = tmp / "stale"
    root.mkdir()
    units = {"units": length, "fit": MAX_GOLD_UNITS}.get(kind, 3)
    messages = max(n, min(units, MAX_GOLD_UNITS))  # past the limit the units name the messages again, in turn
    question = {"kind": "question", "id": "q", "text": "?", "gold_answer": "state now", "superseded": "state then",
                "gold_evidence": [[f"m{i % messages}"] for i in range(units)]}
    if kind == "text":
        question["superseded"] = "s" * length
    raw = {"DEEP": deep(min(length, 100_000))} if kind == "deep" else None
    if kind == "deep":
        question["gold_evidence"] = "DEEP"
    _write_jsonl(root / "corpus.jsonl", _messages(messages) + [question], raw)
    return "surface:stale", root


def gold_surface(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    """A small corpus and a corrections file: `length` units ("units"), a `length`-character answer ("text"), a key
    repeated `length // 10` times ("keys"), a deep evidence list ("deep"). The child loads the corrections as a
    version and runs the stale check on the corrected gold."""
    root = tmp / "gold"
    root.mkdir()
    _write_jsonl(root / "corpus.jsonl", _messages(n) + [
        {"kind": "question", "id": "q", "text": "?", "gold_answer": "a", "gold_evidence": [["m0"]]}])
    fix = {"scope": "default", "question": "q", "reason": "r", "answer": "x"}
    line = None
    if kind == "units":
        fix["evidence"] = [[f"m{i % n}"] for i in range(length)]
    elif kind == "text":
        fix["answer"] = "a" * length
    elif kind == "keys":
        line = "{" + ", ".join(['"answer": "x"'] * max(2, length // 10)) + ', "scope": "default", "question": "q", ' \
            '"reason": "r"}'
    else:
        fix["evidence"] = "DEEP"
    text = line or json.dumps(fix).replace('"DEEP"', deep(min(length, 100_000)))
    (root / "fixes.jsonl").write_text(text + "\n")
    return "surface:gold", root


def batch_surface(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    """A Batch API output file: `n` * 20 well-formed replies ("lines"), replies of `length` characters ("text"), the
    nine malformed shapes in turn ("shapes"), deep JSON ("deep"). The child reads it as the batch run does."""
    root = tmp / "batch"
    root.mkdir()
    good = {"custom_id": "c", "error": None, "response": {"status_code": 200, "body": {
        "choices": [{"message": {"role": "assistant", "content": "ok"}}], "usage": {"prompt_tokens": 5,
                                                                                 "completion_tokens": 2}}}}
    shapes = [("choices", "x"), ("choices", 3), ("choices", [[1]]), ("usage", "x"), ("usage", [1]),
              ("usage", {"prompt_tokens": -5, "completion_tokens": 1})]
    with (root / "out.output.jsonl").open("w") as out:
        for i in range(n * 20 if kind == "lines" else n):
            line = json.loads(json.dumps(good)) | {"custom_id": f"c{i}"}
            body = line["response"]["body"]
            if kind == "text" and i % 100 == 0:  # a long reply every 100 lines (n of them: hundreds of MB)
                body["choices"][0]["message"]["content"] = "t" * length
            elif kind == "shapes":
                key, value = shapes[i % len(shapes)]
                body[key] = value
            text = json.dumps(line)
            if kind == "deep" and i % 100 == 0:
                text = text.replace('"ok"', deep(min(length, 100_000)))
            out.write(text + "\n")
    return "surface:batch", root


def annotations_surface(tmp: Path, kind: str, length: int, n: int) -> tuple[str, Path]:
    """Annotations to store on `n` / 20 result rows, the first three hostile: a `length`-character note ("text") or
    label ("name"), bidi and formula text ("many"), a deep note ("deep", a string). The child stores them, reads
    them back onto the rows and exports the rows as CSV."""
    root = tmp / "notes"
    root.mkdir()
    note = {"text": "n" * length, "deep": "[" * min(length, 100_000)}.get(kind, "=HYPERLINK(\"x\") \u202egnp.exe")
    label = "l" * length if kind == "name" else "+cmd|' /C calc'!A0"
    rows = [{"question_id": f"q{i}", "label": label if i < 3 else "other", "note": note if i < 3 else "fine"}
            for i in range(n // 20)]  # three hostile, the rest plain (each stored note is a write: ~20 ms)
    (root / "notes.json").write_text(json.dumps(rows))
    return "surface:annotations", root


SURFACES = {"stale": stale_surface, "gold": gold_surface, "batch": batch_surface, "annotations": annotations_surface}
SURFACE_KINDS = {"stale": ("units", "fit", "text", "deep"), "gold": ("units", "text", "keys", "deep"),
                 "batch": ("lines", "text", "shapes", "deep"), "annotations": ("text", "name", "many", "deep")}


def _surface(name: str, root: Path, store) -> str:
    """Run one new surface on its input as the product does; -> what happened, in a few words."""
    from tmem.analysis import stale
    from tmem.corpora.imports import import_corpus
    from tmem.types import Question, StageTrace, Trace, Usage

    def check(corpus: str, gold) -> str:
        messages = {m.id: m for m in store.messages_by_ids(corpus, "default", gold.evidence_ids)}
        times = {i: m.timestamp for i, m in messages.items()}
        trace = Trace(Question("q", "default", "?"), "full", "h", corpus, evidence_ids=tuple(sorted(times)),
                      stages=(StageTrace("seed_retrieval", 0.0, {}, Usage(), "offline", True),))
        return f"checked: {len(stale.findings(trace, gold, times, store.gold_edges(corpus, 'default')))} finding(s)"

    if name == "stale":
        import_corpus(store, "jsonl", root / "corpus.jsonl", "amp")
        return check("amp", store.gold("amp", "default", "q"))
    if name == "gold":
        from tmem.evaluation.gold_versions import read_corrections, save_version

        import_corpus(store, "jsonl", root / "corpus.jsonl", "amp")
        fixes = read_corrections(root / "fixes.jsonl", store, "amp")
        save_version(store, "amp", "v", fixes)
        return check("amp", fixes[0].apply(store.gold("amp", "default", "q")))
    if name == "batch":
        from tmem.models.llm.batch_client import read_results

        found = read_results(root / "out.output.jsonl")
        return f"read: {sum(r.text is not None for r in found.values())} replies, " \
               f"{sum(r.text is None for r in found.values())} failed lines"
    import io

    import pandas as pd

    from tmem.analysis.annotations import annotate, with_annotations
    from tmem.viz.safe import spreadsheet_safe

    notes = json.loads((root / "notes.json").read_text())
    rows = pd.DataFrame([{"run_id": "r", "scope": "default", "question_id": n["question_id"], "variant": "full",
                          "config_hash": "h", "backend": "b"} for n in notes])
    refused = 0
    for note, row in zip(notes, rows.to_dict("records")):
        try:
            annotate(store, "amp", row, note["label"], note["note"], "me")
        except ValueError:
            refused += 1
    shown = with_annotations(rows, store.annotations("amp"))
    spreadsheet_safe(shown).to_csv(io.StringIO(), index=False)
    return f"stored {len(notes) - refused}, refused {refused}"


# --------------------------------------------------------------------------------------------------- worker
def _child(fmt: str, path: str, db: str, result: str) -> None:
    from tmem.store import Store
    from tmem.types import CorpusError

    outcome = "imported"
    try:
        store = Store(db)
        try:
            if fmt.startswith("surface:"):
                outcome = _surface(fmt.split(":")[1], Path(path), store)
            elif fmt.startswith("upload:"):
                from tmem.corpora.upload import import_upload

                import_upload(store, fmt.split(":")[1], [(Path(path).name, Path(path).read_bytes())], "amp")
            else:
                from tmem.corpora.imports import import_corpus

                import_corpus(store, fmt, path, "amp")
        finally:
            store.close()
    except (CorpusError, FileNotFoundError, ValueError) as exc:  # ValueError: a refused annotation or version
        outcome = "refused: " + str(exc)[:300]
    except BaseException as exc:  # noqa: BLE001 - reported, the test fails on it
        import traceback

        outcome = "crash: " + "".join(traceback.format_exception(exc))[-2000:]
    Path(result).write_text(outcome)


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def measure(fmt: str, path: str) -> dict:
    """Import `path` as `fmt` in a forked child; -> its peak RSS (MB), outcome, seconds."""
    with tempfile.TemporaryDirectory(prefix="tmem-amp-") as tmp:
        result = os.path.join(tmp, "result")
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            try:
                _child(fmt, path, os.path.join(tmp, "amp.duckdb"), result)
            finally:
                os._exit(0)
        killed = None
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if _rss_mb(pid) > KILL_MB or time.monotonic() - started > TIMEOUT_S:
                killed = "killed: over the memory cap" if _rss_mb(pid) > KILL_MB else "killed: timeout"
                os.kill(pid, signal.SIGKILL)
                _, status, usage = os.wait4(pid, 0)
                break
            time.sleep(0.02)
        outcome = killed or (Path(result).read_text() if os.path.exists(result) else f"died: status {status}")
        return {"peak_mb": usage.ru_maxrss / 1024, "outcome": outcome, "seconds": time.monotonic() - started}


def resident_mb() -> float:
    """This process's resident peak. Not getrusage's ru_maxrss: Linux carries that over an exec from the process
    that forked us (pytest, hundreds of MB into a suite), while /proc's VmHWM belongs to this image only."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker() -> None:
    """Read `{"fmt", "path"}` lines on stdin, answer one JSON line each on stdout."""
    import tmem.corpora.imports  # noqa: F401 - loaded once, before the forks
    import tmem.corpora.upload  # noqa: F401
    import tmem.store  # noqa: F401

    for fmt in ("evermembench", "groupmembench", "irc", "jsonl", "locomo", "slack"):
        __import__(f"tmem.corpora.{fmt}")
    for module in ("tmem.analysis.stale", "tmem.analysis.annotations", "tmem.evaluation.gold_versions",
                   "tmem.models.llm.batch_client", "tmem.viz.safe"):
        __import__(module)
    print(json.dumps({"ready": resident_mb()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(measure(request["fmt"], request["path"])), flush=True)


class Worker:
    """The worker process, driven from the tests."""

    def __init__(self, cwd: Path):
        env = os.environ | {"PYTHONPATH": str(cwd)}  # the checkout's tmem, not an installed one
        self.proc = subprocess.Popen([sys.executable, __file__], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.ready_mb = json.loads(self.proc.stdout.readline())["ready"]

    def measure(self, fmt: str, path: Path) -> dict:
        self.proc.stdin.write(json.dumps({"fmt": fmt, "path": str(path)}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


if __name__ == "__main__":
    worker()
