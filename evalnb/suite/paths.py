"""A manifest read from a file names files inside its own folder, and nowhere else.

Why: a manifest is often someone else's (a shared benchmark, a pull request). A local
dataset or few-shot path such as ``../.env`` or ``~/.netrc`` would send that file's lines to
the model server as prompts, and into the store. So for a manifest loaded from a file
(``Suite.from_file``, ``evalnb run suite.yaml``) every local path must resolve, symlinks
followed, inside the manifest's folder: a path that is absolute, starts with ``~`` or leaves
the folder is refused, naming the field, unless the caller allows it
(``Suite.from_file(path, allow_paths_outside=True)``, ``--allow-paths-outside``). A manifest
built in Python (``Suite.from_dict``) is the caller's own code and may name any path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalnb.suite._validation import loc_text

__all__ = ["paths_outside"]

_HINT = "pass allow_paths_outside=True to Suite.from_file (CLI: --allow-paths-outside) if you trust this manifest"


def paths_outside(tasks: list[Any], base_dir: Path) -> list[dict[str, str]]:
    """Manifest errors (``loc``, ``msg``, ``type``) for every local path that leaves ``base_dir``."""
    base = base_dir.resolve()
    problems = []
    for i, task in enumerate(tasks):
        fewshot = getattr(task, "fewshot", None)
        for loc, dataset in ((("tasks", i, "dataset"), task.dataset),
                             (("tasks", i, "fewshot", "dataset"), getattr(fewshot, "dataset", None))):  # fmt: skip
            for field, given in _local_paths(dataset, base):
                reason = _leaves(given, base)
                if reason is not None:
                    problems.append({"loc": loc_text((*loc, *field)), "type": "path_outside_manifest",
                                     "msg": f"{given!r} {reason} ({base}); {_HINT}"})  # fmt: skip
    return problems


def _local_paths(dataset: Any, base: Path) -> list[tuple[tuple[str, ...], str]]:
    """(field, path) of the local files and folders a dataset names."""
    if dataset is None or getattr(dataset, "file_id", None) is not None:
        return []
    found: list[tuple[tuple[str, ...], str]] = []
    path = getattr(dataset, "path", None)
    if isinstance(path, str):
        if getattr(dataset, "source", None) != "huggingface" or _looks_local(path, base):
            found.append((("path",), path))
    kwargs = getattr(dataset, "dataset_kwargs", None) or {}
    for key in ("data_dir", "cache_dir"):
        if isinstance(kwargs.get(key), str):
            found.append((("dataset_kwargs", key), kwargs[key]))
    return found


def _looks_local(path: str, base: Path) -> bool:
    """A Hugging Face ``path`` that names a folder rather than a hub id or a builder."""
    return path.startswith((".", "/", "~")) or "\\" in path or ".." in path or (base / path).exists()


def _leaves(given: str, base: Path) -> str | None:
    """Why ``given`` is not a path inside ``base``, or None when it is."""
    if given.startswith("~"):
        return "starts with ~ (a home folder), outside the manifest's folder"
    if Path(given).is_absolute():
        return "is an absolute path; local paths in a manifest file are relative to its folder"
    resolved = (base / given).resolve()
    if resolved != base and not resolved.is_relative_to(base):
        return "leaves the manifest's folder"
    return None
