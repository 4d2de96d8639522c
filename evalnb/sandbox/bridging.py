"""The model bridge seen from the pool: answering a worker's ``ctx.*_create`` request.

The worker asks; a pool thread checks ``model_access`` and ``max_model_calls`` (the parent's
count is the one that counts, whatever the worker claims), runs the runner's async
``bridge(kind, request)`` on the caller's event loop and sends the plain JSON reply back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import time
from collections.abc import Awaitable, Callable

from . import protocol
from .job import Job
from .process import POLL_SECONDS, Cancelled, WorkerGone, WorkerProcess

Bridge = Callable[..., Awaitable[dict] | dict]
"""``bridge(kind, request) -> reply``: kind is "responses" or "embeddings"; given by the runner.

A bridge with ``takes_index = True`` is called ``bridge(kind, request, index)``, ``index``
being the call of the batch (the sample) that asked, so it can tell whose call it makes."""

BRIDGE_KINDS = ("responses", "embeddings")
REPLY_TIMEOUT_SECONDS = 60.0


def answer_bridge(
    worker: WorkerProcess, job: Job, message: list, expected: int, counts: dict[int, int],
    bridge_call: Callable | None, started: float, cancel: threading.Event,
) -> None:  # fmt: skip
    """Make (or refuse) one model call for the worker; the parent's limits are the real ones."""
    if len(message) != 5 or message[1] != expected or not isinstance(message[2], int):
        raise WorkerGone("protocol error: malformed bridge request")
    _, index, request_id, kind, request = message
    used = counts.get(index, 0)
    ok, body = False, ""
    if not job.model_access:
        body = f"ctx.{kind}_create is disabled: this grader has model_access 'none'"
    elif used >= job.max_model_calls:
        body = f"max_model_calls ({job.max_model_calls}) reached for this grader execution"
    elif kind not in BRIDGE_KINDS or not isinstance(request, dict):
        body = f"unknown model call {kind!r}"
    elif bridge_call is None:
        body = "no model bridge is configured for this run"
    else:
        counts[index] = used + 1
        remaining = started + job.timeout - time.monotonic()
        try:
            reply = bridge_call(kind, request, remaining, cancel, index)
            if not isinstance(reply, dict):
                raise TypeError(f"the bridge returned {type(reply).__name__}, not a dict")
            if kind == "responses" and reply.get("output_text") is None:
                reply = {**reply, "output_text": output_text(reply)}
            frame = protocol.encode_lenient(["reply", request_id, True, reply])
            ok = True
        except Cancelled:
            worker.kill()
            raise
        except TimeoutError:
            body = f"the model call did not finish within the grader's timeout ({job.timeout:g} s)"
        except Exception as exc:  # noqa: BLE001 - any bridge failure goes back to user code
            body = f"{type(exc).__name__}: {exc}"
    if not ok:
        frame = protocol.encode(["reply", request_id, False, body])
    worker.send(frame, time.monotonic() + REPLY_TIMEOUT_SECONDS, cancel)


def output_text(reply: dict) -> str:
    """Concatenate the ``output_text`` parts of a Responses reply (what the SDK property does)."""
    parts: list[str] = []
    for item in reply.get("output") or []:
        if isinstance(item, dict) and item.get("type", "message") == "message":
            for content in item.get("content") or []:
                if isinstance(content, dict) and content.get("type") == "output_text":
                    parts.append(str(content.get("text") or ""))
    return "".join(parts)


def bridge_caller(bridge: Bridge, loop: asyncio.AbstractEventLoop) -> Callable[..., dict]:
    """A blocking ``call(kind, request, timeout, cancel, index)`` for pool threads; the bridge runs on ``loop``."""

    indexed = bool(getattr(bridge, "takes_index", False))

    async def invoke(kind: str, request: dict, index: int) -> dict:
        reply = bridge(kind, request, index) if indexed else bridge(kind, request)
        return await reply if inspect.isawaitable(reply) else reply  # type: ignore[return-value]

    def call(kind: str, request: dict, timeout: float, cancel: threading.Event, index: int = 0) -> dict:
        deadline = time.monotonic() + timeout
        future = asyncio.run_coroutine_threadsafe(invoke(kind, request, index), loop)
        while True:  # wait in slices so a cancelled batch does not sit out a slow model call
            remaining = deadline - time.monotonic()
            if remaining <= 0 or cancel.is_set():
                future.cancel()
                if cancel.is_set():
                    raise Cancelled()
                raise TimeoutError()
            try:
                return future.result(timeout=min(remaining, POLL_SECONDS))
            except concurrent.futures.TimeoutError:
                continue

    return call
