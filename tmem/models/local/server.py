"""The `local` backend: a packaged GGUF model (tmem.models.local.gguf) served by llama.cpp's OpenAI-compatible
server on 127.0.0.1, and the progress of a call to it.

The server (`xllamacpp`, a prebuilt CPU wheel) runs in a subprocess on a fixed loopback port, so the response cache
key (which includes the URL) stays the same from one process to the next; a server already answering on that port
with the same model is reused, one this process started is stopped when it exits. The roles then use the same
OpenAI-compatible path as any endpoint (`tmem.models.llm.openai_backend`). The model names are re-exported here, so
`tmem.models.local.server` stays the one place to import the backend from.
"""
from __future__ import annotations

import atexit
import importlib.util
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from urllib.parse import urlsplit

from tmem.models.local.gguf import (  # noqa: F401 - re-exported: settings, commands, pages and tests use them
    DEFAULT_MODEL,
    DEFAULT_PORT,
    INSTALL_HINT,
    MODELS,
    PRESETS,
    ROLE_DEFAULTS,
    SHARED_DEFAULTS,
    LocalBackendMissing,
    LocalModel,
    assemble,
    model_dir,
    model_path,
    part_paths,
    runtime_missing,
)
from tmem.models.local.recorded import load_recording

# ------------------------------------------------------------------------------------------------ the server
SERVER_SCRIPT = """
import os, sys, time, xllamacpp
path, port, name, n_ctx, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
parent = os.getppid()
p = xllamacpp.CommonParams()
p.model.path = path
p.model_alias = {name}
p.n_ctx = n_ctx
p.n_parallel = 1            # one slot: requests queue, and the slot keeps the last prompt for prefix reuse
p.cache_prompt = True       # reuse the KV cache of the longest common prefix (the fixed instructions come first)
p.n_batch = 512             # the slot reports prompt progress per batch: four reports per 2,048 tokens, not one
p.cpuparams.n_threads = threads
p.cpuparams_batch.n_threads = threads
p.timeout_read = p.timeout_write = 3600
p.hostnames = ["127.0.0.1"]
p.port = port
server = xllamacpp.Server(p)
print("tmem-local-server ready", flush=True)
while os.getppid() == parent:  # the process that started us is gone (even by SIGKILL): stop, free the port
    time.sleep(2)
"""


