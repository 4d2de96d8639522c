"""`Sample`: one model's answer to one item, from the rendered prompt to its scores.

The only record passed between the engine, the executors (`runner.executors.base`), the store's
encoder (a `Sample` is written as one samples row) and the result frames and widgets (their
sample columns are `SAMPLE_FIELDS`). Its fields are grouped by the stage that fills them:
a reader can tell from the type what exists after generation and what only after grading.

Why a slotted dataclass: on the run's hot path (build, fill, encode) it is faster than the
dict it replaced, and a `msgspec.Struct` was not reliably faster in the same sittings
(benchmarks/README.md, "the sample record") while adding a dependency.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["GENERATION_FIELDS", "GRADING_FIELDS", "ITEM_FIELDS", "SAMPLE_FIELDS", "STORE_FIELDS", "STORED_FIELDS",
           "Sample"]


@dataclass(slots=True, eq=False)
class Sample:
    """One (task, model, item, epoch): what was asked, answered and scored.

    ``status`` moves "scoring" (generated, not graded yet) -> "completed" or "failed" (then
    ``error`` says at which stage: generation, extraction or grading).
    """

    # ---- 1. planned: known when the item is rendered, before any model call -----------------
    task_id: str
    model: str  # the model's label in the run
    sample_index: int  # the item's position in the task's rows
    epoch: int  # which ask of the item (0 unless the run has epochs > 1)
    prompt: Any  # exactly what the model was sent (a string, or input items)
    prompt_text: str | None  # the evaluated question without few-shot examples
    target: Any  # the rendered target template
    dataset_row: Any  # the row the templates were rendered from (after preprocessing)
    missing_field: int = 0  # 1: the prompt or target template named a {{field}} the row lacks
    request_key: str | None = None  # names the model call in the output cache
    # ---- 2. generation: the model's reply (or the cache's), or a generation error ------------
    output_text: str | None = None
    response_id: str | None = None
    usage: dict | None = None  # input_tokens, output_tokens, ...
    latency_s: float | None = None
    cost_usd: float | None = None  # this run's cost of the call: 0 when the cache answered
    cached: bool = False  # answered from the store instead of a call in this run
    # ---- 3. extraction: the task's answer extractor over output_text --------------------------
    extracted_output: str | None = None
    # ---- 4. grading: the grader's verdict (a batch grader sets scores after every sample) ------
    scores: dict = field(default_factory=dict)  # metric id -> value
    judge: Any = None  # what a judge said, if the grader used one
    log: str | None = None  # the last few KB the grader printed
    judge_calls: list | None = None  # the grader's model calls (stored in their own table)
    grader_metadata: Any = None  # the grader's free-form per-sample metadata (not stored)
    # ---- 5. outcome ---------------------------------------------------------------------------
    status: str = "scoring"
    error: dict | None = None  # {"stage", "message", ...} for a failed sample

    def get(self, name: str, default: Any = None) -> Any:
        """``sample.get("output_text")``: read a field by name, as from the dict a grader sees."""
        return getattr(self, name, default)

    def as_dict(self) -> dict[str, Any]:
        """The sample as a plain dict (what a grader receives as ``sample``)."""
        return {name: getattr(self, name) for name in _ALL}


_ALL = tuple(f.name for f in fields(Sample))
ITEM_FIELDS = _ALL[:_ALL.index("output_text")]
GENERATION_FIELDS = _ALL[_ALL.index("output_text"):_ALL.index("extracted_output") + 1]
GRADING_FIELDS = _ALL[_ALL.index("scores"):]
# Sample fields with no samples column: the grader's calls have a table of their own.
_NOT_STORED = frozenset({"judge_calls", "grader_metadata"})
STORED_FIELDS = tuple(name for name in _ALL if name not in _NOT_STORED)
# Columns the store keeps itself, also in a read sample: the run, the grader's reuse key, times.
STORE_FIELDS = ("run_id", "grader_key", "created_at", "started_at", "completed_at")
# A stored sample as the store reads it back and the result frames show it, in this order
# (the order the columns always had; fields added later go at the end).
SAMPLE_FIELDS = (
    "run_id", "task_id", "model", "sample_index", "epoch", "status", "prompt", "target", "output_text",
    "extracted_output", "scores", "judge", "error", "latency_s", "usage", "response_id", "dataset_row",
    "request_key", "grader_key", "created_at", "started_at", "completed_at", "prompt_text", "log", "cost_usd", "cached",
    "missing_field",
)
assert set(SAMPLE_FIELDS) == {*STORED_FIELDS, *STORE_FIELDS}, "every stored field is read back, and nothing else"
