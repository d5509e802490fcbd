"""Batch runs started from the app: each is the command line's own `python -m tmem run`, in a
child process at low CPU priority on the app's database, one variant after another into one run folder.

Why a child process and not a thread: the run is exactly what the CLI does (same code, same validators, same
records and resume), it never competes with the app's page rendering for the interpreter lock, `nice` keeps the
app responsive on a small machine (niceness NICE, or $TMEM_BATCH_NICE), and it exercises the mechanism that lets
the CLI write while the app is open (tmem.store.lease: each process holds the DuckDB file only while it queries).
One variant per child: the run folder keeps one run id (run.json), and each finished variant's validated rows land
in DuckDB at once, so the Failures and Compare pages fill variant by variant while the rest still runs. Progress is
read from the run folder's stage records (one JSONL line per question and stage, tmem.evaluation.batch.records),
the ETA from the rate so far.

`start_batch` refuses a second job on the same database while one runs (two batch runs on two cores only slow
each other down). `ensure_demo_batch` starts the demo's offline batch over all its questions and the main variants
when the demo corpus has no stored run, so Failures and Compare are not empty on a first start.
"""
from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tmem.evaluation.batch.spend import spend_note
from tmem.limits import path_under, safe_name
from tmem.models.llm import endpoints
from tmem.models.settings import SETTINGS
from tmem.pipeline.methods import get_method
from tmem.pipeline.stages import plan

MAIN_VARIANTS = ("full", "flat", "no-discovery", "no-structuring")  # the paper's main ablations (Sec. 5.5)
DEMO_RUN = "demo-offline"  # the run folder (and run id prefix) of the demo's out-of-the-box batch
NICE = 10  # the default niceness of a batch child: the app's pages keep the CPU while a batch computes
# TMEM_BATCH_NICE: how much lower than the app's a batch child's CPU priority is, 0 (the same) to 19; default NICE.
# The test suite sets 0 (tests/conftest.py): beside other busy processes a niceness-10 child gets about a ninth of
# the CPU share of each (Linux CFS weights 110 against 1024), and the test waiting for it waits that much longer.
NICE_ENV = "TMEM_BATCH_NICE"
COMPLETE = "app-job-complete.json"  # written in the run folder when every variant was stored
PLAN = "app-job.json"  # written in the run folder when the batch starts: the variants it was started with
_JOBS: dict[str, list[BatchJob]] = {}  # database path -> its jobs, newest last (process-wide: every session sees them)
_LOCK = threading.Lock()
ROOT = Path(__file__).resolve().parents[3]


def child_niceness(env: Mapping[str, str] | None = None) -> int:
    """The niceness a batch child gets ($TMEM_BATCH_NICE, default NICE); a value that is not 0-19 is a warning
    naming the variable, and the default is used."""
    raw = (os.environ if env is None else env).get(NICE_ENV, "").strip()
    if not raw:
        return NICE
    if raw.isdigit() and int(raw) <= 19:
        return int(raw)
    warnings.warn(f"{NICE_ENV}={raw!r}: not a niceness from 0 to 19; batch children get the default {NICE}",
                  stacklevel=2)
    return NICE


@dataclass
class Progress:
    state: str  # "running", "done", "failed" or "cancelled"
    done: int  # stage records written (one per question and stage)
    total: int
    variant: str | None  # the variant running now
    finished: tuple[str, ...]  # variants whose results are stored
    elapsed_s: float
    eta_s: float | None
    message: str  # what happened, in one line
    spend: str = ""  # model calls, tokens and cost so far (tmem.evaluation.batch.spend), empty before any

    @property
    def fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 1.0


