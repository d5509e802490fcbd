"""Peak memory against the input for the faults of issue 44 that took memory (rows 1, 2 and 5): each case in its
own process, its peak RSS read from the kernel (/proc/PID/status VmHWM, polled until it ends: os.wait4's ru_maxrss
would carry over the RSS of this process, which holds the fake server's file), killed past --kill-mb (the machine
is shared).

    .venv/bin/python scripts/bench_hardening.py [--cases stale,batch,config] [--mb 100] [--tree PATH]

--tree runs the cases against another checkout (e.g. an export of the commit before the fixes:
`git archive BASE | tar -x -C /tmp/base`) to get the "before" figures.

- stale (row 1): a 1.3 MB JSONL of 10,000 messages and one question with `superseded` and 10,000 one-message gold
  units, imported; the stale check (revision without rollback) on 1,000 and on 10,000 such units; an 80 KB gold
  correction with 10,000 units read (`gold --add`).
- batch (row 2): a Batch API output file of --mb MB (one reply per line) downloaded from a fake Batch API on
  127.0.0.1 (tmem.evaluation.scripted_server, in this process) and saved, then read into the run's replies.
- config (row 5): `backends --backend-config /dev/zero`, and a FIFO (killed after 15 s: it would hang).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def measure(code: str, tree: Path, kill_mb: float, timeout: float, env: dict | None = None) -> dict:
    """Run `code` in a fresh interpreter on `tree`; -> peak RSS (MB), seconds, the last line it printed."""
    started = time.monotonic()
    proc = subprocess.Popen([PYTHON, "-c", code], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed, peak = "", 0.0
    while True:
        pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        rss, peak = _memory_mb(proc.pid, "VmRSS"), max(peak, _memory_mb(proc.pid, "VmHWM"))
        if rss > kill_mb or time.monotonic() - started > timeout:
            killed = f"killed at {rss:.0f} MB" if rss > kill_mb else f"killed after {timeout:.0f} s"
            os.kill(proc.pid, signal.SIGKILL)
            _, status, _ = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    out = proc.stdout.read().strip().splitlines()
    return {"peak_mb": peak, "seconds": time.monotonic() - started,
            "outcome": killed or (out[-1][:160] if out else f"exit {status}")}


def _memory_mb(pid: int, field: str) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# ------------------------------------------------------------------------------------------------ the cases
def stale_inputs(tmp: Path) -> tuple[Path, Path]:
    corpus, fix = tmp / "units.jsonl", tmp / "fix.jsonl"
    with corpus.open("w") as out:
        for i in range(10_000):
            out.write(json.dumps({"id": f"m{i}", "text": "x", "timestamp": f"2025-01-01T{i // 3600 % 24:02d}:"
                                  f"{i // 60 % 60:02d}:{i % 60:02d}"}) + "\n")
        out.write(json.dumps({"kind": "question", "id": "q", "text": "?", "gold_answer": "a", "superseded": "b",
                              "gold_evidence": [[f"m{i}"] for i in range(10_000)]}) + "\n")
    fix.write_text(json.dumps({"scope": "default", "question": "q", "reason": "r",
                               "evidence": [[f"m{i}"] for i in range(10_000)]}) + "\n")
    return corpus, fix


STALE_CHECK = """
from datetime import datetime, timedelta
from tmem.analysis import stale
from tmem.types import Gold, Question, StageTrace, Trace, Usage
n = {n}
if {lift} and hasattr(stale, "MAX_GOLD_UNITS"):
    stale.MAX_GOLD_UNITS = 10 ** 9  # the bound lifted: the check's own memory, linear in the units
units = tuple((f"u{{i}}",) for i in range(n))
times = {{f"u{{i}}": datetime(2025, 1, 1) + timedelta(minutes=i) for i in range(n)}}
t = Trace(Question("q", "s", "?"), "full", "h", "x", evidence_ids=("u0", f"u{{n - 1}}"),
          stages=(StageTrace("seed_retrieval", 0.0, {{}}, Usage(), "offline", True),))
print("finding:", stale.revision_without_rollback(t, Gold("q", "a", units, superseded="b"), times))
"""

GOLD_ADD = """
from tmem.store import Store
from tmem.corpora.imports import import_corpus
from tmem.evaluation.gold_versions import read_corrections
import tmem.limits as limits
store = Store({db!r})
try:
    import_corpus(store, "jsonl", {small!r}, "c")
    print("read", len(read_corrections({fix!r}, store, "c")[0].evidence), "units")
except Exception as exc:
    print("refused:", str(exc)[:150])
