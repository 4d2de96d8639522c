"""`RunContext`: what an executor sees of a running run (the contract is in `runner.executors.base`).

The engine builds one per run once its tasks are prepared and hands it to the executor's
`start`. Everything an executor hands back goes through here: a reply is priced, charged to
the budget, cached, counted on the progress panel, turned into a `Sample`, extracted and
given to the grading pipeline (`runner.grading_pipeline`), which stores it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from evalnb.runner.twins import Twins
from evalnb.runner.unit import ModelRequest, Output, Unit
from evalnb.sample import Sample

MODEL_PRICE: Any = object()  # `worst_cost`'s default: the unit's model's own price
FAST_REPLY_S = 0.02  # a reply this quick means a local server: the run is CPU-bound (see `RunContext._held`)


class RunContext:
    """One run as its executor sees it: units in, outcomes back (see `runner.executors.base`).

    Read-only attributes: ``plan`` (`run_plan.RunPlan`: models, generation settings,
    concurrency, ...) and ``run_id``. Everything else an executor does to the run goes through
    the methods below (tasks, budget, in-flight counts, retries, progress lines); it never writes
    the engine's state (tests/test_layout.py checks the shipped executors).
    """

    def __init__(self, *, plan: Any, run_id: str, store: Any, writer: Any, progress: Any, budget: Any,
                 tasks: dict[str, Any], grading: Any, clients: dict[str, Any], paid: dict | None,
                 executor_name: str, on_judge_call: Callable[[str | None, dict], None],
                 fail_fast: Any = None, hold: Any = None) -> None:
        self.plan, self.run_id, self._progress, self._budget, self._tasks = plan, run_id, progress, budget, tasks
        self._store, self._writer, self._grading, self._clients = store, writer, grading, clients
        self._paid = paid  # (task, model, index, epoch) -> (request key, cost) an earlier attempt paid
        self._executor = executor_name
        self._on_judge_call = on_judge_call
        self._fail_fast = fail_fast  # `runner.fail_fast.FailFast`: stops a model or task whose calls all fail
        # `runner.preload`'s future: calls wait for it only once replies come back fast (see `_held`)
        self._hold = hold
        self._fast_replies = False
        gen = plan.generation
        self._gen = gen
        self._task_gen: dict[str, dict[str, Any]] = {}  # task id -> run settings + the task's own
        self._prefixes: dict[str, str] = {}  # model label -> its tokenizer's prefix token (`learn_prefix`)
        self._max_out = gen.get("max_output_tokens")
        self._instructions = gen.get("instructions") if isinstance(gen.get("instructions"), str) else None
        self._extracting: set[asyncio.Task] = set()  # extractions running off the loop
        # prompt variants: units whose identical request another unit of the run sends (`runner.twins`)
        self._twins = Twins() if getattr(plan, "variants", None) is not None else None

    # ---- what a unit asks ---------------------------------------------------------------------
    def request(self, unit: Unit) -> ModelRequest:
        """The request the engine would send for `unit` (for an executor that sends it itself)."""
        from evalnb.providers import build_chat_request, build_responses_request

        model = unit.model
        pairs = self.loglikelihood_pairs(unit)
        if pairs is not None:  # every continuation's echoed log-probabilities, in one call
            from evalnb.providers.logprobs import loglikelihood_request

            return ModelRequest(model, "/completions", loglikelihood_request(model.name, pairs))
        gen = self._generation(unit)
        if model.api == "chat":
            body = build_chat_request(model.name, unit.item.prompt, gen, is_openai=model.is_openai)
            return ModelRequest(model, "/chat/completions", body)
        if model.api == "completions":
            from evalnb.providers.build import build_completions_request

            body = build_completions_request(model.name, unit.item.prompt, gen, is_openai=model.is_openai)
            return ModelRequest(model, "/completions", body)
        body = build_responses_request(model.name, unit.item.prompt, gen, is_openai=model.is_openai)
        return ModelRequest(model, "/responses", body)

    def loglikelihood_pairs(self, unit: Unit) -> list[tuple[str, str]] | None:
        """The ``(context, continuation)`` pairs `unit` asks about, if its task is scored by
        log-likelihood (None for a generation task); an executor that sends the request itself
        reads its answer with `providers.logprobs.parse_loglikelihoods` and `reply`s
        `runner.loglikelihood_call.reply_text` of it."""
        spec = self._loglikelihood(unit)
        if spec is None:
            return None
        from evalnb.runner.loglikelihood_call import continuation_pairs

        item = unit.item
        pairs = continuation_pairs(spec, item.prompt, item.target, item.continuations, item.contexts)
        prefix = self._prefixes.get(unit.model.label)
        if prefix is not None and any(context == "" for context, _ in pairs):
            from evalnb.providers.logprobs import with_prefix

            return with_prefix(pairs, prefix)
        return pairs

    async def learn_prefix(self, unit: Unit) -> None:
        """Read the model's prefix token (`ModelClient.prefix_token`) if `unit` has an empty
        context, so `loglikelihood_pairs` and `request` condition it as a live call does (for an
        executor that builds requests itself: provider batches); `ProviderError` if it cannot."""
        label = unit.model.label
        if label in self._prefixes:
            return
        pairs = self.loglikelihood_pairs(unit)
        if pairs and any(context == "" for context, _ in pairs):
            self._prefixes[label] = await self._clients[label].prefix_token()

    def sample(self, unit: Unit, output: Output | dict | None = None) -> Sample:
        """A new `Sample` for `unit`: the planned fields, and the generation fields of `output`."""
        item = unit.item
        s = Sample(unit.task_id, unit.model.label, item.index, unit.epoch, item.prompt, item.question, item.target,
                   item.row, 1 if item.missing_field else 0)
        if output is not None:
            s.request_key = unit.key
            s.output_text = output.get("output_text")
            s.response_id = output.get("response_id")
            s.usage = output.get("usage")
            s.latency_s = output.get("latency_s")
            s.cost_usd = output.get("cost_usd")
        return s

    # ---- handing outcomes back ----------------------------------------------------------------
    async def call(self, unit: Unit) -> None:
        """Make `unit`'s model call in this process (the run's clients, limits, retries and
        budget) and hand the outcome on, as `reply` or `fail` would."""
        import time

        from evalnb.errors import ProviderError
        from evalnb.providers.pricing import call_cost

        model, budget = unit.model, self._budget
        stopped = self._fail_fast.stop_reason(unit.task_id, model.label) if self._fail_fast is not None else None
        if stopped is not None:  # its model or task hits the same failure on every call: not made
            self.not_run(unit, stopped)
            return
        limited = budget.limit is not None
        worst = 0.0
        if limited:
            worst = self.worst_cost(unit)
            if not await budget.reserve(worst):
                return  # not started: the next attempt of the run does it
        if self._hold is not None:
            await self._held()
        mp = self._progress.model(model.label, unit.task_id)
        mp.in_flight += 1
        cost = None
        started = time.perf_counter()
        try:
            pairs = self.loglikelihood_pairs(unit)
            if pairs is not None:  # every continuation in one call (`runner.loglikelihood_call`)
                from evalnb.runner.loglikelihood_call import score_continuations

                completion = await score_continuations(self._clients[model.label], pairs)
            else:
                completion = await self._clients[model.label].complete(unit.item.prompt, self._generation(unit))
            cost = call_cost(completion.usage, model.price)
        except ProviderError as exc:
            mp.in_flight -= 1
            self.fail(unit, str(exc), status=exc.status, latency_s=time.perf_counter() - started,
                      retryable=exc.retryable)
            self._count_failure(unit, exc.status, str(exc))
            return
        finally:
            if limited:
                budget.settle(worst, cost)
            else:
                budget.add(cost)
        mp.in_flight -= 1
        if self._hold is not None and completion.latency_s < FAST_REPLY_S:
            self._fast_replies = True
        if self._fail_fast is not None:
            self._fail_fast.call_succeeded(model.label)
        output = {"request_key": unit.key, "output_text": completion.text, "usage": completion.usage,
                  "response_id": completion.response_id, "latency_s": completion.latency_s, "cost_usd": cost}
        mp.cost_usd += cost or 0.0
        self._writer.put_output(output)
        self._extract(unit, self._generated(unit, output, reused=False))
        self._settle_twins(unit, "output", output)

    async def _held(self) -> None:
        """Wait for the background pandas import if the server answers fast.

        Against a slow server the import hides in the waits for replies. Against a fast one
        (a local server, a cache) the run is CPU-bound, and the import beside the calls cost
        more CPU than before them (benchmarks/README.md): once a reply comes back within
        `FAST_REPLY_S`, new calls wait until the import is done.
        """
        hold = self._hold
        if hold is None:
            return
        if hold.done():
            self._hold = None
        elif self._fast_replies:
            await hold
            self._hold = None

    def _generation(self, unit: Unit) -> dict[str, Any]:
        """The run's generation settings with the task's own (``task.generation``) on top; one
        dict per task, so the client's per-settings cache still sees the same object."""
        cache = self._task_gen
        gen = cache.get(unit.task_id)
        if gen is None:
            from evalnb.suite.task_generation import merged_generation

            state = self._tasks.get(unit.task_id)
            gen = cache[unit.task_id] = merged_generation(self._gen, getattr(getattr(state, "task", None),
                                                                             "generation", None))
        return gen

    def _loglikelihood(self, unit: Unit) -> Any:
        """The task's ``loglikelihood`` spec (None: a generation task)."""
        state = self._tasks.get(unit.task_id)
        return getattr(getattr(state, "task", None), "loglikelihood", None)

    def answered(self, unit: Unit) -> None:
        """`unit.output` (the output cache's answer) stands for the call: extract, grade, store."""
        self._progress.model(unit.model.label, unit.task_id).reused += 1
        self._extract(unit, self._generated(unit, unit.output, reused=True))

    def reply(self, unit: Unit, output: Output | dict) -> None:
        """The model's reply to `unit`, obtained by the executor: priced (from ``usage`` and the
        model's price unless ``cost_usd`` is given), charged, cached, extracted, graded, stored."""
        sample = self.generated(unit, output)
        self._extract(unit, sample)

    def fail(self, unit: Unit, message: str, *, status: int | None = None, latency_s: float | None = None,
             retryable: bool | None = None) -> None:
        """`unit`'s call failed for good (retries spent): stored as a failed sample, with how long
        it took (``latency_s``, retries included)."""
        sample = self.sample(unit)
        sample.latency_s = latency_s
        error = {"stage": "generation", "message": message, "status": status}
        if retryable is not None:
            error["retryable"] = bool(retryable)
        self._grading.record(sample, error=error)
        self._settle_twins(unit, "failed", {"message": message, "status": status, "retryable": retryable})

    def _count_failure(self, unit: Unit, status: int | None, message: str) -> None:
        """A call made here failed: failures that hit every call of the model stop it
        (`runner.fail_fast`); its remaining units reach `call` and are stored as not run."""
        if self._fail_fast is None:
            return
        reason = self._fail_fast.call_failed(unit.model.label, status, message)
        if reason is not None:
            self._progress.warn(f"{reason}; its remaining calls are not made (a resume sends them)")

    def not_run(self, unit: Unit, reason: str) -> None:
        """`unit` is not called (its model or task was stopped): stored as not run, with why."""
        self._grading.not_run(self.sample(unit), reason)
        self._settle_twins(unit, "not_run", reason)

    def generated(self, unit: Unit, output: Output | dict) -> Sample:
        """A call the executor made elsewhere: price, charge and cache `output`, count it, and
        return its `Sample` (not extracted or graded: for executors that do that themselves)."""
        from evalnb.providers.pricing import call_cost

        output = {**output, "request_key": unit.key}
        if output.get("cost_usd") is None:
            output["cost_usd"] = call_cost(output.get("usage"), unit.model.price)
        cost = output["cost_usd"]
        self._progress.model(unit.model.label, unit.task_id).cost_usd += cost or 0.0
        self._budget.add(cost)
        self._writer.put_output(output)
        sample = self._generated(unit, output, reused=False)
        self._settle_twins(unit, "output", output)
        return sample

    def reused(self, unit: Unit) -> Sample:
        """`unit.output` (the cache's answer) as a `Sample`, not extracted or graded yet."""
        self._progress.model(unit.model.label, unit.task_id).reused += 1
        return self._generated(unit, unit.output, reused=True)

    def finish(self, results: Iterable[tuple[Sample, dict | None, bool]]) -> None:
        """Samples the executor finished itself: (sample, error or None, graded).

        ``graded`` False for a sample of a per-sample task means it failed before grading
        (its error says at which stage); samples of aggregate tasks are graded later here.
        All are stored in one hand-over.
        """
        grading = self._grading
        done = []
        for sample, error, _graded in results:
            grading.finish(sample, error=error)
            done.append(sample)
        if done:
            self._writer.add_samples(done)
        if self._twins is not None:  # a call made elsewhere that failed: its twins fail alike
            for sample, error, _graded in results:
                if isinstance(error, dict) and error.get("stage") == "generation" and sample.request_key:
                    self._twins_failed(sample.request_key, {"message": str(error.get("message")),
                                                             "status": error.get("status"),
                                                             "retryable": error.get("retryable")})

    # ---- twins: identical requests of two candidates, sent once (`runner.twins`) -----------------
    def hold_twin(self, unit: Unit) -> None:
        """`unit` sends what another unit of the run sends: it takes that unit's outcome (the engine's side)."""
        assert self._twins is not None
        outcome = self._twins.hold(unit)
        if outcome is not None:
            self._answer_twin(unit, *outcome)

    def twins_never_answered(self) -> None:
        """After the executor is done: twins whose request was never made are stored as not run."""
        if self._twins is not None:
            for unit in self._twins.leftover():
                self.not_run(unit, "not run: the identical request of another variant was not made")

    def _settle_twins(self, unit: Unit, kind: str, value: Any) -> None:
        if self._twins is not None:
            for twin in self._twins.settle(unit.key, kind, value):
                self._answer_twin(twin, kind, value)

    def _twins_failed(self, key: str, error: dict) -> None:
        for twin in self._twins.settle(key, "failed", error) if self._twins is not None else ():
            self._answer_twin(twin, "failed", error)

    def _answer_twin(self, unit: Unit, kind: str, value: Any) -> None:
        if kind == "output":
            unit.output = value
            self.answered(unit)  # from the store: this candidate's sample costs nothing
        elif kind == "failed":
            self.fail(unit, value["message"], status=value.get("status"), retryable=value.get("retryable"))
        else:
            self.not_run(unit, value)

    def judge_called(self, label: str | None, call: dict) -> None:
        """A grader's model call made by the executor (with its cost): counted for `label`."""
        self._on_judge_call(label, call)

    def cache_outputs(self, outputs: list[dict]) -> None:
        """Model replies to keep in the output cache (e.g. a worker's judge calls)."""
        if outputs:
            self._writer.put_outputs(outputs)

    def backlog(self) -> int:
        """Samples generated and waiting for grading: an executor pauses its intake on this."""
        return self._grading.backlog()

    # ---- the run's tasks, budget and counters, as an executor may use them -------------------------
    @property
    def task_ids(self) -> list[str]:
        """The tasks that run (those that could not start are not among them)."""
        return list(self._tasks)

    def task(self, task_id: str) -> Any:
        """The `suite.Task` (read it, do not change it)."""
        return self._tasks[task_id].task

    def per_sample(self, task_id: str) -> bool:
        """Whether the task's grader grades sample by sample (else one batch grader at the end)."""
        return bool(self._tasks[task_id].per_sample)

    def worst_cost(self, unit: Unit, price: Any = MODEL_PRICE) -> float:
        """The most `unit`'s call can cost (its prompt and instructions, ``max_output_tokens``) at
        `price` (default: its model's; a batch executor passes its discounted one); 0 unpriced."""
        from evalnb.providers.pricing import estimate_tokens, worst_case_cost

        price = unit.model.price if price is MODEL_PRICE else price
        if price is None:
            return 0.0
        extra = estimate_tokens(self._instructions) if self._instructions else 0
        return worst_case_cost(estimate_tokens(unit.item.prompt) + extra, self._max_out, price)

    def try_reserve(self, unit: Unit, price: Any = MODEL_PRICE) -> float | None:
        """Hold `unit`'s `worst_cost` in the run's budget, without waiting: the amount held (0.0
        without a budget), or None when it does not fit (do not send the call). End each hold
        with `release` once the call has an outcome; `reply` charges what it really cost."""
        if self._budget.limit is None:
            return 0.0
        worst = self.worst_cost(unit, price)
        return worst if self._budget.try_reserve(worst) else None

    def release(self, held: float) -> None:
        """End a `try_reserve` hold (what the call cost is charged by `reply` / `generated`)."""
        if self._budget.limit is not None:
            self._budget.settle(held, None)

    def calls_started(self, label: str, n: int = 1) -> None:
        """`n` calls of model `label` are in flight elsewhere (the panel's in-flight count)."""
        self._progress.model(label).in_flight += n

    def calls_ended(self, label: str, n: int = 1) -> None:
        """`n` of those calls came back (answered or not) or will not: no longer in flight."""
        mp = self._progress.model(label)
        mp.in_flight = max(0, mp.in_flight - n)

    def count(self, label: str, *, retries: int = 0, rate_limited: int = 0, rate_limit_wait_s: float = 0.0) -> None:
        """Retries and rate limits the executor met for model `label` (shown on the panel)."""
        mp = self._progress.model(label)
        mp.retries += int(retries)
        mp.rate_limited += int(rate_limited)
        mp.rate_limit_wait_s += float(rate_limit_wait_s)

    def show(self, label: str, text: str | None) -> None:
        """A line of the executor's own on model `label`'s panel row (e.g. its batches' state)."""
        self._progress.model(label).batch = text or ""

    # ---- per-run executor state ---------------------------------------------------------------
    def load_state(self) -> dict[str, Any]:
        """What this executor saved for this run (key -> JSON value), also by an earlier attempt."""
        return self._store.executor_state(self.run_id, self._executor)

    def save_state(self, key: str, value: Any) -> None:
        """Keep `value` (JSON; None removes it) for this run and executor; committed at once."""
        self._store.save_executor_state(self.run_id, self._executor, key, value)

    # ---- the engine's side ---------------------------------------------------------------------
    def _generated(self, unit: Unit, output: dict, *, reused: bool) -> Sample:
        sample = self.sample(unit, output)
        sample.request_key = unit.key
        if reused:
            self._charge_reused(sample, unit, output)
        usage = sample.usage
        if usage:
            mp = self._progress.model(unit.model.label, unit.task_id)
            mp.input_tokens += int(usage.get("input_tokens") or 0)
            mp.output_tokens += int(usage.get("output_tokens") or 0)
        return sample

    def _extract(self, unit: Unit, sample: Sample) -> None:
        """Extract inline when it is quick; a search that needs longer goes off the loop
        (`scoring.off_loop`) and the sample follows when it comes back (`extractions_done`)."""
        from evalnb.scoring.off_loop import LATER

        state = self._tasks[unit.task_id]
        try:
            value = state.extractor.now(sample.output_text)
        except Exception as exc:  # noqa: BLE001 - extraction never takes the run down
            self._grading.record(sample, error={"stage": "extraction", "message": str(exc)})
            return
        if value is LATER:
            self._grading.waiting(sample)
            task = asyncio.ensure_future(self._extract_later(unit, sample, state))
            self._extracting.add(task)
            task.add_done_callback(self._extracting.discard)
            return
        sample.extracted_output = value
        self._extracted(unit, sample, state)

    async def _extract_later(self, unit: Unit, sample: Sample, state: Any) -> None:
        try:
            sample.extracted_output = await state.extractor.later(sample.output_text)
        except Exception as exc:  # noqa: BLE001 - a timeout (or any failure) is the sample's error
            self._grading.record(sample, error={"stage": "extraction", "message": str(exc)})
            return
        self._extracted(unit, sample, state)

    async def extractions_done(self) -> None:
        """Wait for the extractions running off the loop (the engine, before grading ends)."""
        while self._extracting:
            await asyncio.gather(*list(self._extracting), return_exceptions=True)

    def _extracted(self, unit: Unit, sample: Sample, state: Any) -> None:
        if state.per_sample:
            self._grading.enqueue(sample, unit.item)
        else:
            self._grading.record(sample)

    def _charge_reused(self, sample: Sample, unit: Unit, output: dict) -> None:
        """An output answered from the store: nothing was paid for it in this run, unless an
        earlier attempt of this run made the call (then the sample keeps what it cost)."""
        paid = self._paid.get((unit.task_id, unit.model.label, unit.item.index, unit.epoch)) if self._paid else None
        if paid is not None and paid[0] == unit.key:
            sample.cached, sample.cost_usd = False, paid[1]
        elif output.get("run_id") == self.run_id:  # its answer reached the store, its sample did not
            from evalnb.providers.pricing import call_cost

            paid_then = output.get("cost_usd")  # as priced when it arrived (a batch's discount kept)
            sample.cached = False
            sample.cost_usd = paid_then if paid_then is not None else call_cost(output.get("usage"), unit.model.price)
        else:
            sample.cached, sample.cost_usd = True, 0.0
