"""lm-eval's task registry: names, groups and tags to task configs, the index read once per process.

lm-eval's ``TaskManager`` scans its ~14k YAML files when it is built (10-25 s); `task_index`
builds it once and keeps it. A YAML path needs no index unless it is a group naming other
tasks. Groups and tags expand to their tasks the way lm-eval's ``TaskFactory`` expands them:
a group's own non-group keys (and a member dict's keys) override its members' configs.

A group member given as a ``.yaml`` path resolves against the group YAML's folder and, like
its ``include:`` and ``!function`` files, must stay in the task's folder (the folder of the
YAML given, or for a registry name the installed ``lm_eval/tasks`` tree): a group someone sent
could otherwise name any YAML of the caller's (``/abs/mytask.yaml``, ``../x.yaml``) and import
its hooks and data. Absolute paths, ``~`` and ``..`` out are refused naming ``task:`` unless
``allow_paths_outside``.
"""

from __future__ import annotations

import functools
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.errors import LmEvalImportError
from evalnb.suite.lm_eval_yaml import confine, load_task_yaml

__all__ = ["TaskSpec", "resolve_tasks", "task_index"]

_GROUP_KEYS = frozenset({"group", "group_alias", "task", "aggregate_metric_list", "metadata"})


@dataclass
class TaskSpec:
    """One lm-eval task to import: its name, merged config and carried module sources."""

    name: str
    config: dict[str, Any]
    modules: dict[str, str]
    source: str  # the YAML it came from (for messages)
    folder: Path | None = None  # that YAML's folder (None: an inline registry config)
    root: Path | None = None  # the folder its local files must stay in (None: anywhere)


@dataclass(frozen=True)
class _Origin:
    """Where a config was read: its YAML's folder (members' ``.yaml`` paths resolve there) and
    the folder they must stay in (``root`` None: ``allow_paths_outside``)."""

    folder: Path | None
    root: Path | None
    allow_outside: bool


@functools.lru_cache(maxsize=1)
def task_index() -> dict[str, Any]:
    """``TaskManager().task_index`` of the installed lm-eval: built once per process."""
    try:
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise LmEvalImportError(
            "importing lm-eval tasks by name needs the lm-eval package: pip install lm-eval"
        ) from None
    return TaskManager().task_index


def resolve_tasks(specs: str | Path | list[str | Path], *, allow_paths_outside: bool = False) -> list[TaskSpec]:
    """Task names, group/tag names and YAML paths, expanded to their tasks in order (no repeats).

    A YAML's ``include:`` and ``!function`` files stay in its folder (a registry task's: in the
    installed ``lm_eval/tasks`` tree) unless ``allow_paths_outside`` (see `lm_eval_yaml`).
    """
    if isinstance(specs, (str, Path)):
        specs = [specs]
    found: dict[str, TaskSpec] = {}
    for spec in specs:
        for task in _resolve(spec, {}, 0, _Origin(None, None, allow_paths_outside)):
            if task.name in found:
                raise LmEvalImportError(f"lm-eval task {task.name!r} is named twice (in {spec!s})")
            found[task.name] = task
    return list(found.values())


def _installed_tree() -> Path | None:
    """The installed ``lm_eval/tasks`` folder (None without lm-eval)."""
    try:
        import lm_eval.tasks
    except ImportError:
        return None
    return Path(lm_eval.tasks.__file__).resolve().parent


def _tasks_tree(yaml_path: Any) -> Path | None:
    """The installed ``lm_eval/tasks`` folder, when a registry task's YAML lies in it."""
    tree = _installed_tree()
    return tree if tree is not None and Path(yaml_path).resolve().is_relative_to(tree) else None


