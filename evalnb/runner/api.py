"""The run: suite x models x tasks x items -> samples in the store -> `RunResult`.

The public entry points: `run` / `arun` (start), `resume` (continue), `runs` / `load_run`
(look back). The pipeline itself is `engine.RunEngine` (generation) and
`grading.GradingPipeline` (grading and recording); nothing here knows SQL, HTTP or the
sandbox's wire format: those are `store`, `providers` and `sandbox`.

Reuse: every successful model output is cached under its request key (model, endpoint,
API, prompt, generation), so re-running after a template edit or a kernel restart sends only
the rows whose request changed, and changing only extraction or the grader re-scores stored
outputs with no model call. A run that died is continued by `resume(run_id)` or by running
the same thing again: its finished samples are kept, the rest are done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from evalnb.aio import run_sync
from evalnb.runner.progress import check_mode
from evalnb.runner.engine import RunEngine
from evalnb.runner.plan import make_plan, rebuild_model

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.suite import Suite
    from evalnb.results.run_result import RunResult


def run(suite: "Suite", models: Sequence[Any] | Any, **options: Any) -> "RunResult":
    """Run `suite` against `models` and return the result; works in scripts and in Jupyter.

    Options: ``generation`` (dict), ``concurrency`` (1-25, default 4), ``task_ids``,
    ``max_samples``, ``epochs`` (1-100, default 1: how many times each item is asked, each
    ask a request of its own), ``judge_model``, ``embedding_model``, ``grader_concurrency``,
    ``metadata``, ``reuse`` (default True: reuse stored outputs), ``progress``
    (True / False / "text"), ``store`` (an `evalnb.store.Store`; default: the evalnb home).
    Interrupting (Ctrl-C, the notebook's interrupt button) keeps every finished sample and
    returns a partial result with status ``cancelled``. The panel's Stop button does the same
    for a run the kernel is not blocked on: ``task = asyncio.ensure_future(evalnb.arun(...))``,
    then ``result = await task`` (a blocked cell only sees the click after it ends).
    """
    return run_sync(arun(suite, models, **options))


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
    progress: bool | str | None = None,
    store: Any = None,
    epochs: int = 1,
) -> "RunResult":
    """The async form of `run`: ``result = await evalnb.arun(suite, models=[...])``."""
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
    )
    return await RunEngine(plan, store=store, progress=progress).execute()


def resume(run_id: str, *, models: Sequence[Any] | None = None, progress: bool | str | None = None,
           store: Any = None, concurrency: int | None = None, judge_model: Any = None,
           embedding_model: Any = None) -> "RunResult":
    """Continue a run that died, failed or was cancelled, under the same run id.

    Finished samples are kept; the rest are done (as many epochs as the run was given).
    Models (and the judge and embedding models) are rebuilt from the stored run, with keys from the environment variables they were given
    (``api_key_env``); pass ``models=`` / ``judge_model=`` / ``embedding_model=`` again if
    they need explicit keys.
    """
    return run_sync(aresume(run_id, models=models, progress=progress, store=store, concurrency=concurrency,
                            judge_model=judge_model, embedding_model=embedding_model))


async def aresume(run_id: str, *, models: Sequence[Any] | None = None, progress: bool | str | None = None,
                  store: Any = None, concurrency: int | None = None, judge_model: Any = None,
                  embedding_model: Any = None) -> "RunResult":
    from evalnb.suite import Suite
    from evalnb.store import Store

    store = store or Store()
    record = store.get_run(run_id)
    if record["status"] == "completed":
        from evalnb.results.run_result import RunResult

        return RunResult(store, run_id)
    manifest = store.get_suite(record["suite_version"])
    meta = record.get("metadata") or {}
    summary = record.get("summary") or {}
    suite = Suite.from_dict(manifest, base_dir=summary.get("base_dir"))
    if models is None:
        models = [rebuild_model(m) for m in summary.get("models") or record["models"]]
    if judge_model is None:
        judge_model = rebuild_model(summary.get("judge_model") or record.get("judge_model"))
    if embedding_model is None:
        embedding_model = rebuild_model(summary.get("embedding_model") or record.get("embedding_model"))
    plan = make_plan(
        suite,
        models,
        generation=record.get("generation") or None,
        concurrency=concurrency or record.get("concurrency") or 4,
        task_ids=record.get("task_ids"),
        max_samples=record.get("max_samples"),
        judge_model=judge_model,
        embedding_model=embedding_model,
        metadata=meta,
        epochs=record.get("epochs") or 1,
    )
    return await RunEngine(plan, store=store, progress=progress, run_id=run_id).execute()


def runs(store: Any = None) -> "pd.DataFrame":
    """Every stored run, newest first, as a DataFrame."""
    from evalnb.store import Store

    return (store or Store()).list_runs()


def load_run(run_id: str, store: Any = None) -> "RunResult":
    """A stored run's `RunResult` (finished or not)."""
    from evalnb.results.run_result import RunResult
    from evalnb.store import Store

    store = store or Store()
    store.get_run(run_id)  # a clear error for an unknown id
    return RunResult(store, run_id)
