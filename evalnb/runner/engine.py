"""The run engine: one async pipeline from a plan to samples in the store.

Generation workers (``concurrency`` of them) take calls from a shared queue; each finished
call is extracted at once and handed to the grading pipeline (`runner.grading`), which sends
batches to the sandbox pool while calls are still in flight; graded samples go to the
store's group-commit writer as they finish. Reuse happens here too: cached outputs skip the
model call, and an identical earlier run's graded samples are copied whole.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalnb._gc import fewer_collections, freeze_at_exit, quiet_import
from evalnb.runner.progress import RunProgress, make_display
from evalnb.runner.grading import GradingPipeline
from evalnb.runner.plan import RunPlan, model_record

if TYPE_CHECKING:
    from evalnb.results.run_result import RunResult

TICK_S = 0.25  # progress display refresh
HEARTBEAT_S = 15.0  # how often a running run marks its record alive (see Store.claim_run)


@dataclass
class TaskState:
    """One task's items, grader and per-model bookkeeping within a run."""

    task: Any
    items: list[Any]
    grader: Any
    extractor: Any
    per_sample: bool
    grader_items: dict[int, dict] = field(default_factory=dict)
    # per model label: samples waiting for an aggregate grader, and how many are still to finish
    held: dict[str, list[dict]] = field(default_factory=dict)
    remaining: dict[str, int] = field(default_factory=dict)

    def grader_item(self, index: int) -> dict:
        item = self.grader_items.get(index)
        if item is None:
            item = self.grader_items[index] = self.items[index].as_grader_item()
        return item


