"""Prompt variants: named sets of task-field overrides, resolved into tasks before a run starts.

``evalnb.run(suite, models, variants={"plain": {}, "defined": {"prompt_template": "..."}})``
runs every model under every variant. A variant is resolved here, at planning time, into one
ordinary task per (task, variant) — a *slot*, whose id is ``"<task id>@<variant>"`` (``@`` is
not allowed in a task id, so a slot id never clashes with one). The runner, its executors and
the store see only tasks: a unit of work carries its slot's task like any other, and the result
splits the slot back into ``task_id`` and ``variant`` columns.

A variant's overrides are task fields (``VARIANT_FIELDS``), applied to every task, or
``{"tasks": {task_id: {...}}}`` for some tasks only (both may be given; a task's own win).
``instructions`` is a shorthand for ``generation.instructions`` (the system text). Every
problem — an unknown field or task, an invalid value — is one `ManifestError` naming the
variant and the field, raised before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalnb.errors import ManifestError

if TYPE_CHECKING:
    from evalnb.suite import Suite

__all__ = ["VARIANT_FIELDS", "SLOT_SEPARATOR", "Variants", "resolve_variants", "split_slot"]

VARIANT_FIELDS = ("prompt_template", "target_template", "description", "fewshot", "num_fewshot",
                  "output_extraction", "generation", "instructions")
SLOT_SEPARATOR = "@"
MAX_VARIANTS = 20
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


@dataclass(frozen=True)
class Variants:
    """A run's variants, resolved: the run's suite (one task per slot) and where each slot came from."""

    names: list[str]  # in the order given
    overrides: dict[str, dict[str, Any]]  # name -> the overrides as given (JSON), what a resume runs again
    suite: Any  # the expanded Suite the runner sees (slot ids)
    slots: dict[str, tuple[str, str]] = field(default_factory=dict)  # slot id -> (task id, variant)

    def slot_ids(self, task_ids: list[str]) -> list[str]:
        """The slots of some tasks, task by task, variants in order."""
        return [slot_id(t, v) for t in task_ids for v in self.names]

    def record(self) -> dict[str, Any]:
        """What the stored run keeps (the result reads its slots from it)."""
        return {"names": list(self.names), "overrides": self.overrides,
                "slots": {s: list(tv) for s, tv in self.slots.items()}}


def slot_id(task_id: str, variant: str) -> str:
    return f"{task_id}{SLOT_SEPARATOR}{variant}"


def candidate_label(model: str, variant: str) -> str:
    """How a (model, variant) candidate is named to a reader: progress, plots, side-by-side views."""
    return f"{model} · {variant}" if variant else str(model)


def split_slot(task_id: str) -> tuple[str, str]:
    """``"reviews@defined"`` -> ``("reviews", "defined")``; a plain task id -> ``(id, "")``."""
    task, sep, variant = str(task_id).rpartition(SLOT_SEPARATOR)
    return (task, variant) if sep else (str(task_id), "")


def resolve_variants(suite: "Suite", variants: Any) -> Variants | None:
    """Check `variants` and build the run's suite (None when there are none); ManifestError lists every problem."""
    if variants is None:
        return None
    if not isinstance(variants, Mapping):
        raise ManifestError([{"loc": "variants", "msg": "must be a dict of variant name -> task-field overrides "
                              f"(found {type(variants).__name__})", "type": "type_error"}])
    if not 1 <= len(variants) <= MAX_VARIANTS:
        raise ManifestError([{"loc": "variants", "msg": f"a run takes 1 to {MAX_VARIANTS} variants "
                              f"(found {len(variants)})", "type": "too_long"}])
    errors: list[dict[str, Any]] = []
    known = [t.id for t in suite.tasks]
    resolved: dict[str, dict[str, Any]] = {}  # name -> task id -> merged task dict
    overrides: dict[str, dict[str, Any]] = {}
    for name, spec in variants.items():
        where = f"variants[{name!r}]"
        if not isinstance(name, str) or not _NAME.match(name):
            errors.append({"loc": where, "msg": "a variant name must be 1-64 letters, digits, '_', '.' or '-'",
                           "type": "value_error"})
            continue
        if not isinstance(spec, Mapping):
            errors.append({"loc": where, "msg": f"must be a dict of task fields to override (found "
                           f"{type(spec).__name__})", "type": "type_error"})
            continue
        spec = dict(spec)
        overrides[name] = _jsonable(spec)
        per_task = spec.pop("tasks", None) or {}
        if not isinstance(per_task, Mapping):
            errors.append({"loc": f"{where}.tasks", "msg": "must be a dict of task id -> task-field overrides",
                           "type": "type_error"})
            per_task = {}
        errors += _unknown_fields(spec, where)
        for task_id, fields in per_task.items():
            if task_id not in known:
                errors.append({"loc": f"{where}.tasks[{task_id!r}]", "msg": f"unknown task; the suite has {known}",
                               "type": "value_error"})
            elif not isinstance(fields, Mapping):
                errors.append({"loc": f"{where}.tasks[{task_id!r}]", "msg": "must be a dict of task fields",
                               "type": "type_error"})
            else:
                errors += _unknown_fields(fields, f"{where}.tasks[{task_id!r}]")
        if errors:
            continue
        resolved[name] = {}
        for task in suite.tasks:
            mine = {**spec, **dict(per_task.get(task.id) or {})}
            merged, problems = _merged_task(task, mine, where if task.id not in per_task else f"{where}.tasks[{task.id!r}]")
            errors += problems
            resolved[name][task.id] = merged
    if errors:
        raise ManifestError(errors)
    return _expanded(suite, list(resolved), overrides, resolved)


