"""The Batch API of LocalModelServer: uploaded files, batches and their life cycle.

OpenAI's Batch API (and the servers that copy it) takes a JSONL file of requests, answers them
within a completion window and leaves the answers in an output file (errors in an error file).
`BatchBook` keeps the files and batches of one server and moves each batch along when it is
looked at: ``validating`` -> ``in_progress`` (for ``delay`` seconds) -> ``completed``, or
``failed`` (bad input or a `BatchFault`), ``expired`` (a `BatchFault`), ``cancelling`` ->
``cancelled``. Each request is answered by the server's own answer function, the one its live
endpoints use, so a batch gives the same answers as live calls. ``finalizing`` is passed
through within one look (``finalizing_at`` is set).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalnb.testing._http import BadRequest, multipart_fields
from evalnb.testing._replies import error_reply

BATCH_ENDPOINTS = ("/v1/responses", "/v1/chat/completions", "/v1/completions", "/v1/embeddings")
WINDOWS = ("24h",)
FILE_PURPOSES = ("batch", "batch_output", "assistants", "fine-tune", "vision", "user_data", "evals")
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."

# (status, body) of one request, as the live endpoint would answer it
Answer = Callable[[str, dict], tuple[int, Any]]
Reply = tuple[int, bytes, dict[str, str]]


@dataclass(frozen=True)
class BatchFault:
    """A scripted misbehaviour of a whole batch (`LocalModelServer(batch_faults=[...])`).

    ``fail``: the batch fails as a whole (status ``failed``) with this message; ``expire_after``:
    only the first N requests are answered, the rest expire (status ``expired``, the rest in the
    error file as ``batch_expired``). ``times``: only the first N batches created misbehave
    (later ones, e.g. a retry, go through). Per-request failures come from the server's
    ordinary `Fault` list, which applies to batched requests as to live ones.
    """

    fail: str | None = None
    expire_after: int | None = None
    times: int | None = None

    def __post_init__(self) -> None:
        if self.fail is None and self.expire_after is None:
            raise ValueError("BatchFault needs fail='message' or expire_after=N")
        if self.expire_after is not None and self.expire_after < 0:
            raise ValueError(f"BatchFault.expire_after must be >= 0, got {self.expire_after}")
        if self.times is not None and self.times < 0:
            raise ValueError(f"BatchFault.times must be >= 0, got {self.times}")


@dataclass
class StoredFile:
    info: dict[str, Any]
    content: bytes


class BatchBook:
    """Files and batches of one server; `handle` answers the Batch API's HTTP routes."""

    def __init__(self, answer: Answer, *, delay: float = 0.0,
                 faults: Sequence[BatchFault] | None = None) -> None:
        if not isinstance(delay, (int, float)) or isinstance(delay, bool) or delay < 0:
            raise ValueError(f"batch_delay must be seconds >= 0, got {delay!r}")
        for f in faults or ():
            if not isinstance(f, BatchFault):
                raise TypeError(f"batch_faults must be BatchFault objects, got {type(f).__name__}")
        self._answer = answer
        self.delay = float(delay)
        self._faults = list(faults or ())
        self.reset()

    def reset(self) -> None:
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._lines: dict[str, list[dict]] = {}  # batch id -> its validated requests
        self._fault_of: dict[str, BatchFault | None] = {}
        self._started: dict[str, float] = {}  # batch id -> when it went in_progress (monotonic)
        self._seen = [0] * len(self._faults)
        self.uploads = 0  # files uploaded (POST /v1/files)
        self.created = 0  # batches created
        self.batched_requests = 0  # requests answered inside batches

    # ---- routing --------------------------------------------------------------------------
    @staticmethod
    def serves(path: str) -> bool:
        return path == "/v1/files" or path.startswith(("/v1/files/", "/v1/batches"))

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        """Answer one Batch API request: (status, body bytes, extra headers)."""
        parts = path.strip("/").split("/")[1:]  # without "v1"
        try:
            if parts == ["files"] and method == "POST":
                return _ok(self._upload(headers, body))
            if parts == ["files"] and method == "GET":
                return _ok(_listing([f.info for f in self.files.values()]))
            if len(parts) == 2 and parts[0] == "files":
                stored = self._file(parts[1])
                if method == "DELETE":
                    del self.files[parts[1]]
                    return _ok({"id": parts[1], "object": "file", "deleted": True})
                if method == "GET":
                    return _ok(stored.info)
            if len(parts) == 3 and parts[0] == "files" and parts[2] == "content" and method == "GET":
                return 200, self._file(parts[1]).content, {"_ctype": "application/octet-stream"}
            if parts == ["batches"] and method == "POST":
                return _ok(self._create(_json_body(body)))
            if parts == ["batches"] and method == "GET":
                return _ok(_listing([self._advance(b) for b in reversed(self.batches.values())]))
            if len(parts) == 2 and parts[0] == "batches" and method == "GET":
                return _ok(self._advance(self._batch(parts[1])))
            if len(parts) == 3 and parts[0] == "batches" and parts[2] == "cancel" and method == "POST":
                return _ok(self._cancel(self._batch(parts[1])))
        except BadRequest as exc:
            return exc.status, _dumps(error_reply(exc.status, str(exc))), {}
        return 404, _dumps(error_reply(404, f"unknown path {method} {path}")), {}

    # ---- files ----------------------------------------------------------------------------
    def _upload(self, headers: dict[str, str], body: bytes) -> dict:
        fields = multipart_fields(headers.get("content-type", ""), body)
        purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace")
        if purpose not in FILE_PURPOSES:
            raise BadRequest(400, f"purpose must be one of {', '.join(FILE_PURPOSES)}, got {purpose!r}")
        if "file" not in fields:
            raise BadRequest(400, "missing the 'file' field")
        filename, content = fields["file"]
        self.uploads += 1
        return self._store(filename or "upload.jsonl", content, purpose).info

    def _store(self, filename: str, content: bytes, purpose: str) -> StoredFile:
        fid = f"file-{uuid.uuid4().hex[:24]}"
        info = {"id": fid, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                "filename": filename, "purpose": purpose, "status": "processed", "expires_at": None,
                "status_details": None}
        stored = self.files[fid] = StoredFile(info, content)
        return stored

    def _file(self, fid: str) -> StoredFile:
        stored = self.files.get(fid)
        if stored is None:
            raise BadRequest(404, f"No such File object: {fid}")
        return stored

    # ---- batches --------------------------------------------------------------------------
    def _create(self, params: dict) -> dict:
        fid = params.get("input_file_id")
        endpoint = params.get("endpoint")
        window = params.get("completion_window")
        if not isinstance(fid, str) or fid not in self.files:
            raise BadRequest(400, f"input_file_id: no such file {fid!r}")
        if self.files[fid].info["purpose"] != "batch":
            raise BadRequest(400, f"input_file_id: file {fid} was uploaded with purpose "
                                  f"{self.files[fid].info['purpose']!r}, not 'batch'")
        if endpoint not in BATCH_ENDPOINTS:
            raise BadRequest(400, f"endpoint must be one of {', '.join(BATCH_ENDPOINTS)}, got {endpoint!r}")
        if window not in WINDOWS:
            raise BadRequest(400, f"completion_window must be '24h', got {window!r}")
        metadata = params.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise BadRequest(400, "metadata must be an object")
        now = int(time.time())
        bid = f"batch_{uuid.uuid4().hex}"
        self.created += 1
        self._fault_of[bid] = self._pick_fault()
        batch = {
            "id": bid, "object": "batch", "endpoint": endpoint, "errors": None, "input_file_id": fid,
            "completion_window": window, "status": "validating", "output_file_id": None,
            "error_file_id": None, "created_at": now, "in_progress_at": None, "expires_at": now + 86400,
            "finalizing_at": None, "completed_at": None, "failed_at": None, "expired_at": None,
            "cancelling_at": None, "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": metadata,
            "model": None,
        }
        self.batches[bid] = batch
        return dict(batch)

    def _pick_fault(self) -> BatchFault | None:
        for i, f in enumerate(self._faults):
            self._seen[i] += 1
            if f.times is None or self._seen[i] <= f.times:
                return f
        return None

    def _batch(self, bid: str) -> dict:
        batch = self.batches.get(bid)
        if batch is None:
            raise BadRequest(404, f"No such Batch object: {bid}")
        return batch

    def _cancel(self, batch: dict) -> dict:
        self._advance(batch)
        if batch["status"] in TERMINAL or batch["status"] == "cancelling":
            raise BadRequest(409, f"Cannot cancel a batch with status {batch['status']!r}")
        batch["status"], batch["cancelling_at"] = "cancelling", int(time.time())
        return dict(batch)

    def _advance(self, batch: dict) -> dict:
        """Move `batch` along as far as the clock says, and return a copy of it."""
        bid, now = batch["id"], time.monotonic()
        if batch["status"] == "validating":
            self._validate(batch)
            self._started[bid] = now
        if batch["status"] == "in_progress":
            lines = self._lines[bid]
            elapsed = now - self._started[bid]
            if elapsed >= self.delay:
                self._finish(batch, lines, self._fault_of.get(bid))
            else:  # the provider's counts move while it works
                batch["request_counts"]["completed"] = int(len(lines) * elapsed / self.delay)
        elif batch["status"] == "cancelling":
            lines = self._lines.get(bid) or []
            done = min(batch["request_counts"]["completed"], len(lines))
            self._finish(batch, lines[:done], None, final="cancelled")
        return json.loads(json.dumps(batch))

    def _validate(self, batch: dict) -> None:
        fault = self._fault_of.get(batch["id"])
        now = int(time.time())
        try:
            lines = self._parse_input(self.files[batch["input_file_id"]].content, batch["endpoint"])
        except _Invalid as exc:
            batch.update(status="failed", failed_at=now,
                         errors={"object": "list", "data": [{"code": exc.code, "message": exc.message,
                                                             "param": exc.param, "line": exc.line}]})
            return
        if fault is not None and fault.fail is not None:
            batch.update(status="failed", failed_at=now,
                         errors={"object": "list", "data": [{"code": "batch_failed", "message": fault.fail,
                                                             "param": None, "line": None}]})
            return
        self._lines[batch["id"]] = lines
        batch["model"] = lines[0]["body"].get("model") if lines else None
        batch.update(status="in_progress", in_progress_at=now)
        batch["request_counts"] = {"total": len(lines), "completed": 0, "failed": 0}

    def _parse_input(self, content: bytes, endpoint: str) -> list[dict]:
        lines: list[dict] = []
        ids: set[str] = set()
        models: set[Any] = set()
        for n, raw in enumerate(content.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                raise _Invalid("invalid_json_line", f"line {n} is not valid JSON", n) from None
            if not isinstance(line, dict):
                raise _Invalid("invalid_json_line", f"line {n} is not a JSON object", n)
            cid = line.get("custom_id")
            if not isinstance(cid, str) or not cid:
                raise _Invalid("missing_required_parameter", f"line {n}: custom_id must be a non-empty string",
                               n, "custom_id")
            if cid in ids:
                raise _Invalid("duplicate_custom_id", f"line {n}: custom_id {cid!r} is used twice", n, "custom_id")
            ids.add(cid)
            if line.get("method") != "POST":
                raise _Invalid("invalid_method", f"line {n}: method must be POST", n, "method")
            if line.get("url") != endpoint:
                raise _Invalid("invalid_url", f"line {n}: url {line.get('url')!r} is not the batch's endpoint "
                                              f"{endpoint!r}", n, "url")
            if not isinstance(line.get("body"), dict):
                raise _Invalid("invalid_request", f"line {n}: body must be a JSON object", n, "body")
            models.add(line["body"].get("model"))
            if len(models) > 1:
                raise _Invalid("mismatched_model", f"line {n}: every request of a batch must use the same "
                                                   "model", n, "body.model")
            lines.append(line)
        if not lines:
            raise _Invalid("empty_file", "the input file has no requests", None)
        return lines

    def _finish(self, batch: dict, lines: list[dict], fault: BatchFault | None,
                final: str = "completed") -> None:
        """Answer `lines`, write the output and error files, and close the batch."""
        now = int(time.time())
        answered = lines
        expired: list[dict] = []
        if fault is not None and fault.expire_after is not None:
            answered, expired = lines[:fault.expire_after], lines[fault.expire_after:]
            final = "expired"
        out, err = [], []
        for line in answered:
            status, body = self._answer(line["url"], line["body"])
            self.batched_requests += 1
            record = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": line["custom_id"],
                      "response": {"status_code": status, "request_id": f"req_{uuid.uuid4().hex[:24]}",
                                   "body": body},
                      "error": None}
            (out if 200 <= status < 300 else err).append(record)
        for line in expired:
            err.append({"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": line["custom_id"],
                        "response": None, "error": {"code": "batch_expired", "message": EXPIRED_MESSAGE}})
        bid = batch["id"]
        if out:
            batch["output_file_id"] = self._store(f"{bid}_output.jsonl", _jsonl(out), "batch_output").info["id"]
        if err:
            batch["error_file_id"] = self._store(f"{bid}_error.jsonl", _jsonl(err), "batch_output").info["id"]
        batch["request_counts"] = {"total": batch["request_counts"]["total"], "completed": len(out),
                                   "failed": len(err)}
        batch["finalizing_at"] = now
        batch["status"] = final
        batch[{"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[final]] = now
        self._lines.pop(bid, None)


class _Invalid(Exception):
    def __init__(self, code: str, message: str, line: int | None, param: str | None = None):
        super().__init__(message)
        self.code, self.message, self.line, self.param = code, message, line, param


def _json_body(body: bytes) -> dict:
    try:
        value = json.loads(body)
    except ValueError:
        raise BadRequest(400, "request body must be a JSON object") from None
    if not isinstance(value, dict):
        raise BadRequest(400, "request body must be a JSON object")
    return value


def _listing(items: list[dict]) -> dict:
    return {"object": "list", "data": items, "first_id": items[0]["id"] if items else None,
            "last_id": items[-1]["id"] if items else None, "has_more": False}


def _jsonl(records: list[dict]) -> bytes:
    return b"".join(_dumps(r) + b"\n" for r in records)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _ok(obj: dict) -> Reply:
    return 200, _dumps(obj), {}
