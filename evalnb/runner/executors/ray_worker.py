"""What a Ray worker runs: evalnb's own generation, extraction and sandboxed grading, per shard.

One `ShardWorker` lives in each Ray actor for the whole run (an actor, not a task per shard:
its HTTP connections, its AIMD limits and its sandbox workers stay warm from shard to shard).
A shard is a list of compact units (`wire_unit`); `run_shard` yields the finished results in
batches as they are ready, so the driver stores them while the rest of the shard is running.
Nothing here touches the store: the driver is its only writer.

This module does not import Ray; `runner.executors.ray_driver` wraps `ShardWorker` with ``ray.remote``.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

BATCH_WAIT_S = 0.02  # after a result, wait this long for more before grading and sending a batch
GRADE_BATCH = 512


def wire_unit(uid: int, unit: Any) -> tuple:
    """A `runner.executors.base.Unit` as sent to a worker: what generation and grading need, nothing more."""
    item = unit.item
    return (uid, unit.task_id, unit.model.label, unit.epoch, item.index, unit.key, item.prompt, item.target,
            item.row, unit.output, item.continuations, item.contexts)


class ShardWorker:
    """Built from the run's settings (`RayExecutor` sends them once, when the actor starts)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self._ready: asyncio.Future | None = None
        self._events: dict[str, dict[str, float]] = {}

    def pid(self) -> int:
        return os.getpid()

    async def _setup(self) -> None:
        from evalnb.providers import AdaptiveLimit, ClientPool, ModelClient
        from evalnb.runner.bridge import GraderBridge
        from evalnb.sandbox import SandboxPool
        from evalnb.scoring.off_loop import LoopExtractor
        from evalnb.scoring.grading import Grader
        from evalnb.suite import Suite
        from evalnb.suite.task_generation import merged_generation

        cfg = self.config
        concurrency = cfg["concurrency"]
        suite = Suite.from_dict(cfg["manifest"], base_dir=cfg["base_dir"])
        if cfg.get("variants"):  # one task per (task, variant), as the driver planned them
            from evalnb.suite.variants import resolve_variants

            suite = resolve_variants(suite, cfg["variants"]).suite
        self.generation = cfg["generation"]
        self.http_pool = ClientPool(max_connections=concurrency * max(1, len(cfg["models"])))
        self.pool = SandboxPool(cfg["grader_concurrency"])
        network = set(cfg["network_tasks"])
        self.net_pool = SandboxPool(cfg["grader_concurrency"], network=True) if network else None
        limits: dict[str, Any] = {}
        self.clients = {}
        for model in cfg["models"]:
            limit = limits.get(model.base_url)
            if limit is None:  # the run's concurrency, per endpoint, in this worker
                limit = limits[model.base_url] = AdaptiveLimit(concurrency, maximum=concurrency)
            self.clients[model.label] = ModelClient(model, limit=limit, pool=self.http_pool,
                                                    on_event=self._event_hook(model.label))
        # no store here: a worker's judge calls are answered by identical calls of this worker,
        # else made; the driver records them with their samples and caches their replies
        bridge = GraderBridge(judge_model=cfg["judge_model"], embedding_model=cfg["embedding_model"],
                              client_factory=lambda m: ModelClient(m, pool=self.http_pool),
                              judge_generation=cfg["judge_generation"], reuse=cfg["reuse"])
        self.tasks = {}
        self.calls: dict[str, tuple[dict[str, Any], Any]] = {}  # task id -> (generation settings, loglikelihood spec)
        for task_id, info in cfg["tasks"].items():
            task = suite.task(task_id)
            pool = self.net_pool if task_id in network else self.pool
            grader = Grader(task.grader, task_id=task_id, pool=pool, bridge=bridge, run_id=cfg["run_id"],
                            metadata=info["metadata"]) if info["per_sample"] else None
            choices = list(task.choices) if task.choices is not None else None
            self.tasks[task_id] = (LoopExtractor(task.extraction), grader, choices)
            # the run's settings with the task's own on top, as `RunContext` sends them
            self.calls[task_id] = (merged_generation(self.generation, task.generation), task.loglikelihood)

    def _event_hook(self, label: str) -> Any:
        counts = self._events.setdefault(label, {"retries": 0, "rate_limited": 0, "rate_limit_wait_s": 0.0})

        def on_event(kind: str, info: dict) -> None:
            if kind == "rate_limited":
                counts["rate_limited"] += 1
                counts["rate_limit_wait_s"] += float(info.get("delay_s") or 0.0)
            elif kind in ("retry", "empty_retry"):
                counts["retries"] += 1

        return on_event

    async def ready(self) -> bool:
        if self._ready is None:
            self._ready = asyncio.ensure_future(self._setup())
        await asyncio.shield(self._ready)
        return True

    async def run_shard(self, units: list[tuple]) -> Any:
        """Generate, extract and grade a shard; yield lists of results as they finish."""
        await self.ready()
        finished: asyncio.Queue = asyncio.Queue()
        calls = [asyncio.ensure_future(self._generate(u, finished)) for u in units]
        try:
            left = len(units)
            while left:
                batch = [await finished.get()]
                await asyncio.sleep(BATCH_WAIT_S)
                while not finished.empty() and len(batch) < GRADE_BATCH:
                    batch.append(finished.get_nowait())
                left -= len(batch)
                yield await self._grade(batch)
        finally:
            for c in calls:
                c.cancel()

    def take_events(self) -> dict[str, dict[str, float]]:
        """Retry and rate-limit counts since the last call (the driver adds them to its panel)."""
        out = {label: dict(c) for label, c in self._events.items() if any(c.values())}
        for c in self._events.values():
            for k in c:
                c[k] = 0
        return out

    async def _generate(self, unit: tuple, finished: asyncio.Queue) -> None:
        from evalnb.errors import ProviderError

        from evalnb.runner.loglikelihood_call import continuation_pairs, score_continuations

        uid, task_id, label, epoch, index, key, prompt, target, row, output, continuations, contexts = unit
        result: dict[str, Any] = {"uid": uid}
        if output is None:
            started = time.perf_counter()
            generation, spec = self.calls[task_id]
            try:
                if spec is not None:
                    pairs = continuation_pairs(spec, prompt, target, continuations, contexts)
                    completion = await score_continuations(self.clients[label], pairs)
                else:
                    completion = await self.clients[label].complete(prompt, generation)
            except ProviderError as exc:
                result["error"] = {"stage": "generation", "message": str(exc), "status": exc.status,
                                   "retryable": exc.retryable}
                result["latency_s"] = time.perf_counter() - started  # how long the failed call took
                finished.put_nowait((result, unit))
                return
            output = {"request_key": key, "output_text": completion.text, "usage": completion.usage,
                      "response_id": completion.response_id, "latency_s": completion.latency_s}
            result["output"] = output  # sent back: the driver caches it (a cached one it has already)
        result["_output"] = output
        extractor = self.tasks[task_id][0]
        try:
            result["extracted_output"] = await extractor.extract(output.get("output_text"))
        except Exception as exc:  # noqa: BLE001 - extraction never takes the run down
            result["error"] = {"stage": "extraction", "message": str(exc)}
        finished.put_nowait((result, unit))

    async def _grade(self, batch: list[tuple[dict, tuple]]) -> dict[str, Any]:
        from evalnb.sample import Sample
        from evalnb.scoring.grading import make_item

        groups: dict[tuple[str, str], list[tuple[dict, tuple]]] = {}
        for result, unit in batch:
            grader = self.tasks[unit[1]][1]
            if grader is None or "error" in result:
                result["graded"] = grader is not None
                continue
            groups.setdefault((unit[1], unit[2]), []).append((result, unit))
        for (task_id, label), members in groups.items():
            _, grader, choices = self.tasks[task_id]
            samples, items = [], []
            for result, (uid, _t, _l, epoch, index, key, prompt, target, row, _o, _c, _x) in members:
                output = result["_output"]
                sample = Sample(task_id, label, index, epoch, prompt, None, target, row, request_key=key,
                                output_text=output.get("output_text"), response_id=output.get("response_id"),
                                usage=output.get("usage"), extracted_output=result["extracted_output"])
                samples.append(sample)
                items.append(make_item(row, prompt=prompt, target=target, choices=choices, sample_index=index))
            try:
                grades = await grader.grade_samples(samples, items, model=label)
            except Exception as exc:  # noqa: BLE001 - the grader machinery failed for the batch
                message = f"{type(exc).__name__}: {exc}"
                for result, _ in members:
                    result["error"] = {"stage": "grading", "message": message}
                continue
            for (result, _), g in zip(members, grades):
                result["graded"] = True
                if g.log is not None:
                    result["log"] = g.log
                if g.calls:
                    result["judge_calls"] = g.calls
                if g.error:
                    result["error"] = {"stage": "grading", "message": g.error}
                    continue
                result["scores"] = dict(g.scores)
                result["judge"] = g.judge
                if g.metadata is not None:
                    result["grader_metadata"] = g.metadata
        for result, _ in batch:
            result.pop("_output", None)
        return {"results": [r for r, _ in batch], "events": self.take_events()}

    async def close(self) -> bool:
        if self._ready is not None and self._ready.done() and not self._ready.exception():
            await self.pool.aclose()
            if self.net_pool is not None:
                await self.net_pool.aclose()
            await self.http_pool.aclose()
        return True