@dataclass
class BatchJob:
    db: Path
    corpus: str
    variants: tuple[str, ...]
    questions: int  # after the types and limit filters
    out: Path
    types: tuple[str, ...] = ()
    limit: int | None = None
    backend: dict = field(default_factory=dict)  # backend settings (tmem.models.settings keys) -> env of the child
    label: str = ""
    started: float = field(default_factory=time.time)
    finished_at: float | None = None
    stored: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    cancelled: bool = False
    current: str | None = None
    _proc: subprocess.Popen | None = None
    budget: dict = field(default_factory=dict)  # prices and cap (budget.* settings) -> env of the child
    nice: int = field(default_factory=child_niceness)  # how much lower the child's CPU priority is than the app's
    # a key typed in the browser session, for the child's environment only: never in a file, a log or a repr
    secrets: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------------------------------ the child
    def command(self, variant: str) -> list[str]:
        cmd = [sys.executable, "-m", "tmem", "run", "--db", str(self.db), "--corpus", self.corpus, "--variants",
               variant, "--out", str(self.out), "--quiet"]
        if self.types:
            cmd += ["--types", ",".join(self.types)]
        if self.limit is not None:
            cmd += ["--limit", str(self.limit)]
        return cmd

    def env(self) -> dict[str, str]:
        """The app's environment plus this job's backend settings as the TMEM_* variables the CLI reads (an API
        key stays in the variable its setting names: only that name travels). The offline preset drops the app's
        own model settings, so an offline batch is offline whatever the server was started with."""
        env = dict(os.environ)
        if self.backend.get("backend.preset") == "offline":
            for key in [k for k in SETTINGS if k.split(".")[0] in ("llm", "roles", "backend", "local")]:
                env.pop(SETTINGS[key].env, None)
        extra = {SETTINGS[k].env: str(v) for k, v in {**self.backend, **self.budget}.items()
                 if k in SETTINGS and v not in (None, "")}
        return {**env, **extra, **self.secrets, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                                   os.environ.get("PYTHONPATH")]))}

    def _run(self) -> None:
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / PLAN).write_text(json.dumps({"corpus": self.corpus, "variants": list(self.variants)}),
                                         encoding="utf-8")
            with open(self.out / "app-job.log", "a", encoding="utf-8") as log:
                for variant in self.variants:
                    if self.cancelled:
                        break
                    self.current = variant
                    log.write(f"\n$ {' '.join(self.command(variant))}\n")
                    log.flush()
                    self._proc = subprocess.Popen(self.command(variant), cwd=ROOT, env=self.env(), stdout=log,
                                                  stderr=subprocess.STDOUT, preexec_fn=self._lower_priority())
                    if self.cancelled:  # cancelled while this child started: cancel() found no child to stop, and
                        self._proc.terminate()  # the child ran its whole variant (under load, the suite waited 60 s)
                    code = self._proc.wait()
                    (self.stored if code == 0 else self.failed).append(variant)
            if not self.failed and not self.cancelled:
                (self.out / COMPLETE).write_text(json.dumps({"variants": list(self.stored)}), encoding="utf-8")
        except OSError as exc:  # no run folder, no child: the job ends as failed, with the reason
            self.failed.append(f"{self.current or 'the batch'} ({exc})")
        finally:
            self.current, self._proc, self.finished_at = None, None, time.time()

    def _lower_priority(self):
        """What the child runs before exec: os.nice(self.nice); nothing at 0 (the same priority as the app)."""
        nice = self.nice
        return (lambda: os.nice(nice)) if nice else None

    def start(self) -> BatchJob:
        threading.Thread(target=self._run, name=f"tmem-batch-{self.label}", daemon=True).start()
        return self

    def cancel(self) -> None:
        self.cancelled = True
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()

    @property
    def running(self) -> bool:
        return self.finished_at is None

    # ------------------------------------------------------------------------------------------- progress
    def stages(self, variant: str) -> tuple[str, ...]:
        return plan(get_method(variant))

    def progress(self) -> Progress:
        total = sum(len(self.stages(v)) for v in self.variants) * self.questions
        done = sum(min(_lines(self.out / v / f"{s}.jsonl"), self.questions) for v in self.variants
                   for s in self.stages(v))
        elapsed = (self.finished_at or time.time()) - self.started
        # no estimate before a tenth is done: the first records include the child's start-up
        eta = elapsed * (total - done) / done if self.running and total and done / total >= 0.1 else None
        state = "running" if self.running else "cancelled" if self.cancelled else "failed" if self.failed else "done"
        return Progress(state, done, total, self.current, tuple(self.stored), elapsed, eta, self._message(state),
                        spend_note(self.out))

    def _message(self, state: str) -> str:
        if state == "running":
            return f"running {self.current or '…'} ({len(self.stored)} of {len(self.variants)} variants stored)"
        if state == "failed":
            return (f"{', '.join(self.failed)} did not finish or failed validation; see {self.out / 'app-job.log'} "
                    "(rerun the same batch to resume)")
        return f"{state}: {len(self.stored)} of {len(self.variants)} variants stored"

    @property
    def run_id(self) -> str | None:
        """The run id its results are stored under (the run folder's run.json), once the first child wrote it."""
        try:
            return json.loads((self.out / "run.json").read_text(encoding="utf-8")).get("run_id")
        except (OSError, ValueError):
            return None

    def summary(self) -> dict | None:
        """The last variant's summary.json (the CLI's figures), if one was written."""
        path = self.out / "summary.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


@atexit.register
def _stop_children() -> None:
    """A batch child dies with the app that started it (the demo batch resumes on the next start)."""
    for job_list in list(_JOBS.values()):
        for job in job_list:
            job.cancel()


