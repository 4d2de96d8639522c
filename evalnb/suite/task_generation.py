"""A task's own generation settings (an evalnb extension): lm-eval's ``generation_kwargs``.

lm-eval gives each generation task its own ``until`` (stop sequences) and ``max_gen_toks``;
gsm8k stops at ``"Question:"``, TriviaQA at a newline. A task's ``generation`` block holds
those; the run's ``generation`` fills in every field the task does not set (the task's win).
Aliases fold as in the run's settings (``until`` -> ``stop``, ``max_gen_toks`` ->
``max_output_tokens``); a string ``stop`` becomes a one-item list.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from pydantic_core import InitErrorDetails

from evalnb.suite._validation import ManifestModel, problem, show_value, union_message

__all__ = ["TaskGeneration", "merged_generation"]

_ALIASES = {"max_gen_toks": "max_output_tokens", "until": "stop"}
Stop = Annotated[str | list[str], union_message("a string or a list of strings")]


class TaskGeneration(ManifestModel):
    """The generation fields a task may set for itself; every field is optional."""

    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=-1)] | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    max_gen_toks: Annotated[int, Field(ge=1)] | None = Field(default=None, exclude=True, repr=False)
    stop: Stop | None = None
    until: Stop | None = Field(default=None, exclude=True, repr=False)
    do_sample: bool | None = None
    instructions: str | None = None  # the system text (a prompt variant's ``instructions``)

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        fill = {key: [data[key]] for key in ("stop", "until") if isinstance(data.get(key), str)}
        return {**data, **fill} if fill else data

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        problems = []
        for alias, field in _ALIASES.items():
            given, canonical = data.get(alias), data.get(field)
            if given is not None and canonical is not None and given != canonical:
                msg = (f"alias of {field}, which is also given with a different value "
                       f"({show_value(given)} vs {show_value(canonical)}); give one of them")
                problems.append(problem((alias,), "conflict", msg, given))
        return problems

    @classmethod
    def _fold_aliases(cls, data: dict[str, Any]) -> dict[str, Any]:
        if not _ALIASES.keys() & data.keys():
            return data
        data = dict(data)
        for alias, field in _ALIASES.items():
            value = data.pop(alias, None)
            if value is not None and data.get(field) is None:
                data[field] = value
        return data

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def merged_generation(run: dict[str, Any], task: TaskGeneration | None) -> dict[str, Any]:
    """The settings a task's calls are sent with: the run's, with the task's own on top."""
    if task is None:
        return run
    own = task.canonical()
    return {**run, **own} if own else run
