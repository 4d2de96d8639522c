"""`Sample`: one model's answer to one item, from the rendered prompt to its scores.

The only record passed between the engine, the executors (`runner.executors.base`), the store's
encoder (a `Sample` is written as one samples row) and the result frames and widgets (their
sample columns are `SAMPLE_FIELDS`). Its fields are grouped by the stage that fills them:
a reader can tell from the type what exists after generation and what only after grading.
Each field says how the store keeps it (`stored`); the store's columns, its copy of a sample
on reuse and what it reads back are built from that, so a field is declared once.

Why a slotted dataclass: on the run's hot path (build, fill, encode) it is faster than the
dict it replaced, and a `msgspec.Struct` was not reliably faster in the same sittings
(benchmarks/README.md, "the sample record") while adding a dependency.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["GENERATION_FIELDS", "GRADING_FIELDS", "ITEM_FIELDS", "SAMPLE_FIELDS", "STORE_FIELDS", "STORED_FIELDS",
           "Sample", "sample_fields", "stored", "stored_kinds"]


def stored(kind: str | None, **options: Any) -> Any:
    """A `Sample` field and how the store keeps it (``kind``; None: not a samples column).

    Kinds: ``key`` (leads every row), ``text``, ``digest`` (a hex key, not redacted), ``json``,
    ``text_ref`` / ``json_ref`` (kept once in the texts table, the row holds its digest),
    ``real``, ``flag`` (0/1, read back as an int), ``bool`` (0/1, read back as a bool). A
    subclass's new field declares its kind the same way and is stored, copied on reuse and
    read back with no other change (`evalnb.store` builds its columns from these).
    """
    return field(metadata={"stored": kind}, **options)


@dataclass(slots=True, eq=False)
class Sample:
    """One (task, model, item, epoch): what was asked, answered and scored.

    ``status`` moves "scoring" (generated, not graded yet) -> "completed" or "failed" (then
    ``error`` says at which stage: generation, extraction or grading).
    """

    # ---- 1. planned: known when the item is rendered, before any model call -----------------
    task_id: str = stored("key")
    model: str = stored("key")  # the model's label in the run
    sample_index: int = stored("key")  # the item's position in the task's rows
    epoch: int = stored("key")  # which ask of the item (0 unless the run has epochs > 1)
    prompt: Any = stored("text_ref")  # exactly what the model was sent (a string, or input items)
    prompt_text: str | None = stored("text_ref")  # the evaluated question without few-shot examples
    target: Any = stored("text")  # the rendered target template
    dataset_row: Any = stored("json_ref")  # the row the templates were rendered from (after preprocessing)
    missing_field: int = stored("flag", default=0)  # 1: the prompt or target template named a {{field}} the row lacks
    request_key: str | None = stored("digest", default=None)  # names the model call in the output cache
    # ---- 2. generation: the model's reply (or the cache's), or a generation error ------------
    output_text: str | None = stored("text", default=None)
    response_id: str | None = stored("text", default=None)
    usage: dict | None = stored("json", default=None)  # input_tokens, output_tokens, ...
    latency_s: float | None = stored("real", default=None)
    cost_usd: float | None = stored("real", default=None)  # this run's cost of the call: 0 when the cache answered
    cached: bool = stored("bool", default=False)  # answered from the store instead of a call in this run
    # ---- 3. extraction: the task's answer extractor over output_text --------------------------
    extracted_output: str | None = stored("text", default=None)
    # ---- 4. grading: the grader's verdict (a batch grader sets scores after every sample) ------
    scores: dict = stored("json", default_factory=dict)  # metric id -> value
    judge: Any = stored("json", default=None)  # what a judge said, if the grader used one
    log: str | None = stored("text", default=None)  # the last few KB the grader printed
    judge_calls: list | None = stored(None, default=None)  # the grader's model calls (their own table)
    grader_metadata: Any = stored(None, default=None)  # the grader's free-form per-sample metadata (not stored)
    # ---- 5. outcome ---------------------------------------------------------------------------
    status: str = stored("key", default="scoring")
    error: dict | None = stored("json", default=None)  # {"stage", "message", ...} for a failed sample

    def get(self, name: str, default: Any = None) -> Any:
        """``sample.get("output_text")``: read a field by name, as from the dict a grader sees."""
        return getattr(self, name, default)

    def as_dict(self) -> dict[str, Any]:
        """The sample as a plain dict (what a grader receives as ``sample``)."""
        return {name: getattr(self, name) for name in _ALL}


def stored_kinds(cls: type = Sample) -> tuple[tuple[str, str], ...]:
    """(field, kind) of the fields of `cls` (`Sample` or a subclass) the samples table keeps, in order.

    Every field must say how it is kept (`stored`): a new one cannot be left out unnoticed.
    """
    out = []
    for f in fields(cls):
        if "stored" not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name}: declare how the store keeps it: "
                            f"{f.name}: ... = evalnb.sample.stored('text' | 'json' | ... | None, default=...)")
        if f.metadata["stored"] is not None:
            out.append((f.name, f.metadata["stored"]))
    return tuple(out)


def sample_fields(cls: type = Sample) -> tuple[str, ...]:
    """A stored sample as the store reads it back and the result frames show it: the run, the
    stored fields of `cls` in its order, then the columns the store keeps itself."""
    return ("run_id", *(name for name, _ in stored_kinds(cls)), *STORE_FIELDS[1:])


_ALL = tuple(f.name for f in fields(Sample))
ITEM_FIELDS = _ALL[:_ALL.index("output_text")]
GENERATION_FIELDS = _ALL[_ALL.index("output_text"):_ALL.index("extracted_output") + 1]
GRADING_FIELDS = _ALL[_ALL.index("scores"):]
STORED_FIELDS = tuple(name for name, _ in stored_kinds(Sample))
# Columns the store keeps itself, also in a read sample: the run, the grader's reuse key, times.
STORE_FIELDS = ("run_id", "grader_key", "created_at", "started_at", "completed_at")
SAMPLE_FIELDS = sample_fields(Sample)