@dataclass(frozen=True)
class ServerOptions:
    model: str = DEFAULT_MODEL
    port: int = DEFAULT_PORT
    n_ctx: int = 16384
    threads: int = 2
    timeout_floor: float = 60.0  # seconds: the shortest timeout of a call (tmem.models.local.pace)
    timeout_cap: float = 1800.0  # seconds: the longest

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def _get_json(url: str, timeout: float = 2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def serving(port: int) -> list[str] | None:
    """Model ids of a healthy server on the port; None when nothing healthy answers there."""
    try:
        if _get_json(f"http://127.0.0.1:{port}/health").get("status") != "ok":
            return None
        return [m.get("id", "") for m in _get_json(f"http://127.0.0.1:{port}/v1/models").get("data", [])]
    except (OSError, ValueError):
        return None


class LocalServer:
    """The process's llama.cpp server (or the one found running with the same model on the port)."""

    def __init__(self, options: ServerOptions, log: Callable[[str], None] | None = None):
        self.options, self.proc, self.reused = options, None, False
        self.log_path = model_dir() / f"server-{options.port}.log"
        self._log = log or (lambda line: None)

    def start(self, timeout: float = 300.0) -> LocalServer:
        o = self.options
        running = serving(o.port)
        if running is not None:
            if o.model not in running:
                raise ValueError(f"port {o.port} on 127.0.0.1 serves {running or 'an unknown model'}, not {o.model}; "
                                 f"stop it or pick another port (--local-port / TMEM_LOCAL_PORT)")
            self.reused = True
            self._log(f"local model: reusing the server on 127.0.0.1:{o.port} ({o.model})")
            return self
        missing = runtime_missing()
        if missing:
            raise LocalBackendMissing(missing)
        gguf = model_path(o.model, progress=_assembly_log(self._log))
        self._log(f"local model: starting llama.cpp on 127.0.0.1:{o.port} with {MODELS[o.model].title}, "
                  f"n_ctx {o.n_ctx}, {o.threads} threads (log: {self.log_path})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(gguf), str(o.port), o.model,
                                          str(o.n_ctx), str(o.threads)], stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)  # a Ctrl-C in the terminal reaches us, not it
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalBackendMissing(f"the local llama.cpp server exited with code {self.proc.returncode}; "
                                          f"see {self.log_path}")
            if serving(o.port) is not None:
                return self
            time.sleep(0.5)
        self.stop()
        raise LocalBackendMissing(f"the local llama.cpp server was not ready after {timeout:.0f} s; see "
                                  f"{self.log_path}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _assembly_log(log: Callable[[str], None]) -> Callable[[int, int], None]:
    state = {"tenth": -1}

    def progress(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if tenth > state["tenth"]:
            state["tenth"] = tenth
            log(f"local model: assembling the GGUF from its parts (once): {done / total:.0%}")
    return progress


_SERVERS: dict[ServerOptions, LocalServer] = {}
_LOCK = threading.Lock()


def ensure_server(options: ServerOptions, log: Callable[[str], None] | None = None) -> LocalServer:
    """Start the server once per process (or reuse one that answers on the port with the same model)."""
    with _LOCK:
        server = _SERVERS.get(options)
        if server is not None and (server.proc is None or server.proc.poll() is None) \
                and serving(options.port) is not None:
            return server
        server = LocalServer(options, log).start()
        _SERVERS[options] = server
        return server


# ---------------------------------------------------------------------------------------- progress of a call
def slot_progress(port: int) -> dict | None:
    """What the server's only slot is doing (llama.cpp /slots): prompt tokens read of the total, those reused from
    the prefix cache, tokens generated and left; None when idle or unreachable."""
    try:
        slots = _get_json(f"http://127.0.0.1:{port}/slots", timeout=1.0)
    except (OSError, ValueError):
        return None
    busy = [s for s in slots if isinstance(s, dict) and s.get("is_processing")]
    if not busy:
        return None
    s, token = busy[0], (busy[0].get("next_token") or [{}])[0]
    return {"prompt": int(s.get("n_prompt_tokens", 0)), "read": int(s.get("n_prompt_tokens_processed", 0)),
            "cached": int(s.get("n_prompt_tokens_cache", 0)), "generated": int(token.get("n_decoded", 0)),
            "task": s.get("id_task")}


class CallMeter:
    """What this process has asked the local server (per port): the prompt size of the call in flight (counted
    client-side, as /slots only shows the batches read so far) and the prompt-reading rate of the last call, for
    an ETA before the first batch of a new call is read."""

    def __init__(self):
        self.current: dict[int, tuple[int, float]] = {}  # port -> (prompt tokens estimated, started)
        self.rate: dict[int, float] = {}  # port -> prompt tokens/s measured on the last call

    def wrap(self, client, port: int, counter):
        """`client` (an openai.OpenAI) with its chat.completions.create metered."""
        meter, inner = self, client.chat.completions

        class Completions:
            def create(self, **kwargs):
                tokens = sum(counter.count(m.get("content") or "") for m in kwargs.get("messages", []))
                meter.current[port] = (tokens, time.monotonic())
                try:
                    response = inner.create(**kwargs)
                    timings = (getattr(response, "model_extra", None) or {}).get("timings") or {}
                    if timings.get("prompt_per_second"):
                        meter.rate[port] = float(timings["prompt_per_second"])
                    return response
                finally:
                    meter.current.pop(port, None)

        class Chat:
            completions = Completions()

        class Client:
            chat = Chat()
        return Client()


METER = CallMeter()


def progress_line(state: dict, elapsed: float, total: int | None, rate: float | None) -> str:
    """One line for the terminal or the app: what the local model is doing and about how long reading the rest of
    the prompt takes (`total`: the prompt size counted when the call was made; `rate`: tokens/s measured during
    this call, else on the last one). Generation time cannot be known in advance: the ETA covers the prompt."""
    read = state["read"] + state["cached"]
    total = max(total or 0, state["prompt"], read)
    todo = total - read
    if state["generated"]:
        eta = ", writing the reply"
    elif todo and rate:
        eta = f", ETA ~{todo / rate:.0f} s to read the rest of the prompt at {rate:.0f} tokens/s"
    else:
        eta = ""
    return (f"local model: prompt {read:,}/~{total:,} tokens read ({state['cached']:,} reused from the prefix "
            f"cache), {state['generated']} reply tokens, {elapsed:.0f} s{eta}")


class ProgressWatch:
    """A daemon thread that polls the server's slot every `interval` seconds while a call runs and reports one
    line per change to `report` (the CLI prints it on stderr; the app writes it into a placeholder)."""

    def __init__(self, port: int, report: Callable[[str], None], interval: float = 3.0,
                 prepare: Callable[[threading.Thread], None] | None = None):
        self.port, self.report, self.interval = port, report, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tmem-local-progress")
        if prepare:  # e.g. Streamlit's add_script_run_ctx, so that the thread may update the page
            prepare(self._thread)

    def __enter__(self) -> ProgressWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(2 * self.interval)

    def _run(self) -> None:
        task, seen, first = None, 0.0, 0
        while not self._stop.wait(self.interval):
            state = slot_progress(self.port)
            if state is None:
                continue
            now = time.monotonic()
            total, started = METER.current.get(self.port, (None, now))
            if state["task"] != task:
                task, seen, first = state["task"], now, state["read"]
            rate = (state["read"] - first) / (now - seen) if state["read"] > first else METER.rate.get(self.port)
            self.report(progress_line(state, now - started, total, rate))


def local_port(roles) -> int | None:
    """The port of the local server behind any of `roles` (None when no role is served by it)."""
    for name in ("evidence_utility", "relation", "answer", "judge"):
        client = getattr(getattr(roles, name), "client", None)
        if client is not None and client.settings.backend == "local":
            return urlsplit(client.settings.base_url).port
    return None


def watch(roles, report: Callable[[str], None], interval: float = 3.0,
          prepare: Callable[[threading.Thread], None] | None = None):
    """A ProgressWatch when a role is served by the local server, else a no-op context."""
    port = local_port(roles)
    return ProgressWatch(port, report, interval, prepare) if port else nullcontext()


def backend_presets() -> dict[str, str]:
    """Preset -> what it means here and now (installed or not, which recording), for the Settings page."""
    title = MODELS[DEFAULT_MODEL].title.split(" (")[0]
    missing = runtime_missing() or next((f"model not installed: {INSTALL_HINT}" for p in MODELS[DEFAULT_MODEL].parts
                                         if importlib.util.find_spec(p) is None), None)
    status = f" — {missing}" if missing else ""
    try:
        recording = load_recording().label
    except ValueError as exc:
        recording = f"recording unavailable: {exc}"
    return {"": "Per role (below); offline by default",
            "local": f"local (hybrid): offline selection and structuring, {title} answers and judges{status}",
            "local-all": f"local, all four roles on {title} (minutes per question; a weak structurer){status}",
            "recorded": f"{recording}: hybrid, replayed (demo questions only, instant)",
            "recorded-all": f"{recording}: all four roles, replayed (the curated question at k = 8 only)",
            "offline": "offline stand-ins for all four roles"}