def _unknown_fields(fields: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    import difflib

    out = []
    for key in fields:
        if key not in VARIANT_FIELDS:
            close = difflib.get_close_matches(str(key), VARIANT_FIELDS, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else f"a variant may set {', '.join(VARIANT_FIELDS)}"
            out.append({"loc": f"{where}.{key}", "msg": f"not a field a variant can override; {hint}",
                        "type": "extra_forbidden"})
    return out


def _merged_task(task: Any, fields: dict[str, Any], where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The task's manifest with `fields` on top, validated as a task; problems located at the variant."""
    from evalnb.suite.manifest import Task

    data = task.model_dump(mode="json", exclude_none=True)
    fields = dict(fields)
    if "instructions" in fields:  # the system text: the task's generation.instructions
        gen = fields.get("generation", data.get("generation"))
        fields["generation"] = {**(gen if isinstance(gen, Mapping) else {}), "instructions": fields.pop("instructions")}
    if "num_fewshot" in fields:
        count = fields.pop("num_fewshot")
        fields["fewshot"] = {**(fields.get("fewshot") or data.get("fewshot") or {}), "count": count}
    if isinstance(fields.get("generation"), Mapping) and isinstance(data.get("generation"), Mapping):
        fields["generation"] = {**data["generation"], **fields["generation"]}  # on top of the task's own
    data.update(fields)
    try:
        Task.model_validate(data)
    except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError: reported as ours
        from pydantic import ValidationError

        from evalnb.suite._validation import manifest_error

        if not isinstance(exc, ValidationError):
            raise
        problems = [{**e, "loc": f"{where}.{e['loc']}" if e.get("loc") else where}
                    for e in manifest_error(exc).errors]
        return data, problems
    return data, []


def _expanded(suite: "Suite", names: list[str], overrides: dict[str, dict[str, Any]],
              resolved: dict[str, dict[str, dict[str, Any]]]) -> Variants:
    from evalnb.suite.manifest import Task

    tasks, slots = [], {}
    for task in suite.tasks:
        for name in names:
            sid = slot_id(task.id, name)
            tasks.append(Task.model_validate(resolved[name][task.id]).model_copy(update={"id": sid}))
            slots[sid] = (task.id, name)
    expanded = suite.model_copy(update={"tasks": tasks})
    expanded._base_dir = suite.base_dir
    return Variants(names=names, overrides=overrides, suite=expanded, slots=slots)


def _jsonable(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value, default=str))
