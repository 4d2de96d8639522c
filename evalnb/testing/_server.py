"""LocalModelServer: a real OpenAI-compatible HTTP server on 127.0.0.1 with scripted answers.

It runs its own event loop in its own thread, so the same object works from plain code, from
inside a running event loop (async tests, Jupyter) and as ``with`` or ``async with``. Because
it is a real socket server, the code under test goes through its real HTTP client: pooling,
timeouts, retries and headers are exercised, not mocked.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Union

from evalnb.testing import _logprobs as logprobs
from evalnb.testing import _replies as replies
from evalnb.testing import _tokenize as tokenize_api
from evalnb.testing._batches import BatchBook, BatchFault
from evalnb.testing._faults import Fault, FaultSchedule, Latency, check_latency, pick_latency
from evalnb.testing._http import BadRequest, HttpRequest, read_request, response_bytes
from evalnb.testing._tokenizer import UnknownTokenId, Vocabulary

Responder = Union[Mapping[str, str], Callable[..., Any], None]
Embedder = Callable[[list[str]], Sequence[Sequence[float]]]

_ANSWERED = ("/v1/responses", "/v1/chat/completions", "/v1/completions")
_ROUTES = {
    ("POST", "/v1/responses"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("POST", "/v1/embeddings"),
    ("GET", "/v1/models"),
}
_MALFORMED = b'{"id": "resp_malformed", "object": "response", "output": [{"type": "mess'


class RecordedRequest(NamedTuple):
    """One request as the server saw it: unpacks as ``path, body, headers``."""

    path: str
    body: Any  # the parsed JSON body (None for GET or when the body is not JSON)
    headers: dict[str, str]  # header names lower-cased, e.g. headers["authorization"]


class LocalModelServer:
    """An OpenAI-compatible model server on ``127.0.0.1`` that answers from a script.

    Endpoints: ``POST /v1/responses``, ``/v1/chat/completions``, ``/v1/completions``,
    ``/v1/embeddings`` and ``GET /v1/models``; vLLM's ``POST /tokenize``, ``/detokenize`` and
    ``GET /tokenizer_info`` (token ids in `vocab`); and the Batch API (`_batches`): ``/v1/files``
    (upload, ``/{id}``, ``/{id}/content``) and ``/v1/batches`` (create, ``/{id}``,
    ``/{id}/cancel``). A batch's requests are answered by the same responder, faults and usage
    as live calls (latency aside): a batch run gets the live run's answers.
    ``batch_delay`` (seconds) keeps each batch ``in_progress`` that long; ``batch_faults``
    (`BatchFault` list) fail or expire whole batches. `uploads` counts files uploaded.

    ``responder`` decides the answer text from the request's prompt (Responses ``input`` — a
    string, or the last user message of a list; chat: the last user message):

    - a dict from prompt *substring* to answer: the first key found in the prompt (in
      insertion order) wins, else ``default``;
    - a callable ``responder(request_json)`` or ``responder(request_json, path)`` returning
      the answer ``str``, a full reply body ``dict`` (sent as-is), a `Fault` (or
      ``{"fault": {...Fault fields...}}``) to misbehave on this request, or ``None`` for
      ``default``. An exception in it becomes an HTTP 500 naming it.

    ``faults`` (a list of `Fault`, or a callable ``(request_json, path) -> Fault | None``)
    script failures; ``latency`` (seconds, or a ``(low, high)`` range drawn with ``seed``)
    delays every model call. Embeddings do not use the responder: they come from
    ``embedder(texts) -> vectors`` if given, else deterministic hash vectors
    (``embedding_dim`` long unless the request asks for ``dimensions``). ``record=False``
    stops keeping `requests` (for long benchmarks); ``request_count`` still counts, and
    `calls(path)` counts per endpoint. ``echo_headers`` (e.g. ``["authorization"]``) appends
    those request headers to every answer, as a misbehaving proxy would. ``usage`` sets the
    token counts replies report, in each API's own shape (`_replies.usage_for`): a dict
    ``{"input_tokens": 100, "output_tokens": 20, "cached_input_tokens": 40}`` for every reply,
    or a callable ``usage(request_json, path)`` returning one (or None for the default:
    whitespace-separated words).
    ``/v1/completions`` answers as vLLM does: a list ``prompt`` gets one choice per prompt,
    ``echo`` repeats the prompt, ``max_tokens`` caps the generated tokens (appended after the
    echoed ones), and ``logprobs: N`` adds ``tokens``, ``token_logprobs``, ``top_logprobs`` and
    ``text_offset``. A prompt may be token ids (a list of ints, or a list of such lists) as
    vLLM's ``POST /tokenize`` gives them; the server serves that too, with ``/detokenize`` and
    ``GET /tokenizer_info`` (`_tokenize`: vLLM's shapes; a GPT-2-like tokenizer, `_tokenizer`), so
    lm-eval's ``local-completions`` with ``tokenizer_backend="remote"`` runs against it. The
    log-probabilities are a known function of the text (`evalnb.testing._logprobs`), the same
    for a text prompt and for its token ids: deterministic by default; ``token_logprobs``
    scripts them, as a dict ``{token: logprob}`` or a callable ``(text_before, token) -> logprob``.
    ``byte_fallback=True`` splits non-ASCII symbols (``→``) into UTF-8 byte tokens, echoed as
    vLLM echoes a byte-level tokenizer's (``""`` until the character is complete).
    ``bpe_spaces=True`` splits whitespace as GPT-2's pre-tokenizer does (``"a  b"`` ->
    ``"a", " ", " b"``; ``"\\nQ"`` -> ``"\\n", "Q"``), so a context ending in whitespace does
    not end on a token boundary of context + continuation, as with a real BPE tokenizer.
    ``tokenizer_api=False`` plays a server without vLLM's tokenizer endpoints (404).
    ``echo_logprobs=False`` plays a server
    that cannot echo them (llama.cpp's ``llama-server``): the prompt is not echoed and
    ``logprobs`` is null.
    ``max_concurrency`` caps how many model calls are worked on at once, like a real deployment's
    batch slots: further requests queue (their latency starts when a slot frees), so a
    latency-bound server serves at most ``max_concurrency / latency`` calls a second however
    hard it is pushed. ``ssl`` (a server-side ``ssl.SSLContext``) serves HTTPS instead: `url`
    then starts with ``https://`` (tests of certificates and proxy tunnels).

    >>> with LocalModelServer({"capital of France": "Paris"}) as server:
    ...     url = server.base_url          # "http://127.0.0.1:<port>/v1"
    ...     # point a client at url; afterwards inspect server.requests, server.max_in_flight
    """

    def __init__(
        self,
        responder: Responder = None,
        *,
        default: str = "42",
        faults: Sequence[Fault] | Callable[[dict, str], Fault | None] | None = None,
        latency: Latency = 0.0,
        embedder: Embedder | None = None,
        embedding_dim: int = replies.DEFAULT_EMBEDDING_DIM,
        model: str = "local-model",
        seed: int = 0,
        port: int = 0,
        record: bool = True,
        echo_headers: Sequence[str] = (),
        max_concurrency: int | None = None,
        usage: Mapping[str, int] | Callable[[dict, str], Mapping[str, int] | None] | None = None,
        ssl: Any = None,
        batch_delay: float = 0.0,
        batch_faults: Sequence[BatchFault] | None = None,
        token_logprobs: Mapping[str, float] | Callable[[str, str], float] | None = None,
        echo_logprobs: bool = True,
        byte_fallback: bool = False,
        bpe_spaces: bool = False,
        tokenizer_api: bool = True,
    ):
        if responder is not None and not callable(responder) and not isinstance(responder, Mapping):
            raise TypeError("responder must be a dict of prompt substring -> answer, or a callable")
        check_latency(latency, "latency")
        if max_concurrency is not None and (isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int)
                                            or max_concurrency < 1):
            raise ValueError(f"max_concurrency must be a positive integer or None, got {max_concurrency!r}")
        self.max_concurrency = max_concurrency
        self._slots: asyncio.Semaphore | None = None
        if usage is not None and not callable(usage) and not isinstance(usage, Mapping):
            raise TypeError("usage must be a dict of token counts or a callable (request_json, path) -> dict")
        self.usage = usage
        if token_logprobs is not None and not callable(token_logprobs) and not isinstance(token_logprobs, Mapping):
            raise TypeError("token_logprobs must be a dict of token -> logprob or a callable (text_before, token) -> logprob")
        self._token_logprob = logprobs.logprob_function(token_logprobs)
        self.vocab = Vocabulary(byte_fallback, bpe_spaces)  # token ids of /tokenize and token-id prompts, first seen first
        self.echo_logprobs = echo_logprobs
        self.tokenizer_api = tokenizer_api
        self._responder = dict(responder) if isinstance(responder, Mapping) else responder
        self._pass_path = callable(responder) and _takes_two_args(responder)
        self.default = default
        self.latency = latency
        self.embedder = embedder
        self.embedding_dim = embedding_dim
        self.model = model
        self._seed = seed
        self.record = record
        # like a proxy or debug page that quotes the request back: these headers' values are
        # appended to every answer (tests of what happens to an echoed key)
        self.echo_headers = tuple(h.lower() for h in echo_headers)
        self._requested_port = port
        self._ssl = ssl
        self._schedule = FaultSchedule(faults)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._port: int | None = None
        self.batches_book = BatchBook(self._batch_answer, delay=batch_delay, faults=batch_faults)
        self.reset()

    # ---- what tests look at -------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` — what an OpenAI client's ``base_url`` should be."""
        return f"{self.url}/v1"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``; ``https://`` with ``ssl``)."""
        if self._port is None:
            raise RuntimeError("LocalModelServer is not running: call start() or use `with`")
        return f"{'https' if self._ssl is not None else 'http'}://127.0.0.1:{self._port}"

    @property
    def port(self) -> int | None:
        return self._port

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received since start or `reset`, in arrival order (a copy)."""
        return list(self._requests)

    @property
    def answer_times(self) -> list[float | None]:
        """For each of `requests`: the `time.monotonic()` its reply was written (None: none yet)."""
        return list(self._answered)

    @property
    def arrival_times(self) -> list[float]:
        """For each of `requests`: the `time.monotonic()` it was read (a client's own clock, seen from here)."""
        return list(self._arrived)

    @property
    def request_count(self) -> int:
        """Requests received since start or `reset` (counted even when not recorded)."""
        return self._served

    def calls(self, path: str | None = None) -> int:
        """Requests received since start or `reset`, to ``path`` (e.g. ``"/v1/responses"``) or all."""
        if path is None:
            return self._served
        return self._by_path.get(path, 0)

    @property
    def connections(self) -> int:
        """Connections accepted since start or `reset`: fewer than requests when kept alive."""
        return self._accepted

    @property
    def uploads(self) -> int:
        """Files uploaded (``POST /v1/files``) since start or `reset`."""
        return self.batches_book.uploads

    @property
    def batches(self) -> dict[str, dict]:
        """Batches created since start or `reset`, by id (as last looked at; copies)."""
        return {bid: dict(b) for bid, b in self.batches_book.batches.items()}

    @property
    def batched_requests(self) -> int:
        """Requests answered inside batches since start or `reset`."""
        return self.batches_book.batched_requests

    @property
    def in_flight(self) -> int:
        """Requests received and not yet answered right now."""
        return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The most requests ever in flight at once: the client's real concurrency."""
        return self._max_in_flight

    @property
    def max_busy(self) -> int:
        """The most model calls ever worked on at once (at most ``max_concurrency`` when set)."""
        return self._max_busy

    def reset(self) -> None:
        """Forget recorded requests, in-flight peak and fault counters (the script restarts)."""
        self._requests: list[RecordedRequest] = []
        self._answered: list[float | None] = []  # per recorded request: when its reply went out
        self._arrived: list[float] = []  # per recorded request: when it was read
        self._in_flight = 0
        self._max_in_flight = 0
        self._busy = 0
        self._max_busy = 0
        self._served = 0
        self._accepted = 0
        self._by_path: dict[str, int] = {}
        self._batch_n = 0  # reply ids of batched requests
        self._rng = random.Random(self._seed)
        self._schedule.reset()
        book = getattr(self, "batches_book", None)
        if book is not None:
            book.reset()

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> LocalModelServer:
        """Start serving (in a background thread); returns once the port is bound."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._run, args=(ready, failure), name="LocalModelServer", daemon=True
        )
        self._thread.start()
        if not ready.wait(10) or failure:
            self._thread.join(1)
            self._thread = None
            raise RuntimeError("LocalModelServer failed to start") from (failure[0] if failure else None)
        return self

    def stop(self) -> None:
        """Stop serving: open connections are closed and requests in progress dropped."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None or loop is None or stopping is None:
            return
        try:
            loop.call_soon_threadsafe(stopping.set)
        except RuntimeError:  # the loop already ended
            pass
        thread.join(10)
        self._thread = self._loop = self._stopping = None
        self._port = None

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> LocalModelServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def __repr__(self) -> str:
        where = self.base_url if self._port is not None else "stopped"
        return f"<LocalModelServer {where} requests={self.request_count}>"

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ready))
        except BaseException as exc:  # reported to start(); the thread must not die silently
            failure.append(exc)
            ready.set()
        finally:
            loop.close()

    async def _main(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        self._slots = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        tasks: set[asyncio.Task] = set()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # our own tasks (not asyncio's wrapper), so stop() can cancel them quietly
            self._accepted += 1
            task = asyncio.get_running_loop().create_task(self._connection(reader, writer))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        server = await asyncio.start_server(
            on_connect, "127.0.0.1", self._requested_port, backlog=2048, ssl=self._ssl
        )
        self._port = server.sockets[0].getsockname()[1]
        ready.set()
        await self._stopping.wait()
        server.close()
        for writer in list(self._writers):
            writer.close()
        for t in list(tasks):
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    # ---- serving ------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                try:
                    req = await read_request(reader, writer)
                except BadRequest as exc:
                    body = json.dumps(replies.error_reply(exc.status, str(exc))).encode()
                    writer.write(response_bytes(exc.status, body, keep_alive=False))
                    break
                if req is None or not await self._handle(req, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _handle(self, req: HttpRequest, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must close afterwards."""
        self._in_flight += 1
        if self._in_flight > self._max_in_flight:
            self._max_in_flight = self._in_flight
        counted = True
        try:
            body, bad_json = None, False
            if req.body:
                try:
                    body = json.loads(req.body)
                except ValueError:
                    bad_json = True
            if self.record:
                slot = len(self._answered)
                self._requests.append(RecordedRequest(req.path, body, req.headers))
                self._answered.append(None)
                self._arrived.append(time.monotonic())
            self._served += 1
            self._by_path[req.path] = self._by_path.get(req.path, 0) + 1
            status, payload, extra = await self._reply(req, body, bad_json, self._served)
            if status is None:  # a dropped connection: no reply at all
                return False
            ctype = "text/event-stream" if extra.pop("_sse", None) else extra.pop("_ctype", "application/json")
            # Leave the count before the reply goes out: a client that has its answer must
            # never see this request still in flight (the server runs in its own thread).
            self._in_flight -= 1
            counted = False
            writer.write(response_bytes(status, payload, content_type=ctype, headers=extra,
                                        keep_alive=req.keep_alive))
            if self.record:
                self._answered[slot] = time.monotonic()
            if writer.transport.get_write_buffer_size() > 1 << 16:
                await writer.drain()
            return req.keep_alive
        finally:
            if counted:
                self._in_flight -= 1

    async def _reply(
        self, req: HttpRequest, body: Any, bad_json: bool, n: int
    ) -> tuple[int | None, bytes, dict[str, str]]:
        if BatchBook.serves(req.path):
            return self.batches_book.handle(req.method, req.path, req.headers, req.body)
        if tokenize_api.serves(req.path) and self.tokenizer_api:
            status, reply = tokenize_api.answer(req.method, req.path, None if bad_json else body, self.vocab)
            return status, _json(reply), {}
        if (req.method, req.path) not in _ROUTES:
            known = any(path == req.path for _, path in _ROUTES)
            status = 405 if known else 404
            msg = f"{req.method} {req.path} is not served" if known else f"unknown path {req.path}"
            return status, _json(replies.error_reply(status, msg)), {}
        if req.method == "GET":
            fault = self._schedule.pick(None, req.path, "")
            return await self._finish(fault, lambda: _json(replies.models_reply(self.model)), 0.0)
        if bad_json or not isinstance(body, dict):
            return 400, _json(replies.error_reply(400, "request body must be a JSON object")), {}

        try:
            prompt = self._prompt(req.path, body)
        except UnknownTokenId as exc:
            return 400, _json(replies.error_reply(400, str(exc))), {}
        fault = self._schedule.pick(body, req.path, prompt)
        answer: Any = None
        if (fault is None or _passive(fault)) and req.path in _ANSWERED:
            try:
                answer = self._answer(body, req.path, prompt)
            except Exception as exc:  # a bug in the test's responder: say so over HTTP
                msg = f"responder raised {type(exc).__name__}: {exc}"
                return 500, _json(replies.error_reply(500, msg, "server_error")), {}
            if isinstance(answer, Fault):
                fault, answer = answer, None
            elif self.echo_headers and isinstance(answer, str):
                answer += "".join(f"\n{h}: {req.headers.get(h, '')}" for h in self.echo_headers)
        delay = pick_latency(self.latency, self._rng)

        def normal() -> bytes | tuple[bytes, dict[str, str]]:
            return self._normal_reply(req.path, body, prompt, answer, fault, n)

        if self._slots is None or req.path not in _ANSWERED:
            return await self._busy_finish(fault, normal, delay)
        async with self._slots:  # a busy deployment: wait for a slot, then take the latency
            return await self._busy_finish(fault, normal, delay)

    async def _busy_finish(self, fault: Fault | None, normal: Callable[[], Any], delay: float) -> Any:
        self._busy += 1
        self._max_busy = max(self._max_busy, self._busy)
        try:
            return await self._finish(fault, normal, delay)
        finally:
            self._busy -= 1

    async def _finish(
        self, fault: Fault | None, normal: Callable[[], Any], delay: float
    ) -> tuple[int | None, bytes, dict[str, str]]:
        """Wait, then apply the fault (or send the normal reply)."""
        if fault is not None:
            delay += pick_latency(fault.latency, self._rng)
        # sleep(0) still yields, so requests arriving together overlap and max_in_flight
        # shows the client's real concurrency even with no latency
        await asyncio.sleep(delay)
        headers = dict(fault.headers) if fault is not None and fault.headers else {}
        if fault is not None:
            if fault.drop:
                return None, b"", {}
            if fault.malformed:
                return 200, _MALFORMED, headers
            if fault.status is not None or fault.body is not None:
                status = fault.status if fault.status is not None else 200
                if fault.retry_after is not None:
                    headers["Retry-After"] = str(fault.retry_after)
                payload = fault.body
                if payload is None:
                    payload = replies.error_reply(status, f"injected fault: HTTP {status}")
                data = payload.encode() if isinstance(payload, str) else _json(payload)
                return status, data, headers
        try:
            result = normal()
        except Exception as exc:  # e.g. a broken embedder: answer, do not hang the client
            msg = f"LocalModelServer could not answer: {type(exc).__name__}: {exc}"
            return 500, _json(replies.error_reply(500, msg, "server_error")), headers
        if isinstance(result, tuple):
            data, more = result
            headers.update(more)
            return 200, data, headers
        return 200, result, headers

    def _normal_reply(
        self, path: str, body: dict, prompt: str, answer: Any, fault: Fault | None, n: int
    ) -> bytes | tuple[bytes, dict[str, str]]:
        if path == "/v1/chat/completions" and body.get("stream") and not isinstance(answer, dict):
            empty = fault is not None and fault.empty
            text = "" if empty else (self.default if answer is None else str(answer))
            return replies.chat_stream(body, text, n), {"_sse": "1"}
        return _json(self._reply_body(path, body, prompt, answer, fault, n))

    def _reply_body(self, path: str, body: dict, prompt: str, answer: Any, fault: Fault | None, n: int) -> dict:
        """The JSON reply of a model call that is answered (live or in a batch)."""
        empty = fault is not None and fault.empty
        if path == "/v1/embeddings":
            texts = [] if empty else replies.embedding_inputs(body)
            return self._with_usage(replies.embeddings_reply(body, self._embed(texts, body), texts), body, path)
        if isinstance(answer, dict):
            return answer
        text = "" if empty else (self.default if answer is None else str(answer))
        if path == "/v1/responses":
            return self._with_usage(replies.responses_reply(body, text, prompt, n), body, path)
        if path == "/v1/completions":
            if body.get("echo") or body.get("logprobs") is not None or isinstance(body.get("prompt"), list):
                reply = logprobs.logprobs_reply(body, text, n, self._token_logprob, self.vocab,
                                                echo_supported=self.echo_logprobs)
                return self._with_usage(reply, body, path)
            return self._with_usage(replies.completions_reply(body, text, prompt, n), body, path)
        return self._with_usage(replies.chat_reply(body, text, prompt, n), body, path)

    def _batch_answer(self, path: str, body: dict) -> tuple[int, Any]:
        """One request of a batch: (status, reply JSON), decided as a live call would be.

        The responder, the `Fault` list and `usage` apply; latency does not (a batch's timing is
        `batch_delay`). A fault that would drop or garble a live reply is a 500 here: a batch
        reports every request.
        """
        try:
            prompt = self._prompt(path, body)
        except UnknownTokenId as exc:
            return 400, replies.error_reply(400, str(exc))
        fault = self._schedule.pick(body, path, prompt)
        answer: Any = None
        if (fault is None or _passive(fault)) and path in _ANSWERED:
            try:
                answer = self._answer(body, path, prompt)
            except Exception as exc:
                return 500, replies.error_reply(500, f"responder raised {type(exc).__name__}: {exc}", "server_error")
            if isinstance(answer, Fault):
                fault, answer = answer, None
        if fault is not None and not _passive(fault):
            if fault.drop or fault.malformed:
                return 500, replies.error_reply(500, "injected fault: no usable reply", "server_error")
            status = fault.status if fault.status is not None else 200
            payload = fault.body
            if payload is None:
                payload = replies.error_reply(status, f"injected fault: HTTP {status}")
            elif isinstance(payload, str):
                payload = {"error": {"message": payload, "type": "server_error", "param": None, "code": None}}
            return status, payload
        self._batch_n += 1
        try:
            return 200, self._reply_body(path, body, prompt, answer, fault, self._batch_n)
        except Exception as exc:
            return 500, replies.error_reply(500, f"LocalModelServer could not answer: {type(exc).__name__}: {exc}",
                                            "server_error")

    def _with_usage(self, reply: dict, body: dict, path: str) -> dict:
        numbers = self.usage(body, path) if callable(self.usage) else self.usage
        if numbers is not None:
            reply["usage"] = replies.usage_for(path, dict(numbers))
        return reply

    def _prompt(self, path: str, body: dict) -> str:
        """What responders and faults see; a completions prompt of token ids is decoded (all checked)."""
        if path == "/v1/completions" and logprobs.is_token_ids(body.get("prompt")):
            texts = logprobs.prompt_texts(body["prompt"], self.vocab)
            return texts[0][0] if texts else ""
        return replies.prompt_of(path, body)

    def _answer(self, body: dict, path: str, prompt: str) -> Any:
        """What the responder says: str, dict (full body), Fault, or None (default)."""
        r = self._responder
        if r is None:
            return None
        if isinstance(r, dict):
            for key, value in r.items():
                if key in prompt:
                    return value
            return None
        result = r(body, path) if self._pass_path else r(body)
        if isinstance(result, dict) and set(result) == {"fault"}:
            return Fault(**result["fault"])
        return result

    def _embed(self, texts: list[str], body: dict) -> list[list[float]]:
        if self.embedder is not None:
            return [list(map(float, v)) for v in self.embedder(texts)]
        dim = body.get("dimensions")
        dim = dim if isinstance(dim, int) and dim > 0 else self.embedding_dim
        return [replies.hash_embedding(t, dim) for t in texts]


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _passive(fault: Fault) -> bool:
    """A fault that still lets the request be answered (it only delays or empties it)."""
    return not (fault.drop or fault.malformed or fault.status is not None or fault.body is not None)


def _takes_two_args(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)
