"""The run: suite x models x tasks x items -> samples in the store -> `RunResult`.

The public entry points: `run` / `arun` (start), `resume` (continue), `runs` / `load_run`
(look back). The pipeline itself is `engine.RunEngine` (planning, executors) and
`grading_pipeline.GradingPipeline` (grading and recording); nothing here knows SQL, HTTP or the
sandbox's wire format: those are `store`, `providers` and `sandbox`.

Reuse: every successful model output is cached under its request key (model, endpoint,
API, prompt, generation), so re-running after a template edit or a kernel restart sends only
the rows whose request changed, and changing only extraction or the grader re-scores stored
outputs with no model call. A run that died is continued by `resume(run_id)` or by running
the same thing again: its finished samples are kept, the rest are done.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

from evalnb.aio import run_sync
from evalnb.runner import preload
from evalnb.runner.progress import check_mode
from evalnb.runner.engine import RunEngine
from evalnb.runner.run_plan import make_plan, rebuild_model

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.suite import Suite
    from evalnb.results.run_result import RunResult


def run(
    suite: "Suite",
    models: Sequence[Any] | Any,
    *,
    generation: Any = None,
    concurrency: int = 4,
    task_ids: Sequence[str] | None = None,
    max_samples: int | None = None,
    judge_model: Any = None,
    embedding_model: Any = None,
    grader_concurrency: int | None = None,
    metadata: dict[str, Any] | None = None,
    reuse: bool = True,
    allow_network: bool | Sequence[str] = False,
    progress: bool | str | None = None,
    store: Any = None,
    epochs: int = 1,
    name: str | None = None,
    executor: Any = "local",
    judge_generation: Any = None,
    max_cost_usd: float | None = None,
    variants: dict[str, Any] | None = None,
) -> "RunResult":
    """Run `suite` against `models` (`evalnb.Model`s) and return the result; works in scripts and in Jupyter.

    Options: ``generation`` (dict), ``concurrency`` (1-25, default 4), ``task_ids``,
    ``max_samples``, ``epochs`` (1-100, default 1: how many times each item is asked, each
    ask a request of its own), ``judge_model``, ``embedding_model``, ``judge_generation``
    (defaults of graders' ``ctx.responses_create`` calls, e.g. ``{"temperature": 0}``; a
    grader's own kwargs win), ``max_cost_usd`` (a budget for the whole run: no call starts
    that could take the spend past it; the run then ends ``stopped``), ``grader_concurrency``,
    ``metadata``, ``reuse`` (default True: reuse stored outputs), ``allow_network`` (True or
    task ids whose graders and preprocessors may use the network; default: none may),
    ``progress`` (True / False / "text"), ``store`` (an `evalnb.store.Store`; default: the
    evalnb home), ``name`` (a label shown by `evalnb.runs()` and ``evalnb runs``, e.g. "v2:
    neutral defined"), ``executor`` (``"local"``, the default: this process makes the calls;
    ``"ray"`` or ``evalnb.RayExecutor(num_workers=..., concurrency_per_worker=...,
    resources=...)``: Ray workers make the calls and grade, this process plans the run and
    writes the store; ``concurrency`` is then per worker), ``variants`` (prompt variants run side
    by side: ``{"plain": {}, "defined": {"prompt_template": "..."}}``, each a dict of task fields
    to override — ``prompt_template``, ``target_template``, ``description``, ``fewshot``,
    ``output_extraction``, ``generation``, ``instructions`` — for every task, or
    ``{"tasks": {task_id: {...}}}`` for some; every model runs under every variant, and
    ``samples``/``metrics`` gain a ``variant`` column; see docs/variants.md). All but ``progress``, ``store`` and
    ``name`` are stored with the run; `resume` uses them (the name is stored as the run's name).
    Interrupting (Ctrl-C, the notebook's interrupt button) saves every finished sample, marks
    the run ``cancelled`` and then raises KeyboardInterrupt (its message and ``.run_id`` name
    the run), so a script that loops over runs stops at the first Ctrl-C;
    ``evalnb.load_run("latest")`` gives the partial result and ``evalnb.resume(run_id)``
    continues it. The panel's Stop button instead returns the partial result (status
    ``cancelled``) for a run the kernel is not blocked on:
    ``task = asyncio.ensure_future(evalnb.arun(...))``, then ``result = await task`` (a
    blocked cell only sees the click after it ends).
    """
    preload.start()  # pandas loads while the run is checked and set up (see runner.preload)
    return _raise_if_interrupted(run_sync(arun(
        suite, models, generation=generation, concurrency=concurrency, task_ids=task_ids, max_samples=max_samples,
        judge_model=judge_model, embedding_model=embedding_model, grader_concurrency=grader_concurrency,
        metadata=metadata, reuse=reuse, allow_network=allow_network, progress=progress, store=store, epochs=epochs,
        name=name, executor=executor, judge_generation=judge_generation, max_cost_usd=max_cost_usd,
        variants=variants,
    )))


def _raise_if_interrupted(result: "RunResult") -> "RunResult":
    """A run that Ctrl-C (or the kernel's interrupt) stopped is saved; now stop the caller too."""
    if not getattr(result, "interrupted", False):
        return result
    counts = result.run.get("counts") or {}
    run_id = result.run_id
    # A plain KeyboardInterrupt (a subclass would make an uncaught one exit 1, not as interrupted)
    stop = KeyboardInterrupt(
        f"run {run_id} interrupted: {int(counts.get('total') or 0)} finished sample(s) saved (status "
        f"cancelled); resume with `evalnb.resume({run_id!r})` (or run the same thing again); the partial "
        'result is `evalnb.load_run("latest")`'
    )
    stop.run_id = run_id  # type: ignore[attr-defined]
    raise stop


async def arun(
    suite: "Suite",
    models: Sequence[Any] | Any,
    *,
    generation: Any = None,
    concurrency: int = 4,
    task_ids: Sequence[str] | None = None,
    max_samples: int | None = None,
    judge_model: Any = None,
    embedding_model: Any = None,
    grader_concurrency: int | None = None,
    metadata: dict[str, Any] | None = None,
    reuse: bool = True,
    allow_network: bool | Sequence[str] = False,
    progress: bool | str | None = None,
    store: Any = None,
    epochs: int = 1,
    name: str | None = None,
    executor: Any = "local",
    judge_generation: Any = None,
    max_cost_usd: float | None = None,
    variants: dict[str, Any] | None = None,
) -> "RunResult":
    """The async form of `run`: ``result = await evalnb.arun(suite, models=[...])``.

    Cancelling the task that awaits it (``task.cancel()``, the panel's Stop button, the
    kernel's interrupt while the cell awaits it) saves every finished sample and *returns* the
    partial result with status ``cancelled`` rather than raising CancelledError: a notebook
    awaiting it keeps the result. `run` is the one that raises on Ctrl-C.
    """
    preload.start()
    check_mode(progress)
    plan = make_plan(
        suite,
        models,
        generation=generation,
        concurrency=concurrency,
        task_ids=task_ids,
        max_samples=max_samples,
        judge_model=judge_model,
        embedding_model=embedding_model,
        grader_concurrency=grader_concurrency,
        metadata=metadata,
        reuse=reuse,
        epochs=epochs,
        allow_network=allow_network,
        name=name,
        executor=executor,
        judge_generation=judge_generation,
        max_cost_usd=max_cost_usd,
        variants=variants,
    )
    check_keys(plan)
    await check_suite_first(plan)
    return await RunEngine(plan, store=store, progress=progress).execute()


_KEEP = object()  # resume(max_cost_usd=...) not given: the run's own budget


def resume(run_id: str, *, models: Sequence[Any] | None = None, progress: bool | str | None = None,
           store: Any = None, concurrency: int | None = None, judge_model: Any = None,
           embedding_model: Any = None, force: bool = False, executor: Any = None,
           max_cost_usd: Any = _KEEP, retry_failed: bool = False, trust_stored_models: bool = False,
           allow_paths_outside: bool = False) -> "RunResult":
    """Continue a run that died, failed, was cancelled or was stopped by its budget, under the same run id.

    Completed samples are kept. Samples that failed for the transport's or the provider's
    reasons (connection errors, timeouts, 5xx, 408/409/429, 401/403/404) and samples not run
    (a stopped model or task) are sent again, also for a run that ended ``completed``, and the
    progress display says how many; samples that failed for their own reasons (a 400 for that
    prompt, an extraction or grader error) stay failed unless ``retry_failed=True``. The rest
    (never reached: a cancelled or budget-stopped run) are done with the run's own stored options
    (generation, ``epochs``, ``reuse``, ``grader_concurrency``, ``allow_network``,
    ``judge_generation``, ``max_cost_usd``, ...). ``max_cost_usd=Y`` gives the run a new budget
    (for the whole run: what it spent before counts; None removes it). Models (and the
    judge and embedding models) are rebuilt from the stored run, with keys from the
    environment variables they were given (``api_key_env``); pass ``models=`` /
    ``judge_model=`` / ``embedding_model=`` again if they need explicit keys.

    A run another process still owns is refused. Its owner on this machine is checked by
    pid; on another host (a re-created container gets a new host name) it counts as gone
    once its heartbeat is two minutes old, or at once with ``force=True``.

    ``executor`` continues on another executor than the run's own (e.g. ``"local"`` for a run
    started on Ray whose cluster is gone); the stored one is used otherwise.

    ``store``: a `Store` or the path of a ``.sqlite`` file. A store is data, not authority: only
    runs your own evalnb recorded (signed with your secret, `evalnb.store.trust_key_path`) are
    resumed with their stored models. For any other run (a colleague's store, an edited record)
    the stored endpoints and key variables are shown and refused unless you pass ``models=``
    (and ``judge_model=`` / ``embedding_model=`` where it had them) or ``trust_stored_models=True``;
    its suite's local paths must stay in the store's folder unless ``allow_paths_outside=True``.
    """
    preload.start()
    return _raise_if_interrupted(run_sync(aresume(run_id, models=models, progress=progress, store=store,
                                                  concurrency=concurrency, judge_model=judge_model,
                                                  embedding_model=embedding_model, force=force,
                                                  executor=executor, max_cost_usd=max_cost_usd,
                                                  retry_failed=retry_failed, trust_stored_models=trust_stored_models,
                                                  allow_paths_outside=allow_paths_outside)))


async def aresume(run_id: str, *, models: Sequence[Any] | None = None, progress: bool | str | None = None,
                  store: Any = None, concurrency: int | None = None, judge_model: Any = None,
                  embedding_model: Any = None, force: bool = False, executor: Any = None,
                  max_cost_usd: Any = _KEEP, retry_failed: bool = False, trust_stored_models: bool = False,
                  allow_paths_outside: bool = False) -> "RunResult":
    from evalnb.runner.stored_run import stored_models, stored_suite
    from evalnb.store import foreign_run, foreign_suite, open_store

    check_mode(progress)
    store = open_store(store)
    record = store.get_run(run_id)
    again, kept = _failures_to_resend(store, run_id, retry_failed)
    note = _resume_note(run_id, again, kept, retry_failed)
    if record["status"] == "completed" and not again:
        from evalnb.results.run_result import RunResult

        if progress is not False and progress != "none":
            import sys

            print(f"evalnb: {note}", file=sys.stderr)
        return RunResult(store, run_id)
    store.check_writable()  # before anything is sent: a resume writes
    foreign = foreign_run(record)
    options = stored_options(record)
    models = stored_models(record, options, foreign=foreign, models=models, judge_model=judge_model,
                           embedding_model=embedding_model, trust_stored_models=trust_stored_models,
                           executor=executor)
    suite = stored_suite(store, record, foreign=foreign or foreign_suite(record, store.suite_digest),
                         allow_paths_outside=allow_paths_outside)
    if judge_model is not None:
        options["judge_model"] = judge_model
    if embedding_model is not None:
        options["embedding_model"] = embedding_model
    if concurrency is not None:
        options["concurrency"] = concurrency
    if executor is not None:
        options["executor"] = executor
    if max_cost_usd is not _KEEP:
        options["max_cost_usd"] = max_cost_usd
    plan = make_plan(suite, models, **options)
    check_keys(plan)
    return await RunEngine(plan, store=store, progress=progress, run_id=run_id, force=force,
                           reopen=record["status"] == "completed", retry_failed=retry_failed,
                           note=note).execute()


def _failures_to_resend(store: Any, run_id: str, retry_failed: bool) -> tuple[Counter, int]:
    """The run's failed and not-run samples a resume sends again (by kind) and how many it keeps."""
    from evalnb.runner.fail_fast import failure_kind, resendable

    again: Counter = Counter()
    kept = 0
    for *_, error in store.failed_errors(run_id):
        if retry_failed or resendable(error):
            error = error if isinstance(error, dict) else {}
            if error.get("stage") == "not_run":
                kind = "not run"
            elif error.get("stage") == "generation":
                kind = failure_kind(error.get("status"), str(error.get("message") or "")) or (
                    f"HTTP {error['status']}" if error.get("status") else "failed")
            else:
                kind = f"{error.get('stage') or 'failed'} error"
            again[kind] += 1
        else:
            kept += 1
    return again, kept


def _resume_note(run_id: str, again: Counter, kept: int, retry_failed: bool) -> str:
    """What a resume says it does with the failed samples (shown on the progress display)."""
    if again:
        kinds = ", ".join(f"{n} {kind}" for kind, n in again.most_common())
        text = f"resume {run_id}: sending again {sum(again.values())} sample(s) that failed or were not run ({kinds})"
    else:
        text = f"resume {run_id}: no failed or not-run sample to send again"
    if kept and not retry_failed:
        text += (f"; keeping {kept} that failed for their own reasons (a 400 for that prompt, an extraction or "
                 "grader error): retry_failed=True (--retry-failed) sends them too")
    return text


def check_keys(plan: Any) -> None:
    """Refuse to start, before any call, when a model's key variable is unset (as the CLI does):
    every call would fail with a 401, one per sample."""
    from evalnb.errors import MissingKeyError
    from evalnb.runner.fail_fast import missing_keys

    problem = missing_keys([*plan.models, plan.judge_model, plan.embedding_model])
    if problem:
        raise MissingKeyError(f"{problem}; set it, or give the model its key with api_key=")


CHECK_ROWS = 1000  # rows of a file dataset a run checks before it starts (the rest stream in as it runs)


async def check_suite_first(plan: Any) -> None:
    """Start nothing that `Suite.validate()` rejects: the same checks, on the tasks the run runs
    (at most `CHECK_ROWS` rows of each dataset), raising every problem at once before any model
    call, request or store write. A template field in no row stays the run's warning."""
    from evalnb.suite.checks import acheck_suite, refusal

    error = refusal(await acheck_suite(plan.suite, task_ids=set(plan.task_ids), rows=CHECK_ROWS))
    if error is not None:
        raise error


def stored_options(record: dict[str, Any]) -> dict[str, Any]:
    """The `make_plan` options a stored run was started with (older runs: what their record has)."""
    summary = record.get("summary") or {}
    options = dict(summary.get("options") or {})
    if not options:  # a run recorded before the options were stored
        options = {
            "generation": record.get("generation") or None,
            "concurrency": record.get("concurrency") or 4,
            "task_ids": record.get("task_ids"),
            "max_samples": record.get("max_samples"),
            "metadata": record.get("metadata") or {},
            "judge_model": summary.get("judge_model") or record.get("judge_model"),
            "embedding_model": summary.get("embedding_model") or record.get("embedding_model"),
            "epochs": record.get("epochs") or 1,
        }
    for role in ("judge_model", "embedding_model"):
        options[role] = rebuild_model(options.get(role))
    return options


def cancel(run_id: str, *, store: Any = None) -> list[dict[str, Any]]:
    """Cancel the provider batches of a batch run (``executor="batch"``) that are still running.

    Only on request: an interrupted run leaves its batches running, to be picked up by
    `resume`. Returns each batch the run had, ``{"id", "model", "status"}`` (``cancelling``
    for those just asked to stop, else the status it ended with). A run still waiting on them
    fails the requests the provider had not answered ("cancelled"); a later `resume` keeps what
    was answered and sends the rest again. Models' keys come from the environment variables they were stored with.
    """
    return run_sync(acancel(run_id, store=store))


async def acancel(run_id: str, *, store: Any = None) -> list[dict[str, Any]]:
    """The async form of `cancel`."""
    from evalnb.errors import ProviderError
    from evalnb.providers.batch_api import TERMINAL, BatchAPI
    from evalnb.runner.executors.batch import save_batch, stored_batches
    from evalnb.runner.stored_run import stored_models
    from evalnb.store import foreign_run, open_store

    store = open_store(store)
    record = store.get_run(run_id)
    summary = record.get("summary") or {}
    if foreign_run(record):  # a batch's cancel sends the model's key: only to models this evalnb recorded
        stored_models(record, {}, foreign=True, models=None, judge_model=None, embedding_model=None,
                      trust_stored_models=False)
    models = {m.label: m for m in (rebuild_model(x) for x in summary.get("models") or record["models"])}
    out = []
    batches = stored_batches(store, run_id)
    for batch in batches:
        status = batch.get("status")
        model = models.get(batch.get("model"))
        if model is not None and not batch.get("done") and status not in TERMINAL:
            async with BatchAPI(model) as api:
                try:
                    status = (await api.cancel(batch["id"])).get("status", status)
                except ProviderError as exc:
                    if exc.status != 409:  # 409: it finished meanwhile
                        raise
                    status = (await api.retrieve(batch["id"])).get("status", status)
            batch["cancel_requested"] = True  # a resume collects what it answered and sends the rest again
            save_batch(store, run_id, batch)
        out.append({"id": batch["id"], "model": batch.get("model"), "status": status})
    return out


def runs(store: Any = None) -> "pd.DataFrame":
    """Every stored run, newest first, as a DataFrame (run_id, name, suite_version, status, ...).
    ``store``: a `Store` or the path of a ``.sqlite`` file (reading sends nothing anywhere)."""
    from evalnb.store import open_store

    return open_store(store).list_runs()


def load_run(run_id: str, store: Any = None) -> "RunResult":
    """A stored run's `RunResult` (finished or not); ``"latest"`` is the newest run. ``store``: a
    `Store` or the path of a ``.sqlite`` file (reading sends nothing anywhere)."""
    from evalnb.results.run_result import RunResult
    from evalnb.store import UnknownRunError, open_store

    store = open_store(store)
    if run_id == "latest":
        latest = store.latest_run_id()
        if latest is None:
            raise UnknownRunError(f"no runs in {store.path} yet, so there is no 'latest' run")
        run_id = latest
    store.get_run(run_id)  # a clear error for an unknown id
    return RunResult(store, run_id)
