"""`ModelClient`: one model's calls — request, retries, rate limits, empty-output retries.

The policy lives elsewhere (`retry` decides delays, `aimd` the concurrency, `build`/`parse` the
JSON); this module is the loop that applies it to real HTTP calls.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from evalnb.errors import ProviderError
from evalnb.providers.aimd import AdaptiveLimit
from evalnb.providers.build import (
    build_chat_request,
    build_completions_request,
    build_responses_request,
    canonical,
)
from evalnb.providers.logprobs import Loglikelihood
from evalnb.providers.model import Model
from evalnb.providers.parse import (
    BadReply,
    decode_json,
    error_message,
    parse_chat,
    parse_completions,
    parse_responses,
    responses_output_text,
)
from evalnb.providers.http_clients import ClientPool
from evalnb.providers.responses_compat import chat_to_responses, responses_to_chat
from evalnb.providers.retry import DEFAULT_BASE_S, DEFAULT_CAP_S, is_retryable_status, next_delay
from evalnb.redaction import MIN_SECRET_LENGTH, REDACTED, redact

REDACTED_BYTES = REDACTED.encode()

if TYPE_CHECKING:
    import httpx

EventHook = Callable[[str, dict[str, Any]], None]
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 2


@dataclass(frozen=True)
class Completion:
    """One finished candidate call.

    ``latency_s`` is the wall time of the whole call, retries and waits included;
    ``usage`` and ``response_id`` are the final reply's. ``attempts`` counts HTTP requests;
    ``retries`` those after failures (429s included), ``empty_retries`` those after empty outputs.
    """

    text: str
    usage: dict[str, int] | None
    response_id: str | None
    latency_s: float
    attempts: int = 1
    retries: int = 0
    empty_retries: int = 0
    rate_limit_wait_s: float = 0.0


class _Failure(NamedTuple):
    status: int | None  # None: no HTTP reply (connection error, timeout)
    headers: Mapping[str, str] | None
    message: str
    retryable: bool


class _Stats:
    __slots__ = ("attempts", "retries", "waited")

    def __init__(self) -> None:
        self.attempts = self.retries = 0
        self.waited = 0.0


class ModelClient:
    """Calls one `Model`, retrying what is worth retrying, and never leaking its key.

    ``limit`` (an `AdaptiveLimit`, usually shared by all of a model's calls in a run) bounds
    calls in flight and shrinks on 429s; ``pool`` shares connections across clients (one
    `ClientPool` per run) — without one the client makes its own; close it with `aclose` or
    ``async with``. ``on_event(kind, info)`` is told about each ``"retry"`` (errors other than
    429), ``"rate_limited"`` (a 429 about to be waited out) and ``"empty_retry"``.
    ``backoff_base``/``backoff_cap`` shape the jittered exponential backoff (tests use tiny
    values); ``timeout_seconds``/``max_retries`` are the defaults for calls whose generation
    settings do not say (embeddings, grader-bridge calls).
    """

    def __init__(
        self,
        model: Model,
        *,
        limit: AdaptiveLimit | None = None,
        pool: ClientPool | None = None,
        on_event: EventHook | None = None,
        backoff_base: float = DEFAULT_BASE_S,
        backoff_cap: float = DEFAULT_CAP_S,
        timeout_seconds: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        rng: random.Random | None = None,
    ):
        if not isinstance(model, Model):
            raise TypeError(f"ModelClient needs a Model, got {type(model).__name__}")
        self.model = model
        self.limit = limit
        self._own_pool = pool is None
        self.pool = pool or ClientPool(max_connections=limit.maximum if limit else 32)
        self.on_event = on_event
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.timeout_seconds, self.max_retries = timeout_seconds, max_retries
        self._rng = rng or random.Random()
        self._routes: dict[tuple, tuple] = {}
        self._prepared_cache: dict[int, tuple[Any, Any, _Prepared]] = {}
        self._prefix: str | None = None  # the tokenizer's prefix token (`prefix_token`), read once

    # ---- public calls ---------------------------------------------------------------------
    async def complete(self, prompt: str, gen: dict[str, Any] | None = None) -> Completion:
        """Ask the model about `prompt` with canonical generation settings `gen`.

        Raises `ProviderError` (status, server message; never the key) once retries are spent.
        An output still empty after ``max_empty_retries`` extra calls is returned as it is.
        """
        p = self._prepared(gen)
        payload = p.encode(prompt)
        started = time.perf_counter()
        stats = _Stats()
        empty_retries = 0
        while True:
            reply = await self._call(p.path, payload, p.parse, p.timeout_s, p.max_retries, stats)
            if empty_retries >= p.max_empty or not _is_empty(reply.text):
                break
            empty_retries += 1
            self._emit("empty_retry", {"attempt": stats.attempts, "empty_retries": empty_retries})
        return Completion(
            text=reply.text,
            usage=reply.usage,
            response_id=reply.response_id,
            latency_s=time.perf_counter() - started,
            attempts=stats.attempts,
            retries=stats.retries,
            empty_retries=empty_retries,
            rate_limit_wait_s=stats.waited,
        )

    def _prepared(self, gen: dict[str, Any] | None) -> _Prepared:
        """The settings and body encoder for `gen`, worked out once per generation dict.

        A run sends thousands of prompts with the same settings: canonicalising them and
        encoding the whole body every time showed up in profiles. The cache entry is reused
        only while `gen` is the same object with the same contents.
        """
        cached = self._prepared_cache.get(id(gen))
        if cached is not None and cached[0] is gen and cached[1] == gen:
            return cached[2]
        g = canonical(gen)
        is_openai, name = self.model.is_openai, self.model.name
        if self.model.api == "chat":
            path, parse, build = "/chat/completions", parse_chat, build_chat_request
        elif self.model.api == "completions":
            path, parse, build = "/completions", parse_completions, build_completions_request
        else:
            path, parse, build = "/responses", parse_responses, build_responses_request
        prepared = _Prepared(
            path=path, parse=parse,
            encode=_body_encoder(lambda prompt: build(name, prompt, g, is_openai=is_openai)),
            timeout_s=float(g.get("timeout_seconds", self.timeout_seconds)),
            max_retries=int(g.get("max_retries", self.max_retries)),
            max_empty=int(g.get("max_empty_retries", 0)),
        )
        if len(self._prepared_cache) > 64:
            self._prepared_cache.clear()
        # a deep copy: an edit inside a nested value (a stop list) must not go unnoticed
        self._prepared_cache[id(gen)] = (gen, copy.deepcopy(gen), prepared)
        return prepared

    async def loglikelihoods(self, requests: list[tuple[str, str]]) -> list[Loglikelihood]:
        """The log-probability of each ``continuation`` after its ``context``, in one call.

        ``requests`` are ``(context, continuation)`` pairs, sent as one list prompt to
        ``POST /completions`` with ``echo`` and ``logprobs`` (`evalnb.providers.logprobs`).
        Needs ``Model(api="completions")``; a server that does not echo log-probabilities
        raises `ProviderError` (not retried) saying so.
        """
        from evalnb.providers.logprobs import loglikelihood_request, parse_loglikelihoods, with_prefix

        if self.model.api != "completions":
            raise ProviderError(
                f"{self.model.label}: scoring by log-likelihood needs Model(..., api='completions') "
                f"(a /v1/completions server that echoes logprobs, e.g. vLLM); this model uses api={self.model.api!r}",
                status=None, retryable=False)
        if any(context == "" for context, _ in requests):
            requests = with_prefix(requests, await self.prefix_token())
        body = loglikelihood_request(self.model.name, requests)
        label = self.model.label

        def parse(reply: Any) -> list[Loglikelihood]:
            return parse_loglikelihoods(reply, requests, label)

        return await self._call("/completions", _dumps(body), parse, self.timeout_seconds, self.max_retries, _Stats())

    async def prefix_token(self) -> str:
        """The text of the token an empty context is conditioned on: the tokenizer's BOS, else
        its EOS (lm-eval's ``prefix_token_id``), read once from vLLM's ``GET /tokenizer_info``
        at the server's root; ``""`` when the tokenizer adds a BOS to every prompt itself."""
        if self._prefix is not None:
            return self._prefix
        base = (self.model.base_url or "").rstrip("/")
        root = base[: -len("/v1")] if base.endswith("/v1") else base
        info: Any = None
        try:
            resp = await self.pool.client(self.model.base_url or "").get(
                f"{root}/tokenizer_info", headers=self.model.request_headers(), timeout=self.timeout_seconds)
            info = resp.json() if resp.status_code == 200 else None
        except Exception:  # noqa: BLE001 - no such endpoint: said below
            info = None
        token = (info.get("bos_token") or info.get("eos_token")) if isinstance(info, dict) else None
        if isinstance(token, dict):  # an AddedToken's dump
            token = token.get("content")
        if not isinstance(token, str) or not token:
            raise ProviderError(
                f"{self.model.label}: an empty context is scored after the tokenizer's BOS/EOS token (as lm-eval "
                f"scores it), and {root}/tokenizer_info (vLLM's) gave none", status=None, retryable=False)
        self._prefix = "" if info.get("add_bos_token") is True else token
        return self._prefix

    async def check_loglikelihoods(self) -> None:
        """Raise `ProviderError` now if this model cannot score by log-likelihood (one tiny call).

        For a run's preflight: a server without echoed log-probabilities is found before any
        item is sent, not after a run of unscored samples.
        """
        await self.loglikelihoods([("The sky is", " blue")])

    async def embeddings(self, input: str | list[str], **params: Any) -> dict[str, Any]:
        """``POST /embeddings`` for this model (``params``: ``dimensions``, ``encoding_format``...)."""
        body = {**params, "input": input, "model": self.model.name}
        return await self._call("/embeddings", _dumps(body), _check_embeddings, self.timeout_seconds,
                                self.max_retries, _Stats())

    async def responses_raw(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send a full Responses request as given (``model`` replaced by this model's name).

        For the grader bridge: returns the Responses object with ``output_text`` always set.
        A chat-only model (``api="chat"``) gets the request translated to chat and the reply
        translated back.
        """
        if not isinstance(request, dict):
            raise ProviderError("a Responses request must be a JSON object", status=None)
        body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
        body["model"] = self.model.name
        if self.model.api == "chat":
            chat = responses_to_chat(body, self.model.name, is_openai=self.model.is_openai)
            return await self._call("/chat/completions", _dumps(chat), _chat_as_responses,
                                    self.timeout_seconds, self.max_retries, _Stats())
        return await self._call("/responses", _dumps(body), _with_output_text, self.timeout_seconds,
                                self.max_retries, _Stats())

    async def aclose(self) -> None:
        """Close the connection pool if this client made its own."""
        if self._own_pool:
            await self.pool.aclose()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"ModelClient({self.model!r})"

    # ---- the retry loop -------------------------------------------------------------------
    async def _call(self, path: str, payload: bytes, parse: Callable[[Any], Any],
                    timeout_s: float, max_retries: int, stats: _Stats) -> Any:
        headers = self.model.request_headers()
        secrets = self.model.secrets()
        # A reply that quotes the key back (some proxies and error pages do) is masked before
        # it is parsed: no output, grader, cache or store ever holds it.
        mask = tuple(s.encode() for s in secrets if len(s) >= MIN_SECRET_LENGTH)
        if self.model.is_openai and not secrets:
            raise ProviderError(
                f"{self.model.label}: no API key; set {self.model.key_env} or pass api_key=",
                status=None, retryable=False)
        url = f"{self.model.base_url}{path}"
        route, head = self._route(path, headers)
        retries = 0
        while True:
            stats.attempts += 1
            token = await self.limit.acquire() if self.limit is not None else 0
            try:
                if head is not None:
                    result = await self._attempt_raw(route, head, payload, timeout_s, parse, mask)
                else:
                    client = self.pool.client(self.model.base_url or "")
                    result = await self._attempt(client, url, payload, headers, timeout_s, parse, mask)
            except BaseException:  # cancelled: free the slot, say nothing about the rate
                if self.limit is not None:
                    self.limit.release(token, "error")
                raise
            if not isinstance(result, _Failure):
                if self.limit is not None:
                    self.limit.release(token, "ok")
                return result
            limited = result.status == 429
            outcome = "rate_limited" if limited else "error"
            if not result.retryable or retries >= max_retries:
                if self.limit is not None:
                    self.limit.release(token, outcome)
                tries = f" (after {stats.attempts} attempts)" if stats.attempts > 1 else ""
                hint = f"; {self.model.key_hint()}" if result.status == 401 else ""
                message = redact(f"{self.model.label}: {result.message}{tries}{hint}", secrets)
                raise ProviderError(message, status=result.status, retryable=result.retryable)
            delay = next_delay(retries, result.status, result.headers, self._rng, now=time.time(),
                               base=self.backoff_base, cap=self.backoff_cap)
            if self.limit is not None:
                self.limit.release(token, outcome, wait_s=delay if limited else 0.0)
            retries += 1
            stats.retries += 1
            if limited:
                stats.waited += delay
            info = {"attempt": stats.attempts, "status": result.status, "delay_s": delay,
                    "error": redact(result.message, secrets)}
            self._emit("rate_limited" if limited else "retry", info)
            await asyncio.sleep(delay)

    async def _attempt(self, client: httpx.AsyncClient, url: str, payload: bytes,
                       headers: dict[str, str], timeout_s: float,
                       parse: Callable[[Any], Any], mask: tuple[bytes, ...] = ()) -> Any:
        """One HTTP request: the parsed reply, or a `_Failure` saying whether to retry."""
        try:
            async with asyncio.timeout(timeout_s):
                resp = await client.post(url, content=payload, timeout=timeout_s,
                                         headers={"Content-Type": "application/json", **headers})
        except Exception as exc:  # noqa: BLE001 - sorted into retryable or not below
            return _failure_from(exc, timeout_s)
        return _outcome(resp.status_code, resp.reason_phrase, resp.headers, resp.content, parse, mask)

    def _route(self, path: str, headers: dict[str, str]) -> tuple[tuple | None, bytes | None]:
        """For direct plain-http servers (`ClientPool.raw_route`: no proxy applies), the lean
        path's connections and the pre-encoded request head; (None, None) means httpx's client.

        Worked out once per (event loop, path, headers) rather than on every call: at
        thousands of calls a second the URL parsing alone shows up in profiles.
        """
        loop = asyncio.get_running_loop()
        key = (id(loop), path, tuple(headers.items()))
        cached = self._routes.get(key)
        if cached is None or cached[0] is not loop or (cached[1] is not None and cached[1][0].closed):
            route = self.pool.raw_route(self.model.base_url or "")
            head = _request_head(route, path, headers) if route is not None else None
            cached = self._routes[key] = (loop, route, head)
        return cached[1], cached[2]

    async def _attempt_raw(self, route: tuple, head: bytes, payload: bytes, timeout_s: float,
                           parse: Callable[[Any], Any], mask: tuple[bytes, ...] = ()) -> Any:
        """`_attempt` for direct plain-``http://`` servers: the same request and outcomes,
        sent on the lean keep-alive path (`wire.ConnectionPool`) instead of httpx's."""
        connections, host, port, _ = route
        wire = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(payload), payload)
        try:
            status, reason, raw_headers, data = await connections.send_raw(host, port, wire, timeout=timeout_s)
        except Exception as exc:  # noqa: BLE001 - sorted into retryable or not below
            return _failure_from(exc, timeout_s)
        if 200 <= status < 300:  # the hot path: the reply's headers are not needed
            return _outcome(status, "", {}, data, parse, mask)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw_headers}
        return _outcome(status, reason.decode("latin-1"), headers, data, parse, mask)

    def _emit(self, kind: str, info: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(kind, {"model": self.model.label, **info})


class _Prepared(NamedTuple):
    """What `complete` needs per generation dict: endpoint, parser, limits, body encoder."""

    path: str
    parse: Callable[[Any], Any]
    encode: Callable[[str], bytes]
    timeout_s: float
    max_retries: int
    max_empty: int


_PROMPT_SLOT = "\x00evalnb-prompt\x00"


def _dumps(body: Any) -> bytes:
    """Request JSON: compact, UTF-8, not ASCII-escaped (what httpx sends for ``json=``)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _body_encoder(build: Callable[[Any], dict[str, Any]]) -> Callable[[Any], bytes]:
    """``prompt -> _dumps(build(prompt))``, byte for byte, without encoding the settings
    again for every prompt: the body is encoded once around a placeholder prompt and each
    call only quotes its prompt into the gap."""
    text = _dumps(build(_PROMPT_SLOT)).decode("utf-8")
    slot = json.dumps(_PROMPT_SLOT, ensure_ascii=False)
    if text.count(slot) != 1:  # pragma: no cover - the builders place the prompt exactly once
        return lambda prompt: _dumps(build(prompt))
    head, tail = text.split(slot)
    quote = json.encoder.encode_basestring  # the C quoting json.dumps uses with ensure_ascii=False

    def encode(prompt: Any) -> bytes:
        if type(prompt) is not str:  # e.g. a list of input items: encode the whole body
            return _dumps(build(prompt))
        return f"{head}{quote(prompt)}{tail}".encode("utf-8")

    return encode


def _failure_from(exc: Exception, timeout_s: float) -> _Failure:
    """What a call that raised means for the retry policy."""
    httpx = sys.modules.get("httpx")  # an httpx error means httpx is loaded
    if isinstance(exc, TimeoutError) or (httpx is not None and isinstance(exc, httpx.TimeoutException)):
        return _Failure(None, None, f"timed out after {timeout_s:g}s", True)
    if httpx is not None and isinstance(exc, httpx.RequestError):
        detail = str(exc) or type(exc).__name__
        return _Failure(None, None, f"connection error ({type(exc).__name__}): {detail}", True)
    # never let one odd reply crash a whole run: report it
    return _Failure(None, None, f"unexpected error ({type(exc).__name__}): {exc}", False)


def _outcome(status: int, reason: str, headers: Mapping[str, str], data: bytes,
             parse: Callable[[Any], Any], mask: tuple[bytes, ...] = ()) -> Any:
    """A reply's parsed body, or the `_Failure` its status (or a bad body) stands for.

    Every secret in `mask` is replaced by "[redacted]" in the raw bytes first (a JSON string
    stays valid: the mask has no quote or backslash).
    """
    for secret in mask:
        if secret in data:
            data = data.replace(secret, REDACTED_BYTES)
    if 200 <= status < 300:
        try:
            return parse(decode_json(data))
        except BadReply as exc:
            return _Failure(status, None, f"HTTP {status} with a bad reply: {exc}", True)
    said = error_message(data) or reason or "no message"
    return _Failure(status, headers, f"HTTP {status}: {said}", is_retryable_status(status))


def _request_head(route: tuple, path: str, headers: Mapping[str, str]) -> bytes | None:
    """Request line and headers for `_attempt_raw`, or None to take the httpx path instead
    (a header value httpx would refuse, e.g. one carrying a line break)."""
    _, host, port, base_path = route
    lines = [f"POST {base_path}{path} HTTP/1.1", f"Host: {host}:{port}",
             "Accept: application/json", "Content-Type: application/json", "User-Agent: evalnb"]
    for name, value in headers.items():
        if any(c in f"{name}{value}" for c in "\r\n\0") or not name.strip():
            return None
        lines.append(f"{name}: {value}")
    try:
        return ("\r\n".join(lines) + "\r\n").encode("latin-1")
    except UnicodeEncodeError:
        return None


# ---- reply checks for the non-completion calls --------------------------------------------
def _check_embeddings(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise BadReply("reply is not an embeddings list")
    return body


def _with_output_text(body: Any) -> dict[str, Any]:
    parse_responses(body)  # shape check (raises BadReply)
    return {**body, "output_text": responses_output_text(body)}


def _chat_as_responses(body: Any) -> dict[str, Any]:
    return chat_to_responses(body)


def _is_empty(text: str) -> bool:
    """Empty after the `none` cleaning (the runner's definition)."""
    from evalnb.scoring.extraction import clean_output  # lazy: the regex module loads on first use

    return not clean_output(text)
