"""Which executor a run uses: the names a user may pass ("local", "ray", "batch"), an
`Executor` object, or the stored record of one (what `resume` runs with again).

Ray and the provider batch executor are imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalnb.runner.executors.base import Executor
from evalnb.runner.executors.local import LocalExecutor

# Executors a stored run can name: type -> build one from its record (what `resume` runs with).
# Another executor registers itself here (with a `record()` giving {"type": <its type>, ...}).
EXECUTOR_TYPES: dict[str, Callable[[dict[str, Any]], Any]] = {}


def _ray_from_record(record: dict[str, Any]) -> Any:
    from evalnb.runner.executors.ray_driver import RayExecutor

    return RayExecutor.from_record(record)


def _batch_from_record(record: dict[str, Any]) -> Any:
    from evalnb.runner.executors.batch import BatchExecutor

    return BatchExecutor.from_record(record)


EXECUTOR_TYPES["ray"] = _ray_from_record
EXECUTOR_TYPES["batch"] = _batch_from_record
EXECUTORS = "'local', 'ray', 'batch', or an executor such as evalnb.RayExecutor(...) or evalnb.BatchExecutor(...)"


def _is_executor(value: Any) -> bool:
    return isinstance(value, Executor) and isinstance(getattr(value, "name", None), str)


def make_executor(value: Any) -> Any:
    """The executor object for `RunPlan.executor` ("local", "ray", "batch", or an `Executor` object)."""
    if value is None or value == "local":
        return LocalExecutor()
    if value == "ray":
        from evalnb.runner.executors.ray_driver import RayExecutor

        return RayExecutor()
    if value == "batch":
        from evalnb.runner.executors.batch import BatchExecutor

        return BatchExecutor()
    if _is_executor(value):
        return value
    raise ValueError(f"executor must be {EXECUTORS}, got {value!r}")


def check_executor(value: Any) -> Any:
    """`make_plan`'s check: "local", "ray", "batch", an `Executor` object, or a stored description of one."""
    if value is None or value == "local":
        return "local"
    if value in ("ray", "batch"):
        return value
    if isinstance(value, dict) and value.get("type") in EXECUTOR_TYPES:
        return EXECUTOR_TYPES[value["type"]](value)
    if _is_executor(value):
        return value
    raise ValueError(f"executor must be {EXECUTORS}, got {value!r}")


def executor_record(value: Any) -> Any:
    """How a run's executor is stored with its options (JSON; what `resume` runs with again)."""
    if value in (None, "local", "ray", "batch"):
        return value or "local"
    record = getattr(value, "record", None)
    return record() if record is not None else {"type": value.name}
