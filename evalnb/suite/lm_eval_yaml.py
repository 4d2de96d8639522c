"""Read an lm-eval task YAML as lm-eval does: ``include:`` merged, ``!function`` hooks kept as names.

lm-eval imports a ``!function utils.process_docs`` hook when it reads the YAML; here the hook
stays data, ``{"function": "utils.process_docs"}``, and the source of ``utils.py`` (found next
to the YAML that names it) is collected, so the hook can run later in evalnb's sandbox from
the manifest alone. ``include:`` is resolved relative to the including file; its keys are
overridden by the including file's, and an included ``task_list`` is dropped (as lm-eval does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalnb.errors import LmEvalImportError

__all__ = ["LmEvalYaml", "load_task_yaml"]


@dataclass
class LmEvalYaml:
    """A YAML's merged config and the Python modules its ``!function`` hooks come from."""

    config: dict[str, Any]
    modules: dict[str, str] = field(default_factory=dict)  # module name -> source
    path: Path | None = None


def load_task_yaml(path: str | Path, modules: dict[str, str] | None = None) -> LmEvalYaml:
    """The config at ``path`` with includes merged (LmEvalImportError naming the file if unreadable)."""
    path = Path(path).expanduser().resolve()
    modules = {} if modules is None else modules
    config = _load(path, modules, set())
    return LmEvalYaml(config, modules, path)


def _load(path: Path, modules: dict[str, str], seen: set[Path]) -> dict[str, Any]:
    if path in seen:
        raise _error(path, "include cycle")
    seen = seen | {path}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _error(path, f"cannot read: {exc.strerror or exc}") from None
    config = _parse(text, path, modules)
    if not isinstance(config, dict):
        raise _error(path, f"expected a mapping, found {type(config).__name__}")
    if "include" not in config:
        return config
    includes = config.pop("include")
    merged: dict[str, Any] = {}
    for inc in includes if isinstance(includes, list) else [includes]:
        inc_path = Path(inc) if Path(inc).is_absolute() else path.parent / inc
        included = _load(inc_path.resolve(), modules, seen)
        included.pop("task_list", None)
        merged.update(included)
    merged.update(config)
    return merged


def _parse(text: str, path: Path, modules: dict[str, str]) -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def function(loader: Any, node: Any) -> dict[str, str]:
        return {"function": _function_ref(loader.construct_scalar(node), path.parent, modules)}

    Loader.add_constructor("!function", function)
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _error(path, f"invalid YAML: {exc}") from None


def _function_ref(qual: str, base_dir: Path, modules: dict[str, str]) -> str:
    """``utils.fn`` -> a reference whose module source is in ``modules`` (renamed on a clash)."""
    module, _, name = str(qual).rpartition(".")
    if not module:
        raise _error(base_dir, f"!function {qual}: expected module.function")
    file = base_dir / f"{module.replace('.', '/')}.py"
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