def _resolve(spec: Any, overrides: dict[str, Any], depth: int, origin: _Origin) -> list[TaskSpec]:
    if depth > 20:
        raise LmEvalImportError(f"lm-eval group nesting too deep at {spec!r}")
    allow_outside = origin.allow_outside
    if isinstance(spec, Path) or (isinstance(spec, str) and spec.endswith((".yaml", ".yml"))):
        path, root = _yaml_path(spec, origin)
        if not path.is_file():
            raise LmEvalImportError(f"lm-eval task YAML {str(spec)!r} not found")
        loaded = load_task_yaml(path, root=root, allow_paths_outside=allow_outside)
        folder = loaded.path.parent
        return _from_config(loaded.config, loaded.modules, str(path), overrides, depth,
                            _Origin(folder, None if allow_outside else (root or folder), allow_outside))
    if not isinstance(spec, str):
        raise LmEvalImportError(f"an lm-eval task is a name or a YAML path, not {type(spec).__name__}")
    entry = task_index().get(spec)
    if entry is None:
        raise LmEvalImportError(f"{spec!r} is not an lm-eval task, group or tag name (nor a .yaml path)")
    kind = entry.kind.name
    if kind == "TAG":
        out = []
        for name in sorted(entry.tags):
            out += _resolve(name, overrides, depth + 1, origin)
        return out
    if kind == "PY_TASK":
        raise LmEvalImportError(f"lm-eval task {spec!r} is a Python class task ({entry.yaml_path}); only YAML tasks import")
    tree = _tasks_tree(entry.yaml_path) if entry.yaml_path is not None else _installed_tree()
    if entry.yaml_path is not None:
        loaded = load_task_yaml(entry.yaml_path, root=tree, allow_paths_outside=allow_outside)
        config, modules, source = loaded.config, loaded.modules, str(entry.yaml_path)
        folder = loaded.path.parent
    else:
        config, modules, source, folder = deepcopy(entry.cfg or {}), {}, "inline", tree
    if kind == "GROUP":
        config["group"] = spec
    return _from_config(config, modules, source, overrides, depth,
                        _Origin(folder, None if allow_outside else (tree or folder), allow_outside))


def _yaml_path(spec: Any, origin: _Origin) -> tuple[Path, Path | None]:
    """A YAML path and the folder its files must stay in: as given for one the caller names
    (its own folder), inside the including group's folder for a group member."""
    if origin.folder is None:  # the caller's own argument: relative to the working directory
        return Path(spec), None
    given = str(spec).strip()
    path = Path(given) if Path(given).is_absolute() else origin.folder / given
    if origin.root is not None:
        confine(origin.root).check(given, path, origin.folder, "task:")
    return path, origin.root


def _from_config(config: dict[str, Any], modules: dict[str, str], source: str,
                 overrides: dict[str, Any], depth: int, origin: _Origin) -> list[TaskSpec]:
    if "class" in config:
        raise LmEvalImportError(f"{source}: a Python class task; only YAML tasks import")
    if "group" in config:
        return _expand_group(config, modules, source, overrides, depth, origin)
    if "task" not in config:
        raise LmEvalImportError(f"{source}: neither a task nor a group (no 'task' or 'group' key)")
    merged = {**config, **overrides}
    for key in ("tag", "group", "task_list"):
        merged.pop(key, None)
    return [TaskSpec(str(merged["task"]), merged, modules, source, origin.folder, origin.root)]


def _expand_group(config: dict[str, Any], modules: dict[str, str], source: str,
                  overrides: dict[str, Any], depth: int, origin: _Origin) -> list[TaskSpec]:
    name = config["group"]
    member_overrides = {**{k: v for k, v in config.items() if k not in _GROUP_KEYS}, **overrides}
    members = config.get("task")
    if not isinstance(members, list):
        raise LmEvalImportError(f"{source}: group {name!r} has no task list")
    out: list[TaskSpec] = []
    for member in members:
        if isinstance(member, str):
            out += _resolve(member, member_overrides, depth + 1, origin)
        elif isinstance(member, dict) and "group" in member:
            inline = {k: v for k, v in member.items() if k != "group"}
            if member["group"] in task_index():
                out += _resolve(member["group"], {**member_overrides, **inline}, depth + 1, origin)
            else:
                out += _expand_group(member, modules, source, member_overrides, depth + 1, origin)
        elif isinstance(member, dict) and "task" in member:
            item = {**member_overrides, **member}
            if member["task"] in task_index():
                out += _resolve(member["task"], {k: v for k, v in item.items() if k != "task"}, depth + 1, origin)
            else:
                out += _from_config(item, modules, source, {}, depth + 1, origin)
        else:
            raise LmEvalImportError(f"{source}: group {name!r} has an unsupported member {member!r}")
    return out
