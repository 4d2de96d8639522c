"""`RayExecutor`: a run's calls and grading sharded over Ray actors; the store stays here.

The driver (this process: the notebook) plans the run and is the store's only writer. Work
goes out in shards of a few hundred units to long-lived actors (`ray_worker.ShardWorker`: warm
connections, AIMD limits and sandbox workers), at most two shards per actor at a time; each
actor streams finished samples back (a Ray streaming generator) and the driver writes them as
they arrive, so the progress panel, resume and reuse behave as with the local executor.

Faults: if an actor dies, every unit of its shards that had not come back is sent again (Ray
restarts the actor, or another one takes it); samples already stored are never redone. A
shard that kills its worker `max_shard_retries` times fails the run (resume continues it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections import Counter, deque
from typing import Any

from evalnb.aio import in_lifelong_thread
from evalnb.errors import EvalnbError
from evalnb.runner.unit import Unit
from evalnb.runner.run_context import RunContext
from evalnb.sample import Sample

SHARDS_PER_WORKER = 2  # in flight at once per actor: one running while the next waits
LOCAL_START_ATTEMPTS = 3
REVIVE_S = 120.0  # how long a dead actor may take to come back before the run goes on without it


class RayExecutor:
    """Run on Ray: ``evalnb.run(suite, models, executor=evalnb.RayExecutor(num_workers=4))``.

    ``num_workers``: actors to start (default: as many as the cluster's nodes hold, at most 16);
    ``concurrency_per_worker``: calls in flight per worker and endpoint (default: the run's
    ``concurrency``; 1-25 like it), so an endpoint sees up to ``num_workers x`` that many;
    ``resources``: Ray resources for each actor, e.g. ``{"num_cpus": 2}`` or ``{"resources":
    {"vllm_node": 1}}`` (default ``{"num_cpus": 1}``); ``address``: the cluster to connect to
    when Ray is not initialised yet (default: ``RAY_ADDRESS``, else a new local one);
    ``shard_size``: units per shard (default 256). ``executor="ray"`` is ``RayExecutor()``.
    """

    name = "ray"

    def __init__(self, num_workers: int | None = None, *, concurrency_per_worker: int | None = None,
                 resources: dict[str, Any] | None = None, address: str | None = None,
                 shard_size: int = 256, max_shard_retries: int = 3) -> None:
        for what, value, low in (("num_workers", num_workers, 1), ("shard_size", shard_size, 1),
                                 ("max_shard_retries", max_shard_retries, 0)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise ValueError(f"RayExecutor {what} must be an integer >= {low}, got {value!r}")
        if concurrency_per_worker is not None and (
                isinstance(concurrency_per_worker, bool) or not isinstance(concurrency_per_worker, int)
                or not 1 <= concurrency_per_worker <= 25):
            raise ValueError(f"RayExecutor concurrency_per_worker must be an integer from 1 to 25 (per worker and "
                             f"endpoint), got {concurrency_per_worker!r}")
        if resources is not None and not isinstance(resources, dict):
            raise ValueError(f"RayExecutor resources must be a dict of Ray actor options, got {resources!r}")
        self.num_workers = num_workers
        self.concurrency_per_worker = concurrency_per_worker
        self.resources = dict(resources) if resources is not None else None
        self.address = address
        self.shard_size = shard_size
        self.max_shard_retries = max_shard_retries
        self.actors: list[Any] = []  # this run's actors (while it runs)

    def __repr__(self) -> str:
        opts = {k: v for k, v in self.record().items() if k != "type" and v is not None}
        return f"RayExecutor({', '.join(f'{k}={v!r}' for k, v in opts.items())})"

    def record(self) -> dict[str, Any]:
        """The options as JSON (stored with the run; `resume` starts a RayExecutor like it)."""
        return {"type": "ray", "num_workers": self.num_workers, "concurrency_per_worker": self.concurrency_per_worker,
                "resources": self.resources, "address": self.address, "shard_size": self.shard_size}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> RayExecutor:
        return cls(record.get("num_workers"), concurrency_per_worker=record.get("concurrency_per_worker"),
                   resources=record.get("resources"), address=record.get("address"),
                   shard_size=record.get("shard_size") or 256)

    # ---- the run ---------------------------------------------------------------------------
    async def start(self, ctx: RunContext) -> None:
        ray = _import_ray()
        # not asyncio.to_thread: Ray's GCS and raylet die with the thread that started them
        await in_lifelong_thread(self._connect, ray)
        self.ctx = ctx
        self._ray = ray
        plan = ctx.plan
        options = {"num_cpus": 1, **(self.resources or {})}
        concurrency = self.concurrency_per_worker or plan.concurrency
        workers = _workers_that_fit(self.num_workers, options, ray.nodes(), concurrency)
        from evalnb.runner.executors.ray_worker import ShardWorker

        actor_class = ray.remote(ShardWorker)
        config = _worker_config(ctx, concurrency)
        self.actors = [actor_class.options(max_restarts=-1, max_task_retries=0, max_concurrency=64, **options)
                       .remote(config) for _ in range(workers)]
        self._uids = itertools.count()
        self._units: dict[int, Any] = {}  # sent and not back yet
        self._pending: deque[tuple[list[int], int]] = deque()  # (uids, attempts) waiting for an actor
        self._running: dict[asyncio.Task, int] = {}  # shard consumer -> actor index
        self._busy = [0] * workers
        self._wake = asyncio.Event()
        self._reviving: set[asyncio.Task] = set()
        self._error: BaseException | None = None
        self._flying: Counter[str] = Counter()  # model label -> units at the workers
        # a worker that cannot start (evalnb missing on a node, a grader that does not load) fails now
        await asyncio.gather(*(_await_ref(a.ready.remote()) for a in self.actors))

    def _connect(self, ray: Any) -> None:
        import os

        if ray.is_initialized():
            return
        address = self.address or os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        else:  # a local Ray on this machine, started for this session
            for attempt in range(LOCAL_START_ATTEMPTS):
                try:
                    # quiet: the user asked for an evalnb run, not for Ray's start-up notices
                    ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False,
                             logging_level="ERROR")
                    return
                except Exception:  # Ray's own 30 s start-up deadline, missed on a busy machine
                    ray.shutdown()
                    if attempt == LOCAL_START_ATTEMPTS - 1:
                        raise

    async def submit(self, units: list[Unit]) -> None:
        size = self.shard_size
        uids = []
        for unit in units:
            uid = next(self._uids)
            self._units[uid] = unit
            uids.append(uid)
        for start in range(0, len(uids), size):
            self._pending.append((uids[start:start + size], 0))
        self._pump()
        while len(self._pending) > len(self.actors) * SHARDS_PER_WORKER and self._error is None:
            self._check_alive()
            self._wake.clear()
            await self._wake.wait()
        self._raise()

    async def drain(self) -> None:
        while (self._pending or self._running) and self._error is None:
            self._check_alive()
            self._wake.clear()
            await self._wake.wait()
        self._raise()

    def _check_alive(self) -> None:
        if self._pending and not self._running and not self._reviving:
            raise EvalnbError(f"every Ray worker of this run died; {len(self._units)} samples were not done "
                              "(what finished is stored: resume the run)")

    async def close(self) -> None:
        for task in [*getattr(self, "_running", {}), *getattr(self, "_reviving", ())]:
            task.cancel()
        if getattr(self, "_running", None):
            await asyncio.gather(*self._running, return_exceptions=True)
        actors, self.actors = self.actors, []
        if actors:
            await asyncio.to_thread(self._stop_actors, actors)
        for label, n in getattr(self, "_flying", {}).items():  # sent and never back: no longer in flight
            if n:
                self.ctx.calls_ended(label, n)

    def _stop_actors(self, actors: list[Any]) -> None:
        ray = self._ray
        try:
            ray.get([a.close.remote() for a in actors], timeout=10)
        except Exception:  # noqa: BLE001 - a dead or stuck actor is killed below anyway
            pass
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def _in_flight(self, label: str, change: int) -> None:
        """Count a unit of model `label` sent to (+1) or back from (-1) a worker, on the panel."""
        self._flying[label] += change
        if change > 0:
            self.ctx.calls_started(label, change)
        else:
            self.ctx.calls_ended(label, -change)

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    # ---- shards ----------------------------------------------------------------------------
    def _pump(self) -> None:
        """Give pending shards to the least busy actors that have room."""
        while self._pending:
            index = min(range(len(self.actors)), key=self._busy.__getitem__)
            if self._busy[index] >= SHARDS_PER_WORKER:
                return
            uids, attempts = self._pending.popleft()
            uids = [u for u in uids if u in self._units]
            if not uids:
                continue
            self._busy[index] += 1
            for uid in uids:
                self._in_flight(self._units[uid].model.label, +1)
            task = asyncio.ensure_future(self._run_shard(index, uids, attempts))
            self._running[task] = index
            task.add_done_callback(self._shard_done)

    def _shard_done(self, task: asyncio.Task) -> None:
        index = self._running.pop(task, None)
        if index is not None:
            self._busy[index] -= 1
        if not task.cancelled() and task.exception() is not None and self._error is None:
            self._error = task.exception()
        if self._error is None:
            self._pump()
        self._wake.set()

    async def _run_shard(self, index: int, uids: list[int], attempts: int) -> None:
        from evalnb.runner.executors.ray_worker import wire_unit

        ray = self._ray
        wire = [wire_unit(uid, self._units[uid]) for uid in uids]
        try:
            stream = self.actors[index].run_shard.options(num_returns="streaming").remote(wire)
            async for ref in stream:
                self._accept(await ref)
        except ray.exceptions.RayTaskError as exc:  # our own code failed on the worker
            raise EvalnbError(f"a Ray worker failed: {exc}") from None
        except (ray.exceptions.RayError, ConnectionError) as exc:  # the worker died: send the rest again
            left = [u for u in uids if u in self._units]
            for uid in left:
                self._in_flight(self._units[uid].model.label, -1)
            if attempts >= self.max_shard_retries:
                raise EvalnbError(f"Ray workers died {attempts + 1} times running a shard of {len(uids)} samples "
                                  f"({len(left)} left): {type(exc).__name__}: {exc}") from None
            self._pending.appendleft((left, attempts + 1))
            # the actor takes no work until Ray has restarted it (its shards go to the others)
            self._busy[index] += SHARDS_PER_WORKER
            revive = asyncio.ensure_future(self._revive(index))
            self._reviving.add(revive)
            revive.add_done_callback(self._reviving.discard)

    async def _revive(self, index: int) -> None:
        """Wait until Ray has restarted actor `index`, then give it work again."""
        ray = self._ray
        deadline = asyncio.get_running_loop().time() + REVIVE_S
        while True:
            try:
                await self.actors[index].ready.remote()
                break
            except ray.exceptions.RayError:
                if asyncio.get_running_loop().time() > deadline:
                    self._wake.set()
                    return  # it stays out of the run; the other actors carry on
                await asyncio.sleep(0.5)
        self._busy[index] -= SHARDS_PER_WORKER
        self._pump()
        self._wake.set()

    def _accept(self, batch: dict[str, Any]) -> None:
        """Finished samples from a worker: into the store (one hand-over), onto the panel."""
        ctx = self.ctx
        for label, counts in (batch.get("events") or {}).items():
            ctx.count(label, retries=int(counts.get("retries") or 0), rate_limited=int(counts.get("rate_limited") or 0),
                      rate_limit_wait_s=float(counts.get("rate_limit_wait_s") or 0.0))
        finished: list[tuple[Sample, dict | None, bool]] = []
        judge_outputs: list[dict] = []
        for result in batch["results"]:
            unit = self._units.pop(result["uid"], None)
            if unit is None:  # already came back from an earlier attempt
                continue
            label = unit.model.label
            self._in_flight(label, -1)
            if result.get("output") is not None:  # a call the worker made: priced here, at the model's price
                sample = ctx.generated(unit, result["output"])
            elif unit.output is not None:
                sample = ctx.reused(unit)
            else:  # the call failed
                sample = ctx.sample(unit)
                sample.request_key = unit.key
                sample.latency_s = result.get("latency_s")
            for call in result.get("judge_calls") or ():
                ctx.judge_called(label, call)
                if not call.get("cached"):  # the driver's store caches what workers' judges said
                    text = call.get("output_text")
                    judge_outputs.append({"request_key": call["request_key"],
                                          "output_text": text if isinstance(text, str) else "",
                                          "usage": call.get("usage"), "latency_s": call.get("latency_s"),
                                          "reply": call.get("reply")})
            if result.get("judge_calls"):
                sample.judge_calls = result["judge_calls"]
            for name in ("extracted_output", "log", "grader_metadata"):
                if name in result:
                    setattr(sample, name, result[name])
            if "scores" in result:
                sample.scores = result["scores"]
                sample.judge = result.get("judge")
            finished.append((sample, result.get("error"), bool(result.get("graded"))))
        ctx.cache_outputs(judge_outputs)
        ctx.finish(finished)


def _import_ray() -> Any:
    import os
    import sys

    if "ray" not in sys.modules and not os.environ.get("RAY_ADDRESS"):
        # a local Ray started for this run then listens on 127.0.0.1, not on the machine's network
        # address (Ray's own switch; a cluster given by address is not affected)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise EvalnbError("executor='ray' needs Ray: pip install 'evalnb[ray]'") from None
    return ray


def _demand(options: dict[str, Any]) -> dict[str, float]:
    """What one actor asks of a node, in Ray's resource names (CPU, GPU, memory, custom ones)."""
    demand = {"CPU": options.get("num_cpus"), "GPU": options.get("num_gpus"), "memory": options.get("memory"),
              **dict(options.get("resources") or {})}
    return {name: amount for name, amount in demand.items() if amount}


def _workers_that_fit(asked: int | None, options: dict[str, Any], nodes: list[dict[str, Any]],
                      concurrency: int) -> int:
    """The number of actors to start: ``asked``, or as many as the cluster holds (at most 16).

    Ray queues an actor no node can hold, and one more than the cluster holds, without an error
    (its "infeasible" notice is a log line), and the run would wait at 0/N: both fail here,
    with what was asked and what Ray's nodes have.
    """
    demand = _demand(options)
    alive = [dict(node.get("Resources") or {}) for node in nodes if node.get("Alive")]
    fits = [min((int(res.get(name, 0) // amount) for name, amount in demand.items()), default=16) for res in alive]
    have = [{name: res.get(name, 0) for name in demand} for res in alive]
    if not any(fits):
        raise EvalnbError(f"RayExecutor: no node of the Ray cluster can hold one worker: each asks {demand} "
                          f"(resources={options!r}); Ray's nodes have {have}. Ask for less per worker, or add a "
                          "node that has it")
    if asked is None:
        return max(1, min(16, sum(fits)))
    if asked > sum(fits):
        raise EvalnbError(f"RayExecutor: {asked} workers asking {demand} each do not fit the Ray cluster: its nodes "
                          f"have {have}, room for {sum(fits)} such worker(s) at a time (each worker keeps "
                          f"{concurrency} calls in flight per endpoint). Use num_workers<={sum(fits)} or smaller "
                          "resources")
    return asked


async def _await_ref(ref: Any) -> Any:
    return await ref


def _worker_config(ctx: RunContext, concurrency: int) -> dict[str, Any]:
    """What every worker is built from: the run's suite, tasks, settings and models.

    Models travel with their key resolved here (the worker's machine need not have the
    variable); the key goes only into the worker's model clients, never into its sandboxes.
    """
    plan = ctx.plan
    suite = plan.suite

    def with_key(model: Any) -> Any:
        if model is None:
            return None
        return dataclasses.replace(model, api_key=model.resolve_api_key())

    tasks = {}
    for task_id in ctx.task_ids:
        task = ctx.task(task_id)
        tasks[task_id] = {"per_sample": ctx.per_sample(task_id),
                          "metadata": {**dict(task.metadata or {}), **plan.metadata}}
    return {
        "manifest": suite.to_dict(),
        "base_dir": str(suite.base_dir) if suite.base_dir else None,
        "tasks": tasks,
        "models": [with_key(m) for m in plan.models],
        "judge_model": with_key(plan.judge_model),
        "embedding_model": with_key(plan.embedding_model),
        "generation": plan.generation,
        "judge_generation": plan.judge_generation,
        "reuse": plan.reuse,
        "concurrency": concurrency,
        "grader_concurrency": plan.grader_concurrency,
        "network_tasks": sorted(plan.network_tasks),
        "run_id": ctx.run_id,
    }
