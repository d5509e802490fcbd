"""Memory and time of imports at the limits (issue 13): peak RSS per 100 MB of input, a zip bomb, a huge message.

Generates its inputs in a temporary folder (nothing is downloaded), runs each import as its own
`python -m tmem import` process and reads that process's peak RSS from the kernel (os.wait4). Target: at most
1 GB of peak RSS per 100 MB of input.

    .venv/bin/python scripts/bench_limits.py [--mb 100] [--keep DIR]

Cases: (1) ~100 MB JSONL (the project's format, streamed line by line); (2) the same messages as one ~100 MB
GroupMemBench conversation file (one JSON document, parsed whole); (3) one 50 MB message, imported (truncated to
TMEM_MAX_MESSAGE_CHARS) and asked; (4) a 1 MB zip that expands to 1 GiB, uploaded (refused by the upload limit),
and one expanding to 500 MiB (under it: extracted, then refused by the parser).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the bomb case imports tmem in this process
PYTHON = sys.executable


def message(i: int) -> dict:
    return {"kind": "message", "scope": "bench", "id": f"m{i}", "author": f"User_{i % 40}", "role": "Engineer",
            "channel": f"#c{i % 7}", "topic": f"topic {i % 13}", "phase": "Build", "stage": 2,
            "timestamp": f"2025-{1 + i // 900_000 % 12:02d}-{1 + i // 30_000 % 28:02d}T{i // 1250 % 24:02d}:"
                         f"{i // 21 % 60:02d}:{i % 60:02d}",
            "text": f"Message {i}: the deploy of service {i % 97} moved to slot {i % 11}; " + "lorem ipsum " * 14}


def write_jsonl(path: Path, target_bytes: int) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as out:
        while out.tell() < target_bytes:
            out.write(json.dumps(message(count)) + "\n")
            count += 1
    return count


def write_groupmembench(root: Path, target_bytes: int) -> int:
    folder = root / "data" / "final" / "Bench"
    folder.mkdir(parents=True)
    channels: dict[str, list] = {}
    size, count = 0, 0
    while size < target_bytes:
        m = message(count)
        record = {"msg_node": m["id"], "content": m["text"], "author": m["author"], "role": m["role"],
                  "timestamp": m["timestamp"], "topic": m["topic"], "phase_name": m["phase"], "stage": 2,
                  "reply_to": f"m{count - 1}" if count else None}
        channels.setdefault(m["channel"], []).append(record)
        size += len(json.dumps(record)) + 2
        count += 1
    (folder / "synthetic_domain_channels_rolevariants_Bench.json").write_text(json.dumps(channels))
    return count


def run(args: list[str], env: dict | None = None) -> tuple[int, float, float, str]:
    """(exit code, seconds, peak RSS in MB, last stderr line) of one tmem command in its own process."""
    started = time.perf_counter()
    process = subprocess.Popen([PYTHON, "-m", "tmem", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    err = process.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    last = (err.strip().splitlines() or [""])[-1][:160]
    return process.returncode, time.perf_counter() - started, usage.ru_maxrss / 1024, last


def bomb_upload(tmp: Path, mib: int = 1024) -> tuple[float, float, str]:
    """Upload a zip expanding to `mib` MiB in this process; -> (seconds, peak RSS growth in MB, outcome)."""
    import resource

    from tmem.corpora.upload import import_upload
    from tmem.store import Store

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("acme/general/2024-01-01.json", "w", force_zip64=True) as member:
            block = b" " * (1 << 20)
            for _ in range(mib):
                member.write(block)
        archive.writestr("acme/channels.json", b'[{"id": "C1", "name": "general"}]')
    content = buffer.getvalue()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    store = Store(tmp / "bomb.duckdb")
    started = time.perf_counter()
    try:
        import_upload(store, "slack", [("bomb.zip", content)], "bomb")
        outcome = "imported (NOT refused)"
    except ValueError as exc:
        outcome = f"refused: {exc}"
    seconds = time.perf_counter() - started
    store.close()
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    return seconds, grown, f"zip of {len(content) / 1e6:.1f} MB; {outcome[:150]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=100, help="size of the generated inputs in MB (default 100)")
    parser.add_argument("--keep", type=Path, help="write the inputs here and keep them (default: a temp folder)")
    args = parser.parse_args()
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="tmem-bench-limits-"))
    tmp.mkdir(parents=True, exist_ok=True)
    target = args.mb * 1_000_000
    rows = []

    jsonl = tmp / "bench.jsonl"
    n = write_jsonl(jsonl, target)
    size = jsonl.stat().st_size / 1e6
    code, seconds, rss, last = run(["import", "jsonl", str(jsonl), "--db", str(tmp / "a.duckdb")])
    rows.append(("jsonl", f"{size:.0f} MB, {n:,} msgs", code, seconds, rss, rss / size * 100))

    n = write_groupmembench(tmp / "gmb", target)
    size = sum(p.stat().st_size for p in (tmp / "gmb").rglob("*.json")) / 1e6
    code, seconds, rss, last = run(["import", "groupmembench", str(tmp / "gmb"), "--db", str(tmp / "b.duckdb")])
    rows.append(("groupmembench", f"{size:.0f} MB, {n:,} msgs", code, seconds, rss, rss / size * 100))

    huge = tmp / "huge.jsonl"
    huge.write_text(json.dumps({"id": "m0", "text": "budget " * 7_500_000, "timestamp": "2025-01-01T10:00",
                                "scope": "s"}) + "\n" + json.dumps({"id": "m1", "text": "the budget moved",
                                                                     "timestamp": "2025-01-01T11:00", "scope": "s"}))
    size = huge.stat().st_size / 1e6
    code, seconds, rss, last = run(["import", "jsonl", str(huge), "--db", str(tmp / "c.duckdb"), "--corpus", "huge"])
    rows.append(("one 50 MB message", f"{size:.0f} MB", code, seconds, rss, rss / size * 100))
    code, seconds, rss, last = run(["ask", "--db", str(tmp / "c.duckdb"), "--corpus", "huge", "--scope", "s",
                                    "--text", "What about the budget?", "--no-save"])
    rows.append(("ask on it", "", code, seconds, rss, None))

    print(f"{'case':<20} {'input':<26} {'exit':>4} {'seconds':>8} {'peak RSS MB':>12} {'MB RSS / 100 MB':>16}")
    for case, what, code, seconds, rss, per in rows:
        print(f"{case:<20} {what:<26} {code:>4} {seconds:>8.1f} {rss:>12.0f} "
              f"{'' if per is None else f'{per:.0f}':>16}")
    for mib in (1024, 500):  # far over the upload limit, and just under it (extracted, then parsed)
        seconds, grown, outcome = bomb_upload(tmp, mib)
        print(f"zip bomb upload expanding to {mib} MiB: {seconds:.2f} s, peak RSS grew {grown:.0f} MB; {outcome}")
    ok = all(per is None or per <= 1000 for *_, per in rows)
    print("target (<= 1,000 MB RSS per 100 MB of input):", "met" if ok else "NOT met")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
