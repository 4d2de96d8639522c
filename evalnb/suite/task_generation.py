"""A task's own generation settings (an evalnb extension): lm-eval's ``generation_kwargs``.

lm-eval gives each generation task its own ``until`` (stop sequences) and ``max_gen_toks``;
gsm8k stops at ``"Question:"``, TriviaQA at a newline. A task's ``generation`` block holds
those; the run's ``generation`` fills in every field the task does not set (the task's win).
Aliases fold as in the run's settings (``until`` -> ``stop``, ``max_gen_toks`` ->
``max_output_tokens``); a string ``stop`` becomes a one-item list.

Three layers, in this order of precedence: the task's own fields, then the run's
``generation``, then the task's ``defaults`` (what lm-eval's ``local-completions`` sends when
neither says: greedy ``temperature`` 0, ``max_output_tokens`` 256, ``seed`` 1234), which fill
only what neither sets. `generation_sources` says where each sent value came from.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from pydantic_core import InitErrorDetails

from evalnb.suite._validation import ManifestModel, problem, show_value, union_message

__all__ = ["GenerationDefaults", "TaskGeneration", "generation_sources", "merged_generation"]

_ALIASES = {"max_gen_toks": "max_output_tokens", "until": "stop"}
Stop = Annotated[str | list[str], union_message("a string or a list of strings")]


class GenerationDefaults(ManifestModel):
    """Values used only when neither the task nor the run sets the field (lm-eval's defaults)."""

    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    seed: int | None = None  # sent as ``extra_body.seed`` (lm-eval sends ``seed: 1234``)

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


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
    defaults: GenerationDefaults | None = None

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
        """The task's own fields (its ``defaults`` are not among them)."""
        return self.model_dump(mode="json", exclude_none=True, exclude={"defaults"})


def merged_generation(run: dict[str, Any], task: TaskGeneration | None) -> dict[str, Any]:
    """The settings a task's calls are sent with: the task's own, then the run's, then the
    task's defaults for what neither sets."""
    if task is None:
        return run
    own = task.canonical()
    fill = _defaults(run, task)
    return {**fill, **run, **own} if own or fill else run


def generation_sources(run: dict[str, Any], task: TaskGeneration | None) -> dict[str, str]:
    """Each merged field -> where its value came from: ``task``, ``run`` or ``default``."""
    own = task.canonical() if task is not None else {}
    return {key: "task" if key in own else "run" if key in run else "default"
            for key in merged_generation(run, task)}


def _defaults(run: dict[str, Any], task: TaskGeneration) -> dict[str, Any]:
    """The defaults neither the task nor the run sets (``seed`` goes in ``extra_body``)."""
    if task.defaults is None:
        return {}
    own = task.canonical()
    out = {k: v for k, v in task.defaults.canonical().items() if k != "seed" and k not in own and k not in run}
    seed = task.defaults.seed
    if seed is not None and "extra_body" not in run:
        out["extra_body"] = {"seed": seed}
    return out
