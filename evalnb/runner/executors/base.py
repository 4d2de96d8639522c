"""The executor interface: where a run's model calls happen, written against this file alone.

The engine plans the run, owns the store and hands an executor its work a stretch at a time;
the executor gets each unit answered and hands the outcome back through the `RunContext`
it was given. Everything after the reply — pricing, the budget, the output cache,
extraction, grading, the progress panel, storing the `evalnb.sample.Sample` — is the
engine's. Two executors ship: `LocalExecutor` (`runner.executors.local`: this process's event
loop) and `RayExecutor` (`runner.executors.ray_driver`: Ray actors that also extract and grade).

The life of an executor in one run::

    await executor.start(ctx)        # once, after the run is planned; ctx: a RunContext
    await executor.submit(units)     # many times: a list of Unit; may wait (back-pressure)
    await executor.drain()           # no more units: return when every unit is handed back
    await executor.close()           # always, also after an error or a cancel

A `Unit` is one sample to produce. ``unit.output`` set: the output cache answered it already,
hand it back with ``ctx.answered(unit)``. Otherwise it needs a model call:

- make it here, as the local executor does: ``await ctx.call(unit)`` (the run's HTTP
  clients, limits, retries and budget; the outcome is handed back for you);
- or send it elsewhere: ``req = ctx.request(unit)`` is what the engine would send
  (``req.model``, ``req.path`` such as ``"/chat/completions"``, ``req.body`` the JSON body),
  then hand back what came of it: ``ctx.reply(unit, {"output_text": ..., "usage": ...,
  "response_id": ..., "latency_s": ..., "reply": <the raw provider JSON, optional>})`` or
  ``ctx.fail(unit, "message", status=429)``. A reply need not be chat text: the raw
  ``reply`` travels with it (log-likelihood scoring reads it); ``output_text`` may be None.
- or produce the whole sample yourself (the Ray executor extracts and grades on workers):
  ``sample = ctx.generated(unit, output)`` (priced, cached and counted) or
  ``ctx.sample(unit)`` (no output), set its extraction/grading fields, then
  ``ctx.finish([(sample, error_or_None, graded)])``.

The run's counters, through methods only (an executor never writes the engine's state):
``ctx.try_reserve(unit, price)`` / ``ctx.release(held)`` hold a call's worst-case cost
(``ctx.worst_cost(unit, price)``) in the run's budget while it is out; ``ctx.calls_started(label,
n)`` / ``ctx.calls_ended(label, n)`` keep the panel's in-flight count; ``ctx.count(label,
retries=..., rate_limited=...)`` and ``ctx.show(label, text)`` report progress; ``ctx.task_ids``,
``ctx.task(task_id)`` and ``ctx.per_sample(task_id)`` describe the tasks.

Back-pressure: ``submit`` should not return while more than a few thousand units wait on
you, nor while ``ctx.backlog()`` (samples generated and waiting for grading) is large.

State across processes: ``ctx.save_state(key, value)`` keeps JSON for this run and executor
(committed at once); ``ctx.load_state()`` gives it back, also in a resumed run. A provider
batch executor, say, would do::

    class BatchExecutor:
        name = "openai-batch"

        async def start(self, ctx):
            self.ctx, self.units = ctx, {}
            self.batches = ctx.load_state()            # {batch_id: [custom ids]} of an earlier attempt

        async def submit(self, units):
            lines = []
            for unit in units:
                if unit.output is not None:
                    self.ctx.answered(unit)
                    continue
                self.units[unit.id] = unit
                req = self.ctx.request(unit)
                lines.append({"custom_id": unit.id, "method": "POST", "url": "/v1" + req.path, "body": req.body})
            batch_id = await upload_and_create_batch(lines)   # the provider's API
            self.ctx.save_state(batch_id, [line["custom_id"] for line in lines])

        async def drain(self):
            for batch_id in list(self.ctx.load_state()):
                for line in await wait_for_results(batch_id):
                    unit = self.units.pop(line["custom_id"])
                    if line["error"]:
                        self.ctx.fail(unit, line["error"]["message"])
                    else:
                        self.ctx.reply(unit, output_from(line["response"]["body"]))
                self.ctx.save_state(batch_id, None)

        async def close(self):
            pass

(``unit.id`` names the sample, unique within the run: a good custom id. The units of an
earlier attempt come back from the planner on resume, since their samples were never stored;
match them to the saved batch ids by ``unit.id``.)
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from evalnb.runner.run_context import RunContext
from evalnb.runner.unit import ModelRequest, Output, Unit

__all__ = ["Executor", "ModelRequest", "Output", "RunContext", "Unit"]


@runtime_checkable
class Executor(Protocol):
    """Where a run's calls happen (see the module docstring for the whole contract)."""

    name: str  # stored with the run's executor state; "local" and "ray" are taken

    async def start(self, ctx: RunContext) -> None:
        """The run is planned: set up (connect, start workers), keep `ctx` for later calls."""

    async def submit(self, units: list[Unit]) -> None:
        """Take a stretch of units; return when ready for more (bounded look-ahead)."""

    async def drain(self) -> None:
        """No more units will come: return once every unit has been handed back."""

    async def close(self) -> None:
        """Stop whatever is still running (also after an error or a cancel)."""
