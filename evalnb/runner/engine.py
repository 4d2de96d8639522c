"""The run engine: one async pipeline from a plan to samples in the store.

The planner (`runner.item_planner`) decides what each sample needs; the executor
(`runner.executors.base`: this process or Ray) gets the calls made and hands each outcome back
through the run's `RunContext` (`runner.run_context`), which extracts it and gives it to the
grading pipeline (`runner.grading_pipeline`, a component the engine owns): it sends batches
to the sandbox pool while calls are still in flight, and graded samples go to the store's
group-commit writer as they finish. Reuse happens here too: cached outputs skip the model
call, and an identical earlier run's graded samples are copied whole.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalnb._gc import fewer_collections, freeze_at_exit
from evalnb.runner import preload
from evalnb.runner.progress import RunProgress, make_display
from evalnb.runner.grading_pipeline import GradingPipeline
from evalnb.runner.item_planner import Planner
from evalnb.runner.run_plan import RunPlan, model_record

if TYPE_CHECKING:
    from evalnb.results.run_result import RunResult

TICK_S = 0.25  # progress display refresh
HEARTBEAT_S = 15.0  # how often a running run marks its record alive (see Store.claim_run)


@dataclass
class TaskState:
    """One task's grader and per-model bookkeeping within a run; its items come from `source`.

    `source()` walks the task's items again (streamed from the file where `streams_rows` says
    it can be, else from the list loaded once): a run never holds every item of a big task.
    """

    task: Any
    source: Callable[[], Iterator[Any]]
    grader: Any
    extractor: Any  # `scoring.off_loop.LoopExtractor`: extraction that never stalls the loop
    per_sample: bool
    n_items: int = 0
    # per model label: how many samples are still to finish (an aggregate grader starts at 0)
    remaining: dict[str, int] = field(default_factory=dict)


class RunEngine:
    """Runs one plan: opens the run record, prepares tasks, hands the work to the executor.

    Its parts: ``planner`` (what each sample needs), ``executor`` (where calls happen),
    ``context`` (the executor's view of the run), ``grading`` (grading and recording).
    """

    def __init__(self, plan: RunPlan, *, store: Any, progress: bool | str | None, run_id: str | None = None,
                 force: bool = False, reopen: bool = False, retry_failed: bool = False, note: str | None = None):
        from evalnb.runner.fail_fast import FailFast

        self.plan = plan
        self._force = force
        self._reopen = reopen  # a resume of a completed run whose failed samples are sent again
        self._retry_failed = retry_failed  # resend samples that failed for their own reasons too
        self._note = note  # what a resume says it is doing (shown on the progress display)
        self.fail_fast = FailFast()
        self._store = store
        self._progress_mode = progress
        self.run_id = run_id
        self.progress = RunProgress()
        self.tasks: dict[str, TaskState] = {}
        self.task_errors: dict[str, str] = {}
        self._stop = asyncio.Event()
        self.grading: GradingPipeline | None = None
        self.interrupted = False  # cancelled from outside (Ctrl-C, task.cancel()), not by Stop

    # ---- lifecycle ------------------------------------------------------------------------
    async def execute(self) -> "RunResult":
        freeze_at_exit()
        with fewer_collections():  # see _gc.py: ~10% of a fast run's CPU otherwise
            return await self._execute()

    async def _execute(self) -> "RunResult":
        from evalnb.results.run_result import RunResult
        from evalnb.sandbox import SandboxPool
        from evalnb.store import open_store

        plan = self.plan
        self._loop = asyncio.get_running_loop()
        self._preloaded = preload.ready(self._loop)  # see runner.preload
        # The run's own pools: user code of the tasks opted into the network runs apart.
        self.pool = SandboxPool(plan.grader_concurrency)
        self.net_pool = SandboxPool(plan.grader_concurrency, network=True) if plan.network_tasks else None
        # One worker starts now, while the run record is opened and the rows are read (the
        # grader check waits for it); more start when the grading needs them.
        warm = self.pool.warm_soon(1)
        try:
            store = self.store = open_store(self._store, must_exist=False)
            self._open_run()
        except BaseException:
            # close first: a worker still starting is then stopped as soon as it is up
            await self._close_pools()
            await asyncio.gather(warm, return_exceptions=True)
            raise
        from evalnb.runner.budget import Budget

        self.budget = Budget(plan.max_cost_usd, spent=store.run_spend(self.run_id))
        self.progress.budget = self.budget
        self.progress.scrub = store.scrub  # failure reasons quote errors: no key is shown either
        self.display = make_display(self.progress, self._progress_mode, on_stop=self._request_stop)
        self.writer = store.writer(self.run_id)
        self.grading = GradingPipeline(plan=plan, tasks=self.tasks, store=store, run_id=self.run_id,
                                       writer=self.writer, progress=self.progress, fail_fast=self.fail_fast,
                                       warn=self._warn)
        if self._note:
            self.progress.say(self._note)
        self.executor = self._executor_for(plan)
        ticker = asyncio.ensure_future(self._tick())
        status, error = "completed", None
        try:
            await self._prepare_tasks()
            await self._run_all()
            if self.task_errors:
                status = "failed"
                error = "; ".join(f"task {t!r}: {m}" for t, m in self.task_errors.items())
            stops = self._stop_reasons()
            if stops:
                status = "failed"
                error = "; ".join(x for x in (error, stops) if x)
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
        from evalnb.store import sign_run, suite_versions

        plan, store = self.plan, self.store
        suite = plan.suite
        manifest = suite.to_dict()
        store.save_suite(suite.version, manifest)
        # what this run reads, as saved: signed below, so an edited suites row (before or after)
        # does not pass as this run's suite on resume
        digests = {suite.version: store.manifest_digest(manifest)}
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
            store.claim_run(self.run_id, force=self._force, reopen=self._reopen)
        else:
            self.run_id = store.create_run(
                suite.version, concurrency=plan.concurrency, metadata=plan.metadata, status="in_progress", **args
            )
        base_dir = str(suite.base_dir) if suite.base_dir else None
        # the stored run record keeps only model names for the judge and embedding models, and
        # no key variables: resume() rebuilds the models from this
        # a name given now labels the run, also one this run continues
        named = {} if plan.name is None else {"name": plan.name}
        summary = {
            "base_dir": base_dir,
            "models": [model_record(m) for m in plan.models],
            "options": plan.stored_options(),
        }
        if plan.variants is not None:  # the suite as given (what `changes` and a resume read) and the slots
            base = plan.base_suite
            store.save_suite(base.version, base.to_dict())
            digests[base.version] = store.manifest_digest(base.to_dict())
            summary["variants"] = {**plan.variants.record(), "base_version": base.version}
        summary = store.scrub(summary)
        summary["suites"] = {v: digests[v] for v in suite_versions(suite.version, summary)}
        # signed with this user's secret: a resume sends keys only to models this evalnb recorded
        store.update_run(self.run_id, summary=sign_run(self.run_id, suite.version, summary), **named)
        self.progress.run_id = self.run_id

    def _stop_reasons(self) -> str | None:
        """Why the run must not read `completed`: models or tasks stopped early, or not one sample
        succeeded; with the commonest reasons and their counts."""
        ff = self.fail_fast
        stopped = [*ff.stopped_models.values(), *ff.stopped_tasks.values()]
        models = self.progress.models.values()
        succeeded = sum(m.done - m.failed - m.not_run for m in models)
        tried = sum(m.failed + m.not_run for m in models)
        if not stopped and (succeeded or not tried):
            return None
        parts = stopped if stopped else [f"no sample succeeded ({tried} failed or not run)"]
        top = self.progress.top_reasons()
        text = "; ".join(parts) + (f"; top reasons: {top}" if top else "")
        return text + f"; evalnb.resume({self.run_id!r}) sends the failed and not-run samples again"

    def _warn(self, message: str) -> None:
        """Say something the run goes on with: on the progress display, else as a UserWarning."""
        import warnings

        if getattr(self, "display", None) is not None:
            self.progress.warn(message)
        else:
            warnings.warn(self.store.scrub(message), UserWarning, stacklevel=2)

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
        running = list(self.grading.running)
        for t in running:
            t.cancel()
        ticker.cancel()
        warm.cancel()
        try:
            await asyncio.gather(ticker, warm, *running, return_exceptions=True)
        finally:
            # Synchronous, so a second interrupt cannot skip it: save what was generated but
            # not graded (status "scoring": a resume grades it from the output cache), commit,
            # then record the run's status.
            try:
                ungraded = self.grading.take_ungraded()
                if ungraded:
                    for s in ungraded:
                        s.status = "scoring"
                    self.writer.add_samples(ungraded)
                self.writer.close()
            finally:
                self.store.update_run(self.run_id, status=status, error=error)
                self.progress.status = status
                # what no sample's reason says: tasks that could not start, or the error that ended the run
                tasks = "; ".join(f"task {t!r}: {m}" for t, m in self.task_errors.items())
                shown = tasks or (error if status == "failed" and not self.progress.reasons else "")
                self.progress.error = self.progress.scrub(shown or "")
                if self.display is not None:
                    self.display.close()
                await self._close_pools()
                await self._close_clients()

    @staticmethod
    def _executor_for(plan: RunPlan) -> Any:
        from evalnb.runner.executors.registry import make_executor

        return make_executor(plan.executor)

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
        from evalnb.scoring.off_loop import LoopExtractor
        from evalnb.scoring.grading import Grader
        from evalnb.suite.checks import MissingFields

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
        previous = self.store.previous_identical_run(self.run_id) if plan.reuse else None
        self.planner = planner = Planner(plan, self.store, self.run_id, continuing=self._continuing, previous=previous,
                                         retry_failed=self._retry_failed)
        planned: dict[str, dict[str, int]] = {}
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
                per_sample = grader.execution == "per_sample"
                # A grader that does not load fails its task before any call. The check waits
                # for a sandbox worker to start, so it runs while this thread reads the rows.
                check = asyncio.ensure_future(grader.check())
                source = await asyncio.to_thread(_item_source, plan, task_id, pool)
                # the panel's metric per model: the first task's first metric (set below if not yet)
                metric = {m.label: self.progress.model(m.label, task_id).metric or (
                    task.effective_metrics[0].id if task.effective_metrics else None) for m in plan.models}
                missing = MissingFields(task)
                seen = _KeepSmall(source())
                survey = await asyncio.to_thread(planner.survey, task_id, seen, per_sample=per_sample,
                                                 metric=metric, on_rows=missing.add)
                if seen.items is not None:  # a task of up to KEEP_ITEMS items: walk them again from memory
                    source = seen.items.__iter__
                planned[task_id] = {m.label: survey.n_items * plan.epochs for m in plan.models}
                await check
                _check_judge(task, plan, survey.n_items * plan.epochs * len(plan.models))
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
            self._warn_missing_fields(task, missing, survey.n_items)
            planner.copy_kept(self.writer, task_id)
            state = TaskState(task, source, grader, LoopExtractor(task.extraction), per_sample, survey.n_items)
            for model in plan.models:
                label = model.label
                finished = survey.kept[label] + survey.copied[label]
                state.remaining[label] = survey.n_items * plan.epochs - finished
                mp = self.progress.model(label, task_id)
                mp.total += survey.n_items * plan.epochs
                mp.done += finished
                mp.reused += survey.copied[label]
                if mp.metric is None and task.effective_metrics:
                    mp.metric = task.effective_metrics[0].id
                total, n = survey.copied_metric.get(label, (0.0, 0))  # copied samples' scores of mp.metric
                mp.metric_sum += total
                mp.metric_n += n
            self.tasks[task_id] = state
        self.store.set_planned(self.run_id, planned)  # what runs() and n_not_run count against
        self._paid = self.store.paid_samples(self.run_id)  # calls an earlier attempt made and paid for
        self._make_clients()  # after the rows and graders: the client code loads meanwhile (see preload)

    def _warn_missing_fields(self, task: Any, missing: Any, n_items: int) -> None:
        """A template field in none of the task's rows renders as "" in every prompt: say so, loudly.

        On the progress display (terminal and notebook) when there is one, else as a Python
        warning; `RunResult.metrics` counts the prompts (`n_missing_field`) either way.
        """
        import warnings

        from evalnb.errors import MissingFieldWarning

        position = next(i for i, t in enumerate(self.plan.suite.tasks) if t.id == task.id)
        for problem in missing.problems(position):
            message = f'{problem}; it renders as "" in all {n_items} prompts'
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

    def _judge_called(self, label: str | None, call: dict, task_id: str | None = None) -> None:
        """A grader's model call finished: count it (and its cost) for the judged candidate."""
        if self.budget.limit is None:
            self.budget.add(call.get("cost_usd"))
        if label is None:
            return
        mp = self.progress.model(label, task_id)
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

    async def _check_loglikelihood_models(self) -> None:
        """A run with log-likelihood tasks checks every model can score them before any item is
        sent (``api="completions"`` on a server that echoes logprobs): no run of unscored samples."""
        from evalnb.errors import ProviderError

        in_process = ("local", "ray")  # executors whose calls go through evalnb's own clients
        if self.executor.name not in in_process and any(getattr(state.task, "generation", None) is not None
                                                        for state in self.tasks.values()):
            raise ProviderError(f"tasks with their own generation settings run only with the local or Ray "
                                f"executor (not {self.executor.name!r})", status=None, retryable=False)
        if not any(getattr(state.task, "loglikelihood", None) is not None for state in self.tasks.values()):
            return
        if self.executor.name not in (*in_process, "batch"):
            raise ProviderError(f"log-likelihood tasks run only with the local, Ray or batch executor "
                                f"(not {self.executor.name!r})", status=None, retryable=False)
        for label, client in self.clients.items():
            try:
                await client.check_loglikelihoods()
            except ProviderError as exc:
                raise ProviderError(f"log-likelihood tasks cannot run: {exc}", status=exc.status,
                                    retryable=False) from None

    # ---- the pipeline ---------------------------------------------------------------------
    async def _run_all(self) -> None:
        from evalnb.runner.run_context import RunContext

        grading = self.grading
        grading.check_aggregates()  # tasks whose samples were all finished before this run
        await self._check_loglikelihood_models()
        executor = self.executor
        self.context = RunContext(plan=self.plan, run_id=self.run_id, store=self.store, writer=self.writer,
                                  progress=self.progress, budget=self.budget, tasks=self.tasks, grading=grading,
                                  clients=self.clients, paid=self._paid, executor_name=executor.name,
                                  on_judge_call=self._judge_called, fail_fast=self.fail_fast,
                                  hold=self._preloaded)
        dispatcher = asyncio.ensure_future(grading.dispatch())
        await executor.start(self.context)
        producer = asyncio.ensure_future(self._produce(executor))
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            done, _ = await asyncio.wait({producer, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if stopper in done:
                raise asyncio.CancelledError("stopped from the progress panel")
            producer.result()
            await self.context.extractions_done()  # those that needed longer, off the loop
            grading.generation_done()
            await dispatcher
            if grading.running:
                await asyncio.gather(*list(grading.running))
        finally:
            stopper.cancel()
            producer.cancel()
            dispatcher.cancel()
            await asyncio.gather(producer, dispatcher, stopper, return_exceptions=True)
            await executor.close()

    async def _produce(self, executor: Any) -> None:
        """Hand the planner's work to the executor, epoch by epoch (a run stopped early has
        whole epochs rather than every epoch of a few items), then wait for it to finish."""
        planner = self.planner
        for epoch in range(self.plan.epochs):
            for task_id, state in self.tasks.items():
                if not planner.has_work(task_id, epoch):
                    continue
                stretches = planner.work(task_id, epoch, state.source())
                try:
                    while not self.budget.exhausted:  # a spent budget: nothing more starts
                        units = await asyncio.to_thread(next, stretches, None)
                        if units is None:
                            break
                        twins, planner.twins = planner.twins, []
                        for twin in twins:  # answered by an identical request's outcome (`runner.twins`)
                            self.context.hold_twin(twin)
                        if units:
                            await executor.submit(units)
                finally:
                    stretches.close()
        await executor.drain()
        self.context.twins_never_answered()


KEEP_ITEMS = 100_000  # a task with at most this many items keeps them from the survey to the work pass


class _KeepSmall:
    """The survey's walk over a task's items, keeping them while there are at most KEEP_ITEMS.

    The work pass then reuses them instead of reading and rendering every row a second time
    (~13 us an item); a bigger task is streamed again, so memory stays flat at any size.
    """

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items
        self.items: list[Any] | None = []

    def __iter__(self) -> Iterator[Any]:
        for item in self._items:
            kept = self.items
            if kept is not None:
                if len(kept) < KEEP_ITEMS:
                    kept.append(item)
                else:
                    self.items = None
            yield item


def _item_source(plan: RunPlan, task_id: str, pool: Any) -> Callable[[], Iterator[Any]]:
    """How the run walks a task's items: streamed from the file again each time when it can
    be (`streams_rows`), else loaded (and preprocessed) once and kept."""
    from evalnb.suite.items import iter_items, streams_rows

    task = plan.suite.task(task_id)
    preprocess = _preprocessor(pool) if task.preprocess else None
    if streams_rows(task, preprocess):
        return lambda: iter_items(plan.suite, task_id, plan.max_samples)
    items = list(iter_items(plan.suite, task_id, plan.max_samples, preprocess=preprocess))
    return lambda: iter(items)


def _preprocessor(pool: Any) -> Any:
    """The task's preprocessor, run in the run's own pool (closed with the run)."""
    from evalnb.sandbox import preprocess

    def run(task: Any, rows: list[dict]) -> list[dict]:
        return preprocess(task, rows, pool=pool)

    return run


def _check_judge(task: Any, plan: RunPlan, n_samples: int) -> None:
    """A grader that calls ``ctx.responses_create`` fails every sample of a run without a judge
    model: its task fails before any of its candidate calls is made (known up front)."""
    from evalnb.runner.fail_fast import judge_needed

    if plan.judge_model is not None:
        return
    line = judge_needed(task)
    if line is not None:
        raise RuntimeError(
            f"its grader calls ctx.responses_create (grader source line {line}) but the run has no judge_model, so "
            f"every sample would fail; none of its {n_samples} sample(s) was run: pass "
            "judge_model=evalnb.Model(...) to evalnb.run (CLI: --judge-model)")


def _settle(task: asyncio.Future | None) -> None:
    """Cancel `task` if it is still running, else mark its outcome as seen (no "never retrieved")."""
    if task is None:
        return
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()
