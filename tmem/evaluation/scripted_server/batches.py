"""The scripted server's /v1/files and /v1/batches (OpenAI's Batch API shape), kept in memory, with scripted
delays, failures and malformed output for the batch client's measurements and tests.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP

from tmem.evaluation.scripted_server.replies import scripted_reply


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

    def __init__(self, server):
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
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") == "file":
            return part.get_filename() or "upload.jsonl", part.get_payload(decode=True)
    raise ValueError("no file part in the upload")