class RunEngine(GradingPipeline):
    """Runs one plan: opens the run record, prepares tasks, generates, hands samples to grading."""

    def __init__(self, plan: RunPlan, *, store: Any, progress: bool | str | None, run_id: str | None = None,
                 force: bool = False):
        self.plan = plan
        self._force = force
        self._store = store
        self._progress_mode = progress
        self.run_id = run_id
        self.progress = RunProgress()
        self.tasks: dict[str, TaskState] = {}
        self.task_errors: dict[str, str] = {}
        self._grade_queue: deque[tuple[str, str, dict]] = deque()
        self._grade_event = asyncio.Event()
        self._generation_done = False
        self._stop = asyncio.Event()
        self._grading: set[asyncio.Task] = set()
        # generated samples waiting for (or in) a per-sample grader, by (task, model, index, epoch)
        self._ungraded: dict[tuple[str, str, int, int], dict] = {}
        self.interrupted = False  # cancelled from outside (Ctrl-C, task.cancel()), not by Stop

    # ---- lifecycle ------------------------------------------------------------------------
    async def execute(self) -> "RunResult":
        freeze_at_exit()
        with fewer_collections():  # see _gc.py: ~10% of a fast run's CPU otherwise
            return await self._execute()

    async def _execute(self) -> "RunResult":
        from evalnb.results.run_result import RunResult
        from evalnb.sandbox import SandboxPool
        from evalnb.store import Store

        plan = self.plan
        self._loop = asyncio.get_running_loop()
        self._preloaded = _preload_result_libraries(self._loop)
        # The run's own pools: user code of the tasks opted into the network runs apart.
        self.pool = SandboxPool(plan.grader_concurrency)
        self.net_pool = SandboxPool(plan.grader_concurrency, network=True) if plan.network_tasks else None
        # One worker starts now, while the run record is opened and the rows are read (the
        # grader check waits for it); more start when the grading needs them.
        warm = self.pool.warm_soon(1)
        try:
            store = self.store = self._store or Store()
            self._open_run()
        except BaseException:
            # close first: a worker still starting is then stopped as soon as it is up
            await self._close_pools()
            await asyncio.gather(warm, return_exceptions=True)
            raise
        from evalnb.runner.budget import Budget

        self.budget = Budget(plan.max_cost_usd, spent=store.run_spend(self.run_id))
        self.progress.budget = self.budget
        self.display = make_display(self.progress, self._progress_mode, on_stop=self._request_stop)
        self.writer = store.writer(self.run_id)
        ticker = asyncio.ensure_future(self._tick())
        status, error = "completed", None
        try:
            await self._prepare_tasks()
            await self._run_all()
            if self.task_errors:
                status = "failed"
                error = "; ".join(f"task {t!r}: {m}" for t, m in self.task_errors.items())
            if self.budget.exhausted:
                status = "stopped"
                error = "; ".join(x for x in (self._budget_message(), error) if x)
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "cancelled"
            self.interrupted = not self.progress.stop_requested  # not the panel's Stop button
            current = asyncio.current_task()
            if current is not None:
                while current.uncancel():
                    pass
        except BaseException as exc:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            await self._shutdown(ticker, warm, status, error)
            raise
        try:
            await self._shutdown(ticker, warm, status, error)
        except asyncio.CancelledError:
            pass  # interrupted while closing: samples and status are saved already (see _shutdown)
        result = RunResult(store, self.run_id)
        result.interrupted = self.interrupted  # evalnb.run / resume then raise KeyboardInterrupt
        return result

    def _open_run(self) -> None:
        plan, store = self.plan, self.store
        suite = plan.suite
        manifest = suite.to_dict()
        store.save_suite(suite.version, manifest)
        for m in plan.models + [x for x in (plan.judge_model, plan.embedding_model) if x is not None]:
            store.add_secrets(*m.secrets())
        args = dict(
            models=[m.describe() for m in plan.models],
            generation=plan.generation,
            task_ids=None if plan.all_tasks else plan.task_ids,
            max_samples=plan.max_samples,
            judge_model=plan.judge_model.name if plan.judge_model else None,
            embedding_model=plan.embedding_model.name if plan.embedding_model else None,
            epochs=plan.epochs,
            judge_generation=plan.judge_generation,
        )
        if self.run_id is None:
            self.run_id = store.find_resumable_run(suite.version, **args) if plan.reuse else None
        self._continuing = self.run_id is not None  # it may hold answers of its own already
        if self.run_id is not None:
            store.claim_run(self.run_id, force=self._force)
        else:
            self.run_id = store.create_run(
                suite.version, concurrency=plan.concurrency, metadata=plan.metadata, status="in_progress", **args
            )
        base_dir = str(suite.base_dir) if suite.base_dir else None
        # the stored run record keeps only model names for the judge and embedding models, and
        # no key variables: resume() rebuilds the models from this
        # a name given now labels the run, also one this run continues
        named = {} if plan.name is None else {"name": plan.name}
        store.update_run(self.run_id, summary={
            "base_dir": base_dir,
            "models": [model_record(m) for m in plan.models],
            "options": plan.stored_options(),
        }, **named)
        self.progress.run_id = self.run_id

    def _budget_message(self) -> str:
        b = self.budget
        return (f"stopped by the budget max_cost_usd={b.limit:g}: {b.describe()}, {b.refused} call(s) not started; "
                f"every finished sample is kept: evalnb.resume({self.run_id!r}, max_cost_usd=<a larger budget>) "
                "continues")

    def _request_stop(self) -> None:
        # The Stop button's callback runs on the kernel's main thread, which is not always our
        # loop's thread (evalnb.run from a notebook runs the loop in a helper thread):
        # asyncio.Event is not thread-safe, so the loop sets it.
        self.progress.stop_requested = True
        loop = getattr(self, "_loop", None)
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._stop.set)

    async def _shutdown(self, ticker: asyncio.Future, warm: asyncio.Future, status: str, error: str | None) -> None:
        for mp in self.progress.models.values():
            mp.in_flight = 0  # cancelled calls are not in flight any more
        for t in list(self._grading):
            t.cancel()
        ticker.cancel()
        warm.cancel()
        try:
            await asyncio.gather(ticker, warm, *self._grading, return_exceptions=True)
        finally:
            # Synchronous, so a second interrupt cannot skip it: save what was generated but
            # not graded (status "scoring": a resume grades it from the output cache), commit,
            # then record the run's status.
            try:
                if self._ungraded:
                    self.writer.add_samples([{**s, "status": "scoring"} for s in self._ungraded.values()])
                    self._ungraded.clear()
                self.writer.close()
            finally:
                self.store.update_run(self.run_id, status=status, error=error)
                self.progress.status = status
                if self.display is not None:
                    self.display.close()
                await self._close_pools()
                await self._close_clients()

    def pool_for(self, task_id: str) -> Any:
        """The sandbox pool for a task's user code: with the network only if the run said so."""
        return self.net_pool if task_id in self.plan.network_tasks else self.pool

    async def _close_pools(self) -> None:
        await self.pool.aclose()
        if self.net_pool is not None:
            await self.net_pool.aclose()

    async def _tick(self) -> None:
        beat = time.monotonic()
        while True:
            await asyncio.sleep(TICK_S)
            if self.display is not None:
                self.display.update()
            if self.progress.stop_requested:
                self._stop.set()
            if time.monotonic() - beat >= HEARTBEAT_S:
                beat = time.monotonic()
                self.store.heartbeat(self.run_id)  # says "still running" to other hosts

    # ---- preparation ----------------------------------------------------------------------
    async def _prepare_tasks(self) -> None:
        from evalnb.runner.bridge import GraderBridge
        from evalnb.scoring.extraction import make_extractor
        from evalnb.scoring.grading import Grader
        from evalnb.suite.items import suite_items

        plan = self.plan
        bridge = self.bridge = GraderBridge(
            judge_model=plan.judge_model,
            embedding_model=plan.embedding_model,
            client_factory=self._bridge_client,
            judge_generation=plan.judge_generation,
            store=self.store,
            writer=self.writer,
            reuse=plan.reuse,
            budget=self.budget if self.budget.limit is not None else None,
            on_call=self._judge_called,
        )
        done = self.store.completed_keys(self.run_id)
        # what each finished sample was asked and graded against: the manifest is the same,
        # but the rows may have been edited since, and then the sample must be done again
        kept = {
            (s["task_id"], s["model"], s["sample_index"], s["epoch"]): _fingerprint(s["prompt"], s["target"], s["dataset_row"])
            for s in self.store.iter_samples(self.run_id, status="completed")
        } if done else {}
        # errors an earlier attempt of this run recorded for a task (e.g. a dataset download
        # that failed); cleared below for every task that starts this time
        stale = {(t["task_id"], t["model"]) for t in self.store.task_metrics(self.run_id) if t["error"]}
        for task_id in plan.task_ids:
            task = plan.suite.task(task_id)
            check = None
            try:
                # ctx.metadata: the task's metadata with the run's on top (the run's wins).
                metadata = {**dict(task.metadata or {}), **plan.metadata}
                pool = self.pool_for(task_id)
                grader = Grader(task.grader, task_id=task_id, pool=pool, bridge=bridge,
                                run_id=self.run_id, metadata=metadata)
                # A grader that does not load fails its task before any call. The check waits
                # for a sandbox worker to start, so it runs while this thread reads the rows.
                check = asyncio.ensure_future(grader.check())
                items = await asyncio.to_thread(suite_items, plan.suite, task_id, plan.max_samples,
                                                preprocess=_preprocessor(pool) if task.preprocess else None)
                await check
            except Exception as exc:  # noqa: BLE001 - a task that cannot start fails alone
                self.task_errors[task_id] = f"{type(exc).__name__}: {exc}"
                for model in plan.models:  # task metrics are keyed by model: one error row each
                    self.store.write_task_metrics(self.run_id, task_id, model.label, None,
                                                  error=self.task_errors[task_id])
                continue
            finally:
                _settle(check)
            for model in plan.models:
                if (task_id, model.label) in stale:
                    self.store.write_task_metrics(self.run_id, task_id, model.label, None, error=None)
            self._warn_missing_fields(task, items)
            per_sample = grader.execution == "per_sample"
            state = TaskState(task, items, grader, make_extractor(task.extraction), per_sample)
            epochs = range(plan.epochs)
            for model in plan.models:
                finished = 0
                for i in items:
                    fingerprint = None
                    for epoch in epochs:
                        key = (task_id, model.label, i.index, epoch)
                        if key not in done:
                            continue
                        fingerprint = fingerprint or _fingerprint(i.prompt, i.target, i.row)
                        if kept.get(key) != fingerprint:
                            done.discard(key)
                        else:
                            finished += 1
                state.remaining[model.label] = len(items) * plan.epochs - finished
                state.held[model.label] = []
                mp = self.progress.model(model.label)
                mp.total += len(items) * plan.epochs
                mp.done += finished
                if mp.metric is None and task.effective_metrics:
                    mp.metric = task.effective_metrics[0].id
            self.tasks[task_id] = state
        self._done_keys = done
        self._paid = self.store.paid_samples(self.run_id)  # calls an earlier attempt made and paid for
        self._make_clients()  # after the rows and graders: the client code loads meanwhile (see preload)

    def _warn_missing_fields(self, task: Any, items: list[Any]) -> None:
        """A template field in none of the task's rows renders as "" in every prompt: say so, loudly.

        On the progress display (terminal and notebook) when there is one, else as a Python
        warning; `RunResult.metrics` counts the prompts (`n_missing_field`) either way.
        """
        import warnings

        from evalnb.errors import MissingFieldWarning
        from evalnb.suite.checks import missing_field_problems

        position = next(i for i, t in enumerate(self.plan.suite.tasks) if t.id == task.id)
        for problem in missing_field_problems(task, position, [item.row for item in items]):
            message = f'{problem}; it renders as "" in all {len(items)} prompts'
            if self.display is not None:
                self.progress.warn(message)
            else:
                warnings.warn(message, MissingFieldWarning, stacklevel=1)

    def _make_clients(self) -> None:
        from evalnb.providers import AdaptiveLimit, ClientPool, ModelClient

        plan = self.plan
        self.http_pool = ClientPool(max_connections=plan.concurrency)
        limits: dict[str, AdaptiveLimit] = {}
        self.clients = {}
        for model in plan.models:
            limit = limits.get(model.base_url)
            if limit is None:
                limit = limits[model.base_url] = AdaptiveLimit(plan.concurrency, maximum=plan.concurrency)
            self.clients[model.label] = ModelClient(
                model, limit=limit, pool=self.http_pool, on_event=self._event_hook(model.label)
            )

    def _bridge_client(self, model: Any, **options: Any) -> Any:
        from evalnb.providers import ModelClient

        return ModelClient(model, pool=self.http_pool, **options)

    def _judge_called(self, label: str | None, call: dict) -> None:
        """A grader's model call finished: count it (and its cost) for the judged model."""
        if self.budget.limit is None:
            self.budget.add(call.get("cost_usd"))
        if label is None:
            return
        mp = self.progress.model(label)
        mp.judge_calls += 1
        if call.get("cached"):
            mp.judge_cached += 1
        mp.cost_usd += call.get("cost_usd") or 0.0

    async def _close_clients(self) -> None:
        pool = getattr(self, "http_pool", None)
        if pool is not None:
            await pool.aclose()

    def _event_hook(self, label: str):
        mp = self.progress.model(label)

        def on_event(kind: str, info: dict) -> None:
            if kind == "rate_limited":
                mp.rate_limited += 1
                mp.rate_limit_wait_s += float(info.get("delay_s") or 0.0)
            elif kind in ("retry", "empty_retry"):
                mp.retries += 1

        return on_event

    # ---- the pipeline ---------------------------------------------------------------------
    async def _run_all(self) -> None:
        from evalnb.store import epoch_request_key, request_key_function

        plan = self.plan
        await self._preloaded  # see _preload_result_libraries
        gen = plan.generation
        keys = {m.label: request_key_function(m.name, m.base_url, m.api, gen) for m in plan.models}
        # (task_id, item, model, request_key, epoch), epoch by epoch: a run stopped early has
        # whole epochs rather than every epoch of a few items
        todo: list[tuple[str, Any, Any, str, int]] = []
        done = self._done_keys
        for epoch in range(plan.epochs):
            for task_id, state in self.tasks.items():
                for item in state.items:
                    for model in plan.models:
                        if (task_id, model.label, item.index, epoch) in done:
                            continue
                        key = keys[model.label](item.prompt)
                        if epoch:
                            key = epoch_request_key(key, epoch)
                        todo.append((task_id, item, model, key, epoch))
        if plan.reuse and todo:
            todo = self._copy_identical_samples(todo)
        if plan.reuse and todo:
            cached = self.store.lookup_outputs([t[3] for t in todo])
        elif self._continuing and todo:  # reuse=False: no other run's answers, but its own ones
            cached = self.store.lookup_outputs([t[3] for t in todo], run_id=self.run_id)
        else:
            cached = {}
        calls: deque[tuple[str, Any, Any, str, int]] = deque()
        for unit in todo:
            hit = cached.get(unit[3])
            if hit is None:
                calls.append(unit)
            else:
                self.progress.model(unit[2].label).reused += 1
                self._finish_generation(unit, hit, reused=True)
        del todo, cached
        self._check_aggregates()  # tasks whose samples were all finished before this run
        dispatcher = asyncio.ensure_future(self._dispatch_grading())
        workers = [asyncio.ensure_future(self._generate(calls)) for _ in range(min(plan.concurrency, max(len(calls), 1)))]
        stopper = asyncio.ensure_future(self._stop.wait())
        gathered = asyncio.gather(*workers)
        try:
            done, _ = await asyncio.wait({gathered, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if stopper in done:
                raise asyncio.CancelledError("stopped from the progress panel")
            gathered.result()
            self._generation_done = True
            self._grade_event.set()
            await dispatcher
            if self._grading:
                await asyncio.gather(*list(self._grading))
        finally:
            stopper.cancel()
            for w in workers:
                w.cancel()
            dispatcher.cancel()
            await asyncio.gather(gathered, dispatcher, stopper, return_exceptions=True)

    def _copy_identical_samples(self, todo: list[tuple[str, Any, Any, str, int]]) -> list[tuple[str, Any, Any, str, int]]:
        """Take whole graded samples from an identical earlier run; return the units left to do.

        Same run signature (suite version, hence grader and extraction; models; generation;
        tasks) and metadata, and per sample the same request, target and row: grading again
        would repeat the same work, so the store copies those samples instead. Batch-graded
        tasks are always graded again (their grader sees all samples at once).
        """
        import json

        from evalnb.store import row_digest

        previous = self.store.previous_identical_run(self.run_id)
        if previous is None:
            return todo
        graded = self.store.graded_samples(previous)
        copy, rest = [], []
        for unit in todo:
            task_id, item, model, key, epoch = unit
            state = self.tasks[task_id]
            old = graded.get((task_id, model.label, item.index, epoch)) if state.per_sample else None
            if old is not None and old[0] == key and old[1] == item.target and old[2] == row_digest(item.row):
                copy.append((unit, old[3]))
            else:
                rest.append(unit)
        if not copy:
            return todo
        self.store.copy_samples(previous, self.run_id, [(u[0], u[2].label, u[1].index, u[4]) for u, _ in copy],
                                now=int(time.time()))
        for (task_id, _item, model, _key, _epoch), scores in copy:
            mp = self.progress.model(model.label)
            mp.done += 1
            mp.reused += 1
            value = (json.loads(scores) if scores else {}).get(mp.metric) if mp.metric else None
            if isinstance(value, (int, float)):
                mp.metric_sum += float(value)
                mp.metric_n += 1
            self.tasks[task_id].remaining[model.label] -= 1
        return rest

    async def _generate(self, calls: deque) -> None:
        from evalnb.errors import ProviderError
        from evalnb.providers.pricing import call_cost, estimate_tokens, worst_case_cost

        gen = self.plan.generation
        budget = self.budget
        limited = budget.limit is not None
        max_out = gen.get("max_output_tokens")
        instructions = estimate_tokens(gen.get("instructions")) if isinstance(gen.get("instructions"), str) else 0
        while calls:
            unit = calls.popleft()
            task_id, item, model, key, epoch = unit
            worst = 0.0
            if limited:
                if model.price is not None:
                    worst = worst_case_cost(estimate_tokens(item.prompt) + instructions, max_out, model.price)
                if not await budget.reserve(worst):
                    calls.appendleft(unit)  # not started: the next attempt of the run does it
                    return
            mp = self.progress.model(model.label)
            mp.in_flight += 1
            cost = None
            try:
                completion = await self.clients[model.label].complete(item.prompt, gen)
                cost = call_cost(completion.usage, model.price)
            except ProviderError as exc:
                mp.in_flight -= 1
                error = {"stage": "generation", "message": str(exc), "status": exc.status}
                self._record(task_id, model.label, self._sample(task_id, item, model, epoch, None), error=error)
                continue
            finally:
                if limited:
                    budget.settle(worst, cost)
                else:
                    budget.add(cost)
            mp.in_flight -= 1
            mp.cost_usd += cost or 0.0
            output = {
                "request_key": key,
                "output_text": completion.text,
                "usage": completion.usage,
                "response_id": completion.response_id,
                "latency_s": completion.latency_s,
                "cost_usd": cost,
            }
            self.writer.put_outputs([output])
            self._finish_generation(unit, output, reused=False)

    def _sample(self, task_id: str, item: Any, model: Any, epoch: int, output: dict | None) -> dict:
        sample = {
            "task_id": task_id,
            "model": model.label,
            "sample_index": item.index,
            "epoch": epoch,
            "prompt": item.prompt,
            "prompt_text": item.question,
            "target": item.target,
            "dataset_row": item.row,
            "output_text": None,
            "extracted_output": None,
            "response_id": None,
            "usage": None,
            "latency_s": None,
            "scores": {},
            "judge": None,
            "error": None,
            "log": None,
            "status": "scoring",
            "cost_usd": None,
            "cached": False,
        }
        if output is not None:
            sample.update(
                output_text=output.get("output_text"),
                response_id=output.get("response_id"),
                usage=output.get("usage"),
                latency_s=output.get("latency_s"),
                request_key=output.get("request_key"),
                cost_usd=output.get("cost_usd"),
            )
        return sample

    def _finish_generation(self, unit: tuple, output: dict, *, reused: bool) -> None:
        task_id, item, model, key, epoch = unit
        state = self.tasks[task_id]
        sample = self._sample(task_id, item, model, epoch, output)
        sample["request_key"] = key
        sample["reused"] = reused
        if reused:  # answered from the store: nothing was paid for it in this run...
            paid = self._paid.get((task_id, model.label, item.index, epoch)) if self._paid else None
            if paid is not None and paid[0] == key:  # ...unless an earlier attempt of the run made the call
                sample["cached"], sample["cost_usd"] = False, paid[1]
            elif output.get("run_id") == self.run_id:  # its answer reached the store, its sample did not
                from evalnb.providers.pricing import call_cost

                sample["cached"], sample["cost_usd"] = False, call_cost(output.get("usage"), model.price)
            else:
                sample["cached"], sample["cost_usd"] = True, 0.0
        try:
            sample["extracted_output"] = state.extractor(sample["output_text"])
        except Exception as exc:  # noqa: BLE001 - extraction never takes the run down
            self._record(task_id, model.label, sample, error={"stage": "extraction", "message": str(exc)})
            return
        usage = sample["usage"] or {}
        mp = self.progress.model(model.label)
        mp.input_tokens += int(usage.get("input_tokens") or 0)
        mp.output_tokens += int(usage.get("output_tokens") or 0)
        if state.per_sample:
            self._ungraded[(task_id, model.label, item.index, epoch)] = sample
            self._grade_queue.append((task_id, model.label, sample))
            self._grade_event.set()
        else:
            self._record(task_id, model.label, sample)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._grading.add(task)
        task.add_done_callback(self._grading.discard)


def _preprocessor(pool: Any) -> Any:
    """The task's preprocessor, run in the run's own pool (closed with the run)."""
    from evalnb.sandbox import preprocess

    def run(task: Any, rows: list[dict]) -> list[dict]:
        return preprocess(task, rows, pool=pool)

    return run


def _settle(task: asyncio.Future | None) -> None:
    """Cancel `task` if it is still running, else mark its outcome as seen (no "never retrieved")."""
    if task is None:
        return
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


def _fingerprint(prompt: Any, target: Any, row: Any) -> str:
    """What a finished sample depends on besides the manifest: its prompt, target and row."""
    import json

    return json.dumps([prompt, target, row], sort_keys=True, default=str)


def _preload_result_libraries(loop: asyncio.AbstractEventLoop) -> asyncio.Future:
    """Import the model-client code, then pandas, in a background thread; done when both are.

    pandas (~0.3 s, for RunResult's frames) loads while the run opens its record, reads its
    rows and waits for a sandbox worker to start, and the run waits for it before the first
    model call. An import running beside the calls instead made a 2,000-call run against a
    local server 60-130 ms slower, with as much more CPU time, even with the calls spaced
    out to a few hundred a second; against a 50 ms server the wait costs ~2% of throughput
    (benchmarks/README.md). In a notebook pandas is usually loaded already: no wait at all.
    """
    import sys

    done = loop.create_future()
    if "pandas" in sys.modules and "evalnb.providers.client" in sys.modules:
        done.set_result(None)
        return done

    def finish() -> None:
        if not done.done():
            done.set_result(None)

    def load() -> None:
        try:
            import evalnb.providers.client  # noqa: F401 - needed first

            # the run's collector settings hold until the import is done, even past a short run
            with fewer_collections(), quiet_import():
                import pandas  # noqa: F401
        except ImportError:  # pragma: no cover - both are dependencies
            pass
        finally:
            try:
                loop.call_soon_threadsafe(finish)
            except RuntimeError:  # the run ended (and closed its loop) first
                pass

    threading.Thread(target=load, name="evalnb-preload", daemon=True).start()
    return done
