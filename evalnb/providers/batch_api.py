"""Provider batch APIs: many samples' requests as one JSONL file, answered later at a lower price.

OpenAI's Batch API (and the servers that copy it: vLLM, gateways, `evalnb.testing`'s
LocalModelServer) takes a file of requests, each ``{"custom_id", "method": "POST", "url",
"body"}``, answers them within a completion window (``24h``) and leaves the answers in an
output file and the failures in an error file. This module is the client side, no run logic:

- `request_line`: one request as a JSONL line, its body exactly the live call's body
  (`live_body`, or the runner's `RunContext.request`), so a batch run and a live run ask the
  same thing;
- `split`: lines into batches at the provider's limits (requests per batch, bytes per file);
- `BatchAPI`: upload, create, retrieve, cancel, download, and `outcomes` (each custom_id's
  reply or error, read from the output and error files).

HTTP goes through a plain ``httpx.AsyncClient`` (proxies, CA bundles as in httpx); the model's
key is sent as for live calls and masked in every error message.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalnb.errors import ProviderError
from evalnb.providers.build import build_chat_request, build_completions_request, build_responses_request, canonical
from evalnb.providers.model import Model
from evalnb.providers.parse import BadReply, Reply, error_message, parse_chat, parse_completions, parse_responses
from evalnb.providers.retry import is_retryable_status, next_delay
from evalnb.redaction import redact

if TYPE_CHECKING:
    import httpx

ENDPOINTS = {"responses": "/v1/responses", "chat": "/v1/chat/completions", "completions": "/v1/completions"}
# OpenAI's limits (platform.openai.com/docs/guides/batch): 50,000 requests and 200 MB a file
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
HTTP_RETRIES = 4  # for the API's own calls (upload, create, poll): transient errors only
TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Outcome:
    """What a batch said about one request: a `Reply`, or an error (and whether to try again).

    ``retryable``: the request was not answered for a reason a new attempt can fix (expired,
    cancelled before it ran, 429, 5xx); a 4xx that the request itself caused is not.
    """

    custom_id: str
    reply: Reply | None = None
    error: str | None = None
    status: int | None = None
    body: Any = None  # the answer's JSON body (a log-likelihood request reads more than the text)
    retryable: bool = False


def request_line(custom_id: str, url: str, body: dict[str, Any]) -> bytes:
    """One JSONL line (with its newline): POST `body` to `url` (e.g. ``/v1/responses``).

    `body` should be exactly the live call's body (the runner takes it from
    `RunContext.request`; `live_body` builds the same for a model), so a batch asks what a live
    call would.
    """
    return _dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body}) + b"\n"


def live_body(model: Model, prompt: Any, gen: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """``(url, body)`` of `model`'s live call about `prompt`, as `ModelClient.complete` builds it."""
    build = {"chat": build_chat_request, "completions": build_completions_request}.get(model.api,
                                                                                   build_responses_request)
    return ENDPOINTS[model.api], build(model.name, prompt, canonical(gen), is_openai=model.is_openai)


def split(lines: Iterable[tuple[str, bytes]], *, max_requests: int = MAX_REQUESTS,
          max_bytes: int = MAX_BYTES) -> list[list[tuple[str, bytes]]]:
    """``(custom_id, line)`` pairs cut into batches of at most `max_requests` lines and
    `max_bytes` bytes, in order. A single line over `max_bytes` is a ValueError naming it."""
    out: list[list[tuple[str, bytes]]] = []
    current: list[tuple[str, bytes]] = []
    size = 0
    for cid, line in lines:
        if len(line) > max_bytes:
            raise ValueError(f"request {cid!r} is {len(line)} bytes, over the batch file limit of "
                             f"{max_bytes} bytes (max_bytes_per_file)")
        if current and (len(current) >= max_requests or size + len(line) > max_bytes):
            out.append(current)
            current, size = [], 0
        current.append((cid, line))
        size += len(line)
    if current:
        out.append(current)
    return out


def parse_results(data: bytes, api: str) -> dict[str, Outcome]:
    """Output or error file contents -> `Outcome` per custom_id (lines it cannot read are skipped
    with nothing recorded: their requests count as unanswered)."""
    parse = {"chat": parse_chat, "completions": parse_completions}.get(api, parse_responses)
    found: dict[str, Outcome] = {}
    for raw in data.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict) or not isinstance(record.get("custom_id"), str):
            continue
        cid = record["custom_id"]
        found[cid] = _outcome(cid, record, parse)
    return found


def _outcome(cid: str, record: dict, parse: Any) -> Outcome:
    err = record.get("error")
    response = record.get("response")
    if isinstance(err, dict) and not isinstance(response, dict):
        code = str(err.get("code") or "error")
        message = f"batch request {code}: {err.get('message') or 'no message'}"
        return Outcome(cid, error=message, retryable=code in ("batch_expired", "batch_cancelled"))
    if not isinstance(response, dict):
        return Outcome(cid, error="batch result without a response", retryable=True)
    status = response.get("status_code")
    status = status if isinstance(status, int) else None
    body = response.get("body")
    if status is not None and 200 <= status < 300:
        try:
            return Outcome(cid, reply=parse(body), status=status, body=body)
        except BadReply as exc:
            return Outcome(cid, error=f"HTTP {status} with a bad reply: {exc}", status=status, retryable=True)
    said = error_message(body) or "no message"
    return Outcome(cid, error=f"HTTP {status}: {said}", status=status,
                   retryable=status is None or is_retryable_status(status))


