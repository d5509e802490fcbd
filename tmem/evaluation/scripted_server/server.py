"""A scripted OpenAI-compatible server on 127.0.0.1, in a thread: /v1/chat/completions answers from a script of
behaviours (a reply, a delay, an HTTP error, a malformed body, a dropped connection, ...), /v1/embeddings with small
vectors, /v1/files and /v1/batches as OpenAI's Batch API (batches.py). The measurement scripts (scripts/
measure_concurrency.py, measure_estimate.py, bench_hardening.py) and the tests of the model clients run against
it: the client, its retries, its concurrency and its token accounting are measured with no model behind them. It
records each request's JSON body, never its headers.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tmem.evaluation.scripted_server.batches import FakeBatchAPI
from tmem.evaluation.scripted_server.replies import completion, counted_usage
from tmem.models.settings import BackendSettings

Behaviour = tuple  # ("ok", content) | ("ok_no_usage", content) | ("sleep", s) | ("status", code, body)
#                    | ("bad_body",) | ("reply", fn(request_json) -> content)
#                    | ("echo_auth"[, pad[, status]]): an error (500) whose message echoes the Authorization header
#                      after `pad` characters (so that a cut of the text can fall inside the key)
#                    | ("echo_auth_reply", pad): the same echo as a 200 reply's content
#                    | ("drop",): the connection is closed without an answer (a dropped connection)
#                    | ("paced", fn(request_json) -> (content, seconds, timings)): the reply after `seconds`, with
#                      llama.cpp's `timings` when not None (a server of a given speed)


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


def scripted_settings(base_url: str, **values) -> BackendSettings:
    """BackendSettings with all four roles on `base_url` (timeout 2 s, two retries, the lexical embedder), plus
    dotted overrides (`**{"llm.timeout": 60}`)."""
    merged = {"llm.model": "fault-model", "llm.base_url": base_url, "llm.api_key_env": "TMEM_TEST_API_KEY",
              "llm.timeout": 2, "llm.retries": 2, "embedder.kind": "lexical", **values}
    return BackendSettings.from_sources({}, {}, merged)
