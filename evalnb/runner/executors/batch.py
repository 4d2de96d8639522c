"""`BatchExecutor`: a run's candidate calls sent through the provider's Batch API.

The engine plans the run as always and hands its calls here (`submit`); they are written as
JSONL (one line per sample, ``custom_id`` the unit's id ``task/model/index/epoch``, the body
exactly the live call's body, `RunContext.request`), cut at the provider's limits, uploaded and made into batches, one model per batch.
Each batch's id is stored with the run (the run's executor state, `RunContext.save_state`)
*before* anything waits on it, so a closed laptop, a kernel restart or a SIGKILL loses nothing: the
next attempt (`evalnb.resume` or the same run again) reads the stored batches, downloads their
input files, and every sample whose request is already in one waits for that batch instead of
being uploaded again.

While batches run, `drain` polls them (quick at first, then every ``poll_interval``); the
progress line shows each model's batches and request counts. A finished batch's answers
become samples at once (extracted and graded as usual; judges stay live calls). Requests the
provider reports as expired, cancelled before they ran, rate-limited or failed by a 5xx are
tried again: in a follow-up batch (``retry_failed="batch"``) or as live calls
(``retry_failed="live"``), at most ``max_retries`` times. A batch that fails as a whole fails
its samples with the provider's message; other per-request errors fail their sample as a
live call's error would. Costs use the model's batch price (`pricing.batch_price`).

Written against the executor interface alone (`runner.executors.base`): everything goes through
the `RunContext` (``request`` for the bodies, ``reply``/``fail``/``answered`` for outcomes,
``call`` for live retries, ``save_state``/``load_state`` for the batch ids).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from evalnb.errors import ProviderError
from evalnb.providers.batch_api import (
    MAX_BYTES,
    MAX_REQUESTS,
    TERMINAL,
    BatchAPI,
    Outcome,
    poll_delays,
    request_line,
    split,
)
from evalnb.providers.logprobs import parse_loglikelihoods
from evalnb.providers.pricing import batch_price, call_cost
from evalnb.runner.loglikelihood_call import reply_text
from evalnb.runner.run_context import RunContext
from evalnb.runner.unit import Unit
from evalnb.scoring.extraction import clean_output

POLL_ENV = "EVALNB_BATCH_POLL_S"
DEFAULT_POLL_S = 30.0
RETRY_MODES = ("batch", "live")
NAME = "batch"  # the executor's name: its state in the store is kept under it
BATCH_KEY = "batch:"  # state key of a batch's record: BATCH_KEY + batch id
STARTED_KEY = "started_at"  # state key: when the run's first attempt started sending batches


@dataclass
class _Batch:
    """One provider batch of this run: its stored record, and the samples waiting on it."""

    record: dict[str, Any]
    members: dict[str, Unit] = field(default_factory=dict)  # custom_id -> the unit waiting on it
    resend_missing: bool = False  # cancelled by evalnb.cancel before this attempt: unanswered go again

    @property
    def id(self) -> str:
        return self.record["id"]


class BatchExecutor:
    """Run through the provider's Batch API: ``evalnb.run(suite, models, executor="batch")``.

    ``poll_interval``: the longest wait between looks at running batches, in seconds (default
    ``EVALNB_BATCH_POLL_S``, else 30; the first looks come sooner); ``max_requests_per_batch``
    and ``max_bytes_per_file``: where to cut (default OpenAI's 50,000 requests and 200 MB);
    ``retry_failed``: ``"batch"`` (a follow-up batch) or ``"live"`` (ordinary calls) for
    requests the provider could not answer (expired, 429, 5xx); ``max_retries``: how often.
    """

    name = NAME

    def __init__(self, poll_interval: float | None = None, *, max_requests_per_batch: int = MAX_REQUESTS,
                 max_bytes_per_file: int = MAX_BYTES, retry_failed: str = "batch", max_retries: int = 2) -> None:
        if poll_interval is None:
            raw = os.environ.get(POLL_ENV)
            try:
                poll_interval = float(raw) if raw else DEFAULT_POLL_S
            except ValueError:
                raise ValueError(f"{POLL_ENV} must be a number of seconds, got {raw!r}") from None
        if isinstance(poll_interval, bool) or not isinstance(poll_interval, (int, float)) or not poll_interval > 0:
            raise ValueError(f"BatchExecutor poll_interval must be seconds > 0, got {poll_interval!r}")
        for what, value in (("max_requests_per_batch", max_requests_per_batch),
                            ("max_bytes_per_file", max_bytes_per_file)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"BatchExecutor {what} must be an integer >= 1, got {value!r}")
        if retry_failed not in RETRY_MODES:
            raise ValueError(f"BatchExecutor retry_failed must be 'batch' or 'live', got {retry_failed!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"BatchExecutor max_retries must be an integer >= 0, got {max_retries!r}")
        self.poll_interval = float(poll_interval)
        self.max_requests_per_batch = max_requests_per_batch
        self.max_bytes_per_file = max_bytes_per_file
        self.retry_failed = retry_failed
        self.max_retries = max_retries
        self.uploaded = 0  # batches this executor created (not counting ones picked up again)

    def __repr__(self) -> str:
        opts = {k: v for k, v in self.record().items() if k != "type"}
        return f"BatchExecutor({', '.join(f'{k}={v!r}' for k, v in opts.items())})"

    def record(self) -> dict[str, Any]:
        """The options as JSON (stored with the run; `resume` starts a BatchExecutor like it)."""
        return {"type": "batch", "poll_interval": self.poll_interval,
                "max_requests_per_batch": self.max_requests_per_batch,
                "max_bytes_per_file": self.max_bytes_per_file, "retry_failed": self.retry_failed,
                "max_retries": self.max_retries}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> BatchExecutor:
        return cls(record.get("poll_interval"),
                   max_requests_per_batch=record.get("max_requests_per_batch") or MAX_REQUESTS,
                   max_bytes_per_file=record.get("max_bytes_per_file") or MAX_BYTES,
                   retry_failed=record.get("retry_failed") or "batch",
                   max_retries=record.get("max_retries") if record.get("max_retries") is not None else 2)

    # ---- the executor interface ---------------------------------------------------------------
    async def start(self, ctx: RunContext) -> None:
        self.ctx = ctx
        plan = ctx.plan
        self.gen = plan.generation
        self.models = {m.label: m for m in plan.models}
        self.apis = {label: BatchAPI(m) for label, m in self.models.items()}
        self.prices = {label: batch_price(m.price) for label, m in self.models.items()}
        self.batches: dict[str, _Batch] = {}
        self.buffers: dict[str, list[tuple[str, bytes, Unit]]] = {label: [] for label in self.models}
        self.buffer_bytes = dict.fromkeys(self.models, 0)
        self.known: dict[str, tuple[str, bytes]] = {}  # custom_id -> (batch id, digest of its request line)
        self.attempts: dict[str, int] = {}  # custom_id -> retries so far
        self.empty_attempts: dict[str, int] = {}  # custom_id -> asked again for an empty answer
        self.max_empty = int(self.gen.get("max_empty_retries") or 0)
        self.reserved: dict[str, float] = {}  # custom_id -> budget reservation
        self.live: deque[Unit] = deque()  # retries to make as live calls
        self.touched: set[str] = set()  # batches this attempt sent or waits for (the progress line's)
        await self._pick_up_stored()

    async def submit(self, units: list[Unit]) -> None:
        ctx = self.ctx
        for unit in units:
            if unit.output is not None:
                ctx.answered(unit)
                continue
            cid = unit.id
            try:
                await ctx.learn_prefix(unit)  # an empty context: the tokenizer's prefix token, once
            except ProviderError as exc:
                self._fail(unit, str(exc), exc.status)
                continue
            line = self._line(unit)
            stored = self.known.get(cid)
            if stored is not None and stored[1] == _digest(line) and stored[0] in self.batches:
                self.batches[stored[0]].members[cid] = unit  # already asked: wait for that batch
                self.touched.add(stored[0])
                continue
            if len(line) > self.max_bytes_per_file:
                self._fail(unit, f"the request is {len(line)} bytes, over the batch file limit of "
                                 f"{self.max_bytes_per_file} bytes (max_bytes_per_file)", None)
                continue
            if not self._reserve(cid, unit):
                continue  # the budget has no room: not sent (a later attempt of the run does it)
            label = unit.model.label
            self.buffers[label].append((cid, line, unit))
            self.buffer_bytes[label] += len(line)
            if (len(self.buffers[label]) >= self.max_requests_per_batch
                    or self.buffer_bytes[label] >= self.max_bytes_per_file):
                await self._flush(label)
        self._show()

    async def drain(self) -> None:
        for label in self.models:
            await self._flush(label)
        delays = poll_delays(self.poll_interval)
        while True:
            created = self.uploaded
            waiting = [b for b in self.batches.values() if b.members]
            if not waiting and not self.live:
                break
            for batch in waiting:
                await self._look(batch)
            if self.live:
                await self._run_live()
                continue
            for label in self.models:
                await self._flush(label)  # follow-up batches of retried requests
            if self.uploaded != created:
                delays = poll_delays(self.poll_interval)  # a new batch: look at it soon
            self._show()
            if any(b.members for b in self.batches.values()):
                await asyncio.sleep(next(delays))
        self._show()

    async def close(self) -> None:
        """The provider's batches keep running (an interrupted run picks them up again)."""
        for api in getattr(self, "apis", {}).values():
            try:
                await api.aclose()
            except Exception:  # noqa: BLE001 - closing after an interrupt must not raise
                pass

    # ---- uploading ----------------------------------------------------------------------------
    async def _flush(self, label: str) -> None:
        pending = self.buffers[label]
        if not pending:
            return
        self.buffers[label], self.buffer_bytes[label] = [], 0
        units = {cid: unit for cid, _, unit in pending}
        api = self.apis[label]
        for part in split(((cid, line) for cid, line, _ in pending), max_requests=self.max_requests_per_batch,
                          max_bytes=self.max_bytes_per_file):
            data = b"".join(line for _, line in part)
            try:
                created = await api.submit(data, metadata={"evalnb_run": self.ctx.run_id, "model": label})
            except ProviderError as exc:
                for cid, _ in part:
                    self._fail(units[cid], str(exc), exc.status)
                continue
            self.uploaded += 1
            record = {"id": created["id"], "model": label, "input_file_id": created.get("input_file_id"),
                      "status": created.get("status"), "requests": len(part), "done": False,
                      "created_at": time.time()}
            batch = self.batches[record["id"]] = _Batch(record, {cid: units[cid] for cid, _ in part})
            self.touched.add(batch.id)
            for cid, line in part:
                self.known[cid] = (batch.id, _digest(line))
            self._save(batch)  # stored before anything waits on it

    def _line(self, unit: Unit) -> bytes:
        """The unit's JSONL line: the body the engine would send live (`RunContext.request`)."""
        req = self.ctx.request(unit)
        return request_line(unit.id, "/v1" + req.path, req.body)

    def _reserve(self, cid: str, unit: Unit) -> bool:
        """Hold the unit's worst-case cost at the batch price (False: the budget has no room)."""
        held = self.ctx.try_reserve(unit, self.prices[unit.model.label])
        if held is None:
            return False
        self.reserved[cid] = held
        return True

    # ---- waiting and collecting ---------------------------------------------------------------
    async def _look(self, batch: _Batch) -> None:
        api = self.apis[batch.record["model"]]
        try:
            seen = await api.retrieve(batch.id)
        except ProviderError as exc:
            if exc.retryable:
                return  # look again later
            self._fail_batch(batch, f"batch {batch.id}: {exc}", exc.status)
            return
        batch.record["status"] = seen.get("status")
        batch.record["counts"] = seen.get("request_counts") or {}
        if seen.get("status") not in TERMINAL:
            return
        status = seen["status"]
        if status == "failed":
            errors = ((seen.get("errors") or {}).get("data") or [])
            said = "; ".join(str(e.get("message")) for e in errors if isinstance(e, dict) and e.get("message"))
            self._fail_batch(batch, f"batch {batch.id} failed: {said or 'no message from the provider'}", None)
            return
        try:
            outcomes = await api.outcomes(seen)
        except ProviderError as exc:
            if exc.retryable:
                return
            self._fail_batch(batch, f"batch {batch.id}: could not read its results: {exc}", exc.status)
            return
        created = batch.record.get("created_at")
        for cid, unit in list(batch.members.items()):
            outcome = outcomes.get(cid)
            if outcome is None:
                why = "was cancelled before this request was answered" if status == "cancelled" else \
                    f"ended ({status}) without an answer for this request"
                # cancelled while this attempt waited: the user wants it stopped; cancelled before
                # this attempt (a resume after evalnb.cancel): send the rest again
                again = status != "cancelled" or batch.resend_missing
                outcome = Outcome(cid, error=f"batch {batch.id} {why}", retryable=again)
            self._settle(cid, unit, outcome, created)
        batch.members.clear()
        batch.record["done"] = True
        self._save(batch)

    def _settle(self, cid: str, unit: Unit, outcome: Outcome, created: float | None) -> None:
        ctx = self.ctx
        label = unit.model.label
        held = self.reserved.pop(cid, None)
        if held is not None:
            ctx.release(held)  # the hold ends; `reply` charges what it cost
        if outcome.reply is None:
            if outcome.retryable and self.attempts.get(cid, 0) < self.max_retries:
                self.attempts[cid] = self.attempts.get(cid, 0) + 1
                ctx.count(label, retries=1)
                self._ask_again(cid, unit)
                return
            self._fail(unit, outcome.error or "no answer", outcome.status)
            return
        reply = outcome.reply
        pairs = ctx.loglikelihood_pairs(unit)
        if pairs is not None:  # a log-likelihood item: its continuations' numbers are the output
            try:
                text = reply_text(parse_loglikelihoods(outcome.body, pairs, label))
            except ProviderError as exc:
                self._fail(unit, str(exc), exc.status)
                return
            ctx.reply(unit, {"output_text": text, "usage": None, "response_id": reply.response_id,
                             "latency_s": time.time() - created if created else None, "cost_usd": None})
            return
        if self.max_empty and self.empty_attempts.get(cid, 0) < self.max_empty and not clean_output(reply.text):
            # `max_empty_retries`, as a live call does it (empty after the `none` cleaning):
            # asked again, this answer is not kept
            self.empty_attempts[cid] = self.empty_attempts.get(cid, 0) + 1
            ctx.count(label, retries=1)
            self._ask_again(cid, unit)
            return
        ctx.reply(unit, {"output_text": reply.text, "usage": reply.usage, "response_id": reply.response_id,
                         "latency_s": time.time() - created if created else None,
                         "cost_usd": call_cost(reply.usage, self.prices[label])})

    def _ask_again(self, cid: str, unit: Unit) -> None:
        """Send `unit` again: in the next batch, or live (``retry_failed="live"``)."""
        if self.retry_failed == "live":
            self.live.append(unit)
            return
        line = self._line(unit)
        if self._reserve(cid, unit):
            self.buffers[unit.model.label].append((cid, line, unit))
            self.buffer_bytes[unit.model.label] += len(line)

    def _fail(self, unit: Unit, message: str, status: int | None) -> None:
        self.ctx.fail(unit, message, status=status)

    def _fail_batch(self, batch: _Batch, message: str, status: int | None) -> None:
        for cid, unit in batch.members.items():
            held = self.reserved.pop(cid, None)
            if held is not None:
                self.ctx.release(held)
            self._fail(unit, message, status)
        batch.members.clear()
        batch.record["done"] = True
        batch.record["error"] = message
        self._save(batch)

    async def _run_live(self) -> None:
        """Retries as ordinary calls (`RunContext.call`: the run's clients, limits and budget)."""
        calls, self.live = self.live, deque()

        async def worker() -> None:
            while calls:
                await self.ctx.call(calls.popleft())

        await asyncio.gather(*(worker() for _ in range(max(1, min(self.ctx.plan.concurrency, len(calls))))))

    # ---- the run record -----------------------------------------------------------------------
    async def _pick_up_stored(self) -> None:
        """Batches an earlier attempt of this run created and did not finish: wait for them."""
        state = self.ctx.load_state()
        records = batch_records(state)
        since = state.get(STARTED_KEY)
        if since is None:
            self.ctx.save_state(STARTED_KEY, time.time())
        else:  # an earlier attempt: it may have died between creating a batch and storing its id
            records += await self._unrecorded({r["id"] for r in records}, float(since))
        for record in records:
            if record.get("done") or record.get("model") not in self.models:
                self.batches.setdefault(record["id"], _Batch(record))
                continue
            api = self.apis[record["model"]]
            try:
                seen = await api.retrieve(record["id"])
                lines = await api.input_lines(seen)
            except ProviderError as exc:
                if exc.retryable:  # the provider is unreachable now: better stop than pay twice
                    raise ProviderError(f"cannot read the run's batch {record['id']} again ({exc}); nothing was "
                                        "sent: resume the run once the provider answers", status=exc.status,
                                        retryable=True) from None
                record["done"], record["error"] = True, f"could not be read again: {exc}"
                self.batches[record["id"]] = _Batch(record)
                self._save(self.batches[record["id"]])
                continue
            self.batches[record["id"]] = _Batch(record, resend_missing=bool(record.get("cancel_requested")))
            for cid, line in lines.items():
                self.known[cid] = (record["id"], _digest(line))

    async def _unrecorded(self, known: set[str], since: float) -> list[dict[str, Any]]:
        """Batches of this run the provider has but the run's state does not: an attempt that
        died between creating a batch and storing its id. Found by the ``evalnb_run`` metadata
        every batch is created with, among the batches created since the run began."""
        since -= 60  # the provider's clock and ours
        found: list[dict[str, Any]] = []
        seen_servers: set[str] = set()
        for label, api in self.apis.items():
            server = str(self.models[label].base_url)
            if server in seen_servers:
                continue
            seen_servers.add(server)
            try:
                recent = await api.recent(since)
            except ProviderError:
                continue  # a server without the listing: only the stored ids are picked up
            for batch in recent:
                meta = batch.get("metadata") or {}
                if meta.get("evalnb_run") != self.ctx.run_id or batch["id"] in known:
                    continue
                if meta.get("model") not in self.models:
                    continue
                found.append({"id": batch["id"], "model": meta["model"], "input_file_id": batch.get("input_file_id"),
                              "status": batch.get("status"), "requests": (batch.get("request_counts") or {}).get(
                                  "total"), "done": False, "created_at": batch.get("created_at")})
                known.add(batch["id"])
        for record in found:
            self.ctx.save_state(BATCH_KEY + record["id"], record)
        return found

    def _save(self, batch: _Batch) -> None:
        self.ctx.save_state(BATCH_KEY + batch.id, batch.record)

    def _show(self) -> None:
        for label in self.models:
            mine = [b for b in self.batches.values() if b.record.get("model") == label and b.id in self.touched]
            if not mine:
                continue
            statuses: dict[str, int] = {}
            total = done = failed = 0
            for b in mine:
                statuses[b.record.get("status") or "?"] = statuses.get(b.record.get("status") or "?", 0) + 1
                counts = b.record.get("counts") or {}
                total += int(counts.get("total") or b.record.get("requests") or 0)
                done += int(counts.get("completed") or 0)
                failed += int(counts.get("failed") or 0)
            what = ", ".join(f"{n} {s}" for s, n in statuses.items())
            self.ctx.show(label, f"batch {what}: {done}/{total} answered" + (f", {failed} failed" if failed else ""))


def _digest(line: bytes) -> bytes:
    """What identifies a request line (a resume compares it; holding the lines would cost memory)."""
    return hashlib.blake2b(line, digest_size=16).digest()


def batch_records(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The provider batches in a run's executor state, oldest first."""
    records = [dict(v) for k, v in state.items() if k.startswith(BATCH_KEY) and isinstance(v, dict) and v.get("id")]
    return sorted(records, key=lambda r: r.get("created_at") or 0)


def stored_batches(store: Any, run_id: str) -> list[dict[str, Any]]:
    """The provider batches a run has created (for `evalnb.cancel`)."""
    return batch_records(store.executor_state(run_id, NAME))


def save_batch(store: Any, run_id: str, record: dict[str, Any]) -> None:
    store.save_executor_state(run_id, NAME, BATCH_KEY + record["id"], record)