class BatchAPI:
    """The Batch API of `model`'s server; ``async with`` or `aclose` when done.

    Calls of the API itself (upload, create, retrieve...) are retried on connection errors,
    429 and 5xx (`HTTP_RETRIES` times, with backoff); anything else raises `ProviderError`
    with the server's message (the key masked).
    """

    def __init__(self, model: Model, *, timeout_s: float = TIMEOUT_S, retries: int = HTTP_RETRIES,
                 backoff_base: float = 0.5, rng: random.Random | None = None) -> None:
        self.model = model
        self.endpoint = ENDPOINTS[model.api]
        self.timeout_s, self.retries, self.backoff_base = timeout_s, retries, backoff_base
        self._rng = rng or random.Random()
        self._http: httpx.AsyncClient | None = None

    # ---- the API --------------------------------------------------------------------------
    async def upload(self, data: bytes, filename: str = "evalnb-batch.jsonl") -> dict[str, Any]:
        """``POST /files`` (purpose ``batch``): the file object."""
        return await self._json("POST", "/files", files={"file": (filename, data, "application/jsonl")},
                                data={"purpose": "batch"})

    async def create(self, input_file_id: str, metadata: dict[str, str] | None = None) -> dict[str, Any]:
        """``POST /batches`` for an uploaded file: the batch object (status ``validating``)."""
        body: dict[str, Any] = {"input_file_id": input_file_id, "endpoint": self.endpoint,
                                "completion_window": "24h"}
        if metadata:
            body["metadata"] = metadata
        return await self._json("POST", "/batches", json=body)

    async def submit(self, data: bytes, metadata: dict[str, str] | None = None) -> dict[str, Any]:
        """Upload `data` and create its batch."""
        uploaded = await self.upload(data)
        return await self.create(uploaded["id"], metadata)

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/batches/{batch_id}")

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        """Ask the provider to cancel (status ``cancelling``, then ``cancelled``)."""
        return await self._json("POST", f"/batches/{batch_id}/cancel")

    async def recent(self, since: float, *, max_pages: int = 10) -> list[dict[str, Any]]:
        """Batches created at or after `since` (Unix time), newest first (``GET /batches``,
        100 a page, at most `max_pages` pages)."""
        found: list[dict[str, Any]] = []
        after = None
        for _ in range(max_pages):
            params: dict[str, Any] = {"limit": 100}
            if after:
                params["after"] = after
            page = await self._json("GET", "/batches", params=params)
            data = [b for b in page.get("data") or [] if isinstance(b, dict) and b.get("id")]
            for batch in data:
                if (batch.get("created_at") or 0) < since:
                    return found
                found.append(batch)
            if not page.get("has_more") or not data:
                break
            after = data[-1]["id"]
        return found

    async def content(self, file_id: str) -> bytes:
        """A file's bytes (``GET /files/{id}/content``)."""
        resp = await self._request("GET", f"/files/{file_id}/content")
        return resp.content

    async def outcomes(self, batch: dict[str, Any]) -> dict[str, Outcome]:
        """Every answered or failed request of a finished `batch`, by custom_id (output file
        first, then the error file)."""
        found: dict[str, Outcome] = {}
        for key in ("output_file_id", "error_file_id"):
            fid = batch.get(key)
            if fid:
                found.update(parse_results(await self.content(fid), self.model.api))
        return found

    async def input_lines(self, batch: dict[str, Any]) -> dict[str, bytes]:
        """custom_id -> the request line as uploaded (for resume: what this batch asks)."""
        data = await self.content(batch["input_file_id"])
        lines: dict[str, bytes] = {}
        for raw in data.splitlines():
            try:
                cid = json.loads(raw).get("custom_id")
            except (ValueError, AttributeError):
                continue
            if isinstance(cid, str):
                lines[cid] = raw + b"\n"
        return lines

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> BatchAPI:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- HTTP -----------------------------------------------------------------------------
    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        resp = await self._request(method, path, **kwargs)
        try:
            body = resp.json()
        except ValueError:
            raise self._error(f"{method} {path}: HTTP {resp.status_code} with a reply that is not JSON",
                              resp.status_code) from None
        if not isinstance(body, dict):
            raise self._error(f"{method} {path}: reply is not a JSON object", resp.status_code)
        return body

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        import httpx

        headers = self.model.request_headers()
        if self.model.is_openai and not self.model.resolve_api_key():
            raise ProviderError(f"{self.model.label}: no API key; set {self.model.key_env} or pass api_key=",
                                status=None)
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False)
        url = f"{self.model.base_url}{path}"
        attempt = 0
        while True:
            try:
                resp = await self._http.request(method, url, headers=headers, **kwargs)
            except httpx.RequestError as exc:
                status, message, retry_headers = None, f"connection error ({type(exc).__name__}): {exc}", None
            else:
                if 200 <= resp.status_code < 300:
                    return resp
                status, retry_headers = resp.status_code, resp.headers
                message = f"HTTP {status}: {error_message(resp.content) or resp.reason_phrase or 'no message'}"
            if attempt >= self.retries or (status is not None and not is_retryable_status(status)):
                raise self._error(f"{method} {path}: {message}", status)
            delay = next_delay(attempt, status, retry_headers, self._rng, now=time.time(), base=self.backoff_base)
            attempt += 1
            await asyncio.sleep(delay)

    def _error(self, message: str, status: int | None) -> ProviderError:
        hint = f"; {self.model.key_hint()}" if status == 401 else ""
        return ProviderError(redact(f"{self.model.label}: batch API {message}{hint}", self.model.secrets()),
                             status=status, retryable=status is None or is_retryable_status(status))


def poll_delays(poll_interval: float, first: float = 0.05):
    """Seconds between looks at running batches: quick at first (a small batch may be done in a
    moment), then doubling up to `poll_interval`."""
    delay = min(first, poll_interval)
    while True:
        yield delay
        delay = min(poll_interval, delay * 2)


def _dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON, as live request bodies are sent."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
