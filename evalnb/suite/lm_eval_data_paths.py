"""An lm-eval task's local dataset folder stays in the task's folder.

Why: ``dataset_path`` is usually a Hugging Face hub name (``allenai/ai2_arc``), but a local
folder works too, and its rows become prompts. A task folder someone sent could name any
folder of the caller's (``/home/me/private``, ``../data``, ``~/notes``) and send its rows to
the model server and into the store. So a ``dataset_path`` (or ``dataset_kwargs.data_dir`` /
``cache_dir``) that is a local path must resolve, symlinks followed, inside the task's folder
(the folder of the YAML given; a registry task's: the installed ``lm_eval/tasks`` tree), or it
is refused naming the field, unless ``allow_paths_outside``. A relative local path is read from
the task YAML's folder (written into the manifest as that absolute folder), so what is checked
is what is read. A hub name stays as it is; a ``dataset_paths=`` mapping is the caller's own
and is not checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from evalnb.errors import LmEvalImportError

__all__ = ["confined_dataset_paths"]

_KWARGS = ("data_dir", "cache_dir")


def confined_dataset_paths(config: dict[str, Any], folder: Path | None, root: Path | None,
                           mapped: Mapping[str, str], where: str) -> dict[str, Any]:
    """``config`` with its local dataset paths checked against ``root`` (None: not checked) and
    relative ones made absolute from ``folder`` (the task YAML's)."""
    if folder is None:
        return config
    out = dict(config)
    path = config.get("dataset_path")
    if isinstance(path, str) and path not in mapped and _looks_local(path, folder):
        out["dataset_path"] = _checked(path, folder, root, where, "dataset_path")
    kwargs = config.get("dataset_kwargs")
    if isinstance(kwargs, dict):
        kwargs = dict(kwargs)
        for key in _KWARGS:
            if isinstance(kwargs.get(key), str):
                kwargs[key] = _checked(kwargs[key], folder, root, where, f"dataset_kwargs.{key}")
        out["dataset_kwargs"] = kwargs
    return out


def _looks_local(path: str, folder: Path) -> bool:
    """A path rather than a hub name: absolute, ``~``, ``.``/``..``, or a folder beside the YAML."""
    return path.startswith((".", "/", "~")) or "\\" in path or ".." in path or (folder / path).exists()


def _checked(given: str, folder: Path, root: Path | None, where: str, field: str) -> str:
    text = given.strip()
    if root is not None:
        reason = None
        if text.startswith("~"):
            reason = "starts with ~ (a home folder)"
        elif not _inside((folder / text).resolve(), root.resolve()):  # an absolute text stays itself
            reason = "is outside the task's folder" if Path(text).is_absolute() else "leaves the task's folder"
        if reason is not None:
            raise LmEvalImportError(f"{where}: {field} {text!r} {reason} ({root}); its rows would be sent as "
                                    "prompts: pass allow_paths_outside=True (CLI: --allow-paths-outside) if you "
                                    "trust this task folder")
    return str((folder / Path(text).expanduser()).resolve()) if not Path(text).is_absolute() else text


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)