def _lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def incomplete_note(store, corpus: str, run_id: str) -> str:
    """"" unless `run_id` is a batch started from the app that stopped before storing every variant it was started
    with (the app was stopped or killed during it, or a variant failed), and none is running it now: then what is
    missing, e.g. "incomplete: 3 of 4 variants stored (no-structuring missing)". Its run folder is the id without
    its suffix under runs_folder (tmem.evaluation.batch.manifest.run_identity)."""
    try:
        folder = path_under(runs_folder(store.path), run_id.rsplit("-", 1)[0])
        started = json.loads((folder / PLAN).read_text(encoding="utf-8"))
        same = json.loads((folder / "run.json").read_text(encoding="utf-8")).get("run_id") == run_id
    except (OSError, ValueError, AttributeError):
        return ""  # not a batch started from the app (or from before the plan was written)
    variants = [v for v in started.get("variants", []) if isinstance(v, str)] if isinstance(started, dict) else []
    if not same or not variants or (folder / COMPLETE).exists() or any(
            j.running and j.out.resolve() == folder for j in jobs(store.path)):
        return ""
    stored = set(store.run_variants(corpus, run_id))
    missing = [v for v in variants if v not in stored]
    if not missing:
        return ""
    return (f"incomplete: {len(variants) - len(missing)} of {len(variants)} variants stored ({', '.join(missing)} "
            "missing; the batch stopped before it finished — start it again to resume)")


def runs_folder(db: Path) -> Path:
    return Path(db).resolve().parent / "runs"


def jobs(db: Path) -> list[BatchJob]:
    with _LOCK:
        return list(_JOBS.get(str(Path(db).resolve()), []))


def active(db: Path) -> BatchJob | None:
    return next((j for j in reversed(jobs(db)) if j.running), None)


def start_batch(db: Path, corpus: str, variants, questions: int, *, types=(), limit: int | None = None,
                backend: dict | None = None, label: str | None = None, out: Path | None = None,
                budget: dict | None = None, session_key: str | None = None) -> BatchJob:
    """Start a batch run in the background (a child `python -m tmem run` per variant); ValueError when one runs,
    or when `backend` (a browser session's overrides) names an endpoint the operator did not configure.
    `budget`: prices and a cost cap (budget.* settings), apart from the backend: they choose no endpoint."""
    backend = dict(backend or {})
    endpoints.check_overrides(backend)
    secrets = {endpoints.SESSION_KEY_ENV: session_key or ""} if endpoints.SESSION_KEY_ENV in backend.values() else {}
    variants = tuple(dict.fromkeys(variants))
    if not variants:
        raise ValueError("choose at least one variant")
    for name in variants:
        try:
            get_method(name)
        except KeyError as exc:  # an unknown name fails here, with the list of known ones
            raise ValueError(exc.args[0]) from None
    with _LOCK:
        key = str(Path(db).resolve())
        if any(j.running for j in _JOBS.get(key, [])):
            raise ValueError("a batch run is already running on this database; wait for it or cancel it")
        label = safe_name(label or f"{safe_name(corpus, 'corpus name')}-app-{datetime.now():%Y%m%d-%H%M%S}",
                          "run name")
        job = BatchJob(Path(db).resolve(), corpus, variants, questions, out or path_under(runs_folder(db), label),
                       tuple(types), limit, backend, label,
                       budget={k: v for k, v in (budget or {}).items() if k.startswith("budget.")}, secrets=secrets)
        _JOBS.setdefault(key, []).append(job)
    return job.start()


def ensure_demo_batch(store, corpus: str = "demo") -> BatchJob | None:
    """The demo's offline batch over all its questions and MAIN_VARIANTS, started once per app process when the
    corpus has no stored run, or when this batch did not complete before (the app stopped: it resumes from its run
    folder, skipping what is done). Off with TMEM_DEMO_BATCH=off (the test suite)."""
    if os.environ.get("TMEM_DEMO_BATCH", "on").lower() in ("0", "off", "false", "no") or str(store.path) == ":memory:":
        return None
    if jobs(store.path) or not store.has_corpus(corpus):
        return None  # started once in this process (finished, failed or cancelled: the user decides now)
    folder = runs_folder(store.path) / DEMO_RUN
    if (folder / COMPLETE).exists() or (not folder.exists() and store.run_ids(corpus)):
        return None
    questions = len(store.questions(corpus))
    if not questions:
        return None
    try:
        return start_batch(store.path, corpus, MAIN_VARIANTS, questions, backend={"backend.preset": "offline"},
                           label=DEMO_RUN)
    except ValueError:
        return None