"""


def case_stale(tree: Path, tmp: Path, kill_mb: float) -> list[tuple[str, dict]]:
    corpus, fix = stale_inputs(tmp)
    small = tmp / "small.jsonl"  # the same messages, a question with two units: the correction adds 10,000
    lines = corpus.read_text().splitlines()[:-1]
    small.write_text("\n".join(lines + [json.dumps({"kind": "question", "id": "q", "text": "?", "gold_answer": "a",
                                                    "gold_evidence": [["m0"], ["m1"]]})]) + "\n")
    db = tmp / "stale.duckdb"
    out = [(f"import {corpus.stat().st_size / 1e6:.1f} MB JSONL, 10,000 gold units",
            measure(f"import sys; from tmem.cli import main; sys.exit(main(['import', 'jsonl', {str(corpus)!r}, "
                    f"'--corpus', 'units', '--db', {str(tmp / 'imp.duckdb')!r}]))", tree, kill_mb, 300))]
    for n, lift in ((1_000, False), (10_000, False), (10_000, True), (100_000, True)):
        label = f"stale check, {n:,} one-message units" + (", bound lifted" if lift else "")
        out.append((label, measure(STALE_CHECK.format(n=n, lift=lift), tree, kill_mb, 300)))
    out.append((f"gold correction {fix.stat().st_size / 1e3:.0f} KB, 10,000 units",
                measure(GOLD_ADD.format(db=str(db), small=str(small), fix=str(fix)), tree, kill_mb, 300)))
    return out


BATCH_READ = """
from pathlib import Path
path = Path({path!r})
try:
    from tmem.models.llm.batch_client import read_results  # streamed, line by line, with a size cap
    found = read_results(path)
except ImportError:  # before: the whole file read, then parsed
    from tmem.models.llm.batch_client import parse_results
    found = dict(parse_results(path.read_text(encoding="utf-8")))
print(len(found), "replies")
"""


BATCH_DOWNLOAD = """
from pathlib import Path
from tmem.models.llm.batch_client import BatchClient
from tmem.models.llm.openai_backend import Endpoint
api = BatchClient(Endpoint({url!r}, "K", 60, env={{"K": "sk-bench-0123456789abcdef0123"}}))
dest = Path({dest!r})
if hasattr(api, "download"):  # streamed to disk, line by line, with a size cap
    print(api.download("file-big", dest), "bytes saved")
else:  # before: the whole file as one text, scrubbed, then written
    text = api.content("file-big")
    dest.write_text(text, encoding="utf-8")
    print(len(text), "characters saved")
"""


def case_batch(tree: Path, tmp: Path, kill_mb: float, mb: int) -> list[tuple[str, dict]]:
    path = tmp / "out.output.jsonl"
    reply = "x" * 2_000
    with path.open("w") as out:
        i = 0
        while out.tell() < mb * 1_000_000:
            out.write(json.dumps({"id": f"r{i}", "custom_id": f"c{i}", "error": None, "response": {
                "status_code": 200, "body": {"choices": [{"message": {"role": "assistant", "content": reply}}],
                                             "usage": {"prompt_tokens": 10, "completion_tokens": 500}}}}) + "\n")
            i += 1
    size = path.stat().st_size / 1e6
    sys.path.insert(0, str(ROOT))  # this checkout's fake server, in this process (--tree is measured in children)
    from tmem.evaluation.scripted_server import FaultServer

    server = FaultServer()
    try:
        server.batch.files["file-big"] = {"filename": "big", "purpose": "batch_output", "data": path.read_bytes()}
        code = BATCH_DOWNLOAD.format(url=server.base_url, dest=str(tmp / "saved.jsonl"))
        fetched = measure(code, tree, kill_mb, 600)
    finally:
        server.close()
    return [(f"Batch API output {size:.0f} MB downloaded", fetched),
            (f"Batch API output {size:.0f} MB read", measure(BATCH_READ.format(path=str(path)), tree, kill_mb, 600))]


def case_config(tree: Path, tmp: Path, kill_mb: float) -> list[tuple[str, dict]]:
    fifo = tmp / "fifo.toml"
    os.mkfifo(fifo)
    run = "import sys; from tmem.cli import main; sys.exit(main(['backends', '--backend-config', {!r}]))"
    return [("backends --backend-config /dev/zero", measure(run.format("/dev/zero"), tree, kill_mb, 15)),
            ("backends --backend-config FIFO", measure(run.format(str(fifo)), tree, kill_mb, 15))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="stale,batch,config")
    parser.add_argument("--mb", type=int, default=100, help="Size of the Batch API output file (default 100 MB).")
    parser.add_argument("--tree", type=Path, default=ROOT, help="The checkout to measure (default: this one).")
    parser.add_argument("--kill-mb", type=float, default=2000, help="Kill a case past this RSS (default 2000 MB).")
    args = parser.parse_args()
    wanted = args.cases.split(",")
    with tempfile.TemporaryDirectory(prefix="tmem-bench-44-") as tmp:
        results = []
        if "stale" in wanted:
            results += case_stale(args.tree.resolve(), Path(tmp), args.kill_mb)
        if "batch" in wanted:
            results += case_batch(args.tree.resolve(), Path(tmp), args.kill_mb, args.mb)
        if "config" in wanted:
            results += case_config(args.tree.resolve(), Path(tmp), args.kill_mb)
    print(f"tree: {args.tree.resolve()}")
    for label, r in results:
        print(f"{label:<48} peak {r['peak_mb']:7.0f} MB  {r['seconds']:6.1f} s  {r['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
