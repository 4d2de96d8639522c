"""Read an lm-eval task YAML as lm-eval does: ``include:`` merged, ``!function`` hooks kept as names.

lm-eval imports a ``!function utils.process_docs`` hook when it reads the YAML; here the hook
stays data, ``{"function": "utils.process_docs"}``, and the source of ``utils.py`` (found next
to the YAML that names it) is collected, so the hook can run later in evalnb's sandbox from
the manifest alone. ``include:`` is resolved relative to the including file; its keys are
overridden by the including file's, and an included ``task_list`` is dropped (as lm-eval does).

Both stay inside the task's folder (``root``: the folder of the YAML given, or for a registry
name the installed ``lm_eval/tasks`` tree): a task folder is often someone else's, and
``include: /abs/x.yaml`` or ``!function /abs/settings.x`` would copy any file of the caller's
into the manifest (and from there into prompts). An absolute path, ``~`` or one that leaves
the folder (``..``, a symlink) is refused naming the field, unless ``allow_paths_outside``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalnb.errors import LmEvalImportError

__all__ = ["LmEvalYaml", "confine", "load_task_yaml"]


@dataclass
class LmEvalYaml:
    """A YAML's merged config and the Python modules its ``!function`` hooks come from."""

    config: dict[str, Any]
    modules: dict[str, str] = field(default_factory=dict)  # module name -> source
    path: Path | None = None


@dataclass(frozen=True)
class _Confine:
    """Where a task's ``include:`` and ``!function`` files may be (``root`` None: anywhere)."""

    root: Path | None

    def check(self, given: str, resolved: Path, where: Path, field: str) -> None:
        if self.root is None:
            return
        text = str(given).strip()
        if text.startswith("~"):
            reason = "starts with ~"
        elif Path(text).is_absolute():
            reason = "is absolute"
        elif not resolved.resolve().is_relative_to(self.root):
            reason = "leaves the task's folder"
        else:
            return
        raise _error(where, f"{field} {text!r} {reason} ({self.root}); pass allow_paths_outside=True "
                            "(CLI: --allow-paths-outside) if you trust this task folder")


def confine(root: str | Path | None) -> _Confine:
    """The check that a path named in a task stays in ``root`` (None: anywhere): also used for a
    group's ``task:`` members (`evalnb.suite.lm_eval_registry`)."""
    return _Confine(None if root is None else Path(root).resolve())


def load_task_yaml(path: str | Path, modules: dict[str, str] | None = None, *, root: str | Path | None = None,
                   allow_paths_outside: bool = False) -> LmEvalYaml:
    """The config at ``path`` with includes merged (LmEvalImportError naming the file if unreadable).

    ``root``: the folder ``include:`` and ``!function`` files must stay in (default: the YAML's
    own folder); ``allow_paths_outside=True`` lets them be anywhere.
    """
    path = Path(path).expanduser().resolve()
    modules = {} if modules is None else modules
    confine = _Confine(None if allow_paths_outside else Path(root or path.parent).resolve())
    config = _load(path, modules, set(), confine)
    return LmEvalYaml(config, modules, path)


def _load(path: Path, modules: dict[str, str], seen: set[Path], confine: _Confine) -> dict[str, Any]:
    if path in seen:
        raise _error(path, "include cycle")
    seen = seen | {path}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _error(path, f"cannot read: {exc.strerror or exc}") from None
    config = _parse(text, path, modules, confine)
    if not isinstance(config, dict):
        raise _error(path, f"expected a mapping, found {type(config).__name__}")
    if "include" not in config:
        return config
    includes = config.pop("include")
    merged: dict[str, Any] = {}
    for inc in includes if isinstance(includes, list) else [includes]:
        inc_path = Path(inc) if Path(inc).is_absolute() else path.parent / inc
        confine.check(str(inc), inc_path, path, "include:")
        included = _load(inc_path.resolve(), modules, seen, confine)
        included.pop("task_list", None)
        merged.update(included)
    merged.update(config)
    return merged


def _parse(text: str, path: Path, modules: dict[str, str], confine: _Confine) -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def function(loader: Any, node: Any) -> dict[str, str]:
        return {"function": _function_ref(loader.construct_scalar(node), path, modules, confine)}

    Loader.add_constructor("!function", function)
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _error(path, f"invalid YAML: {exc}") from None


def _function_ref(qual: str, path: Path, modules: dict[str, str], confine: _Confine) -> str:
    """``utils.fn`` -> a reference whose module source is in ``modules`` (renamed on a clash)."""
    base_dir = path.parent
    module, _, name = str(qual).rpartition(".")
    if not module:
        raise _error(base_dir, f"!function {qual}: expected module.function")
    file = base_dir / f"{module.replace('.', '/')}.py"
    confine.check(module, file, path, "!function")
    if not file.is_file():
        raise _error(base_dir, f"!function {qual}: {file.name} not found next to the YAML")
    source = file.read_text(encoding="utf-8")
    key, n = module, 1
    while key in modules and modules[key] != source:
        n += 1
        key = f"{module}_{n}"
    modules[key] = source
    return f"{key}.{name}"


def _error(path: Path, message: str) -> LmEvalImportError:
    return LmEvalImportError(f"{path}: {message}")
