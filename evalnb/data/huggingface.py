"""Hugging Face datasets: hub ids, local dataset folders, ``save_to_disk`` folders, builder mode.

Hub ids and local folders go through ``datasets.load_dataset(..., streaming=True)`` so
``max_rows`` reads only that many rows; ``save_to_disk`` folders (which ``load_dataset``
cannot read) go through ``load_from_disk``. ``datasets`` is imported only when needed.
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from evalnb.data.builder import BUILDERS, load_builder_rows
from evalnb.errors import DatasetError

# Tokens never belong in a manifest; the rest would let a manifest redirect storage or I/O.
_FORBIDDEN_KWARGS = frozenset(
    {"token", "use_auth_token", "storage_options", "download_config", "cache_dir", "save_infos", "base_path"}
)
_OWN_FIELDS = frozenset({"path", "name", "split", "revision", "streaming"})
# Loader-tuning flags from lm-eval definitions that do not apply here (scripts are never run).
_IGNORED_KWARGS = frozenset({"trust_remote_code", "num_proc", "keep_in_memory", "download_mode", "verification_mode"})
_OTHER_BUILDERS = frozenset(
    {"parquet", "text", "arrow", "pandas", "xml", "sql", "webdataset", "imagefolder", "audiofolder", "videofolder",
     "pdffolder", "niftifolder", "hdf5", "eval", "lance", "spark", "generator", "cache"}
)
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


@dataclass(frozen=True)
class HFSpec:
    """The Hugging Face fields of a dataset declaration, with ``split`` already defaulted."""

    path: str
    split: str
    name: str | None = None
    revision: str | None = None
    max_rows: int | None = None
    dataset_kwargs: dict[str, Any] = field(default_factory=dict)
    data_files: Any = None


def load_huggingface(
    spec: HFSpec,
    *,
    base_dir: Path | None,
    task_id: str,
    allow_private_hosts: bool = False,
    limit: int | None = None,
    cache_dir: Path,
) -> list[dict]:
    """Rows of one split as plain JSON-able dicts, at most min(max_rows, limit) of them."""
    label = f"task {task_id!r}: dataset {spec.path!r}"
    if not isinstance(spec.path, str) or not spec.path:
        raise DatasetError(f"task {task_id!r}: a Hugging Face dataset needs a non-empty `path`")
    count = _smaller(spec.max_rows, limit, label)
    kwargs = _clean_kwargs(spec.dataset_kwargs, label)
    data_files = _merge_data_files(spec.data_files, kwargs.pop("data_files", None), label)
    builder = spec.path.lower()
    if builder in BUILDERS:
        return load_builder_rows(
            builder, data_files, kwargs, split=spec.split, label=label, limit=count, allow_private=allow_private_hosts
        )
    if builder in _OTHER_BUILDERS:
        raise DatasetError(f"{label}: builder {spec.path!r} is not supported; use 'json' or 'csv' with data_files URLs")
    _check_relative(data_files, "data_files", label)
    _check_relative(kwargs.get("data_dir"), "dataset_kwargs.data_dir", label)
    folder = _local_folder(spec.path, base_dir, label)
    if count == 0:
        return []
    if folder is not None and _is_saved_dataset(folder):
        return _load_saved(folder, spec.split, count, label)
    target = str(folder) if folder is not None else spec.path
    return _load_streaming(target, spec, data_files, kwargs, count, label, cache_dir)


def to_jsonable(value: Any) -> Any:
    """Arrow/numpy/datetime values as plain JSON types (bytes as base64, decimals as numbers)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return int(value) if value.is_finite() and value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return to_jsonable(value.tolist())
    return str(value)


def _load_streaming(
    target: str, spec: HFSpec, data_files: Any, kwargs: dict[str, Any], count: int | None, label: str, cache_dir: Path
) -> list[dict]:
    import datasets

    with _quiet():
        try:
            config = spec.name or _discover_config(datasets, target, spec, data_files, label, cache_dir)
            if config:
                label = f"{label} config {config!r}"
            splits = datasets.load_dataset(
                target,
                config,
                data_files=data_files,
                revision=spec.revision,
                cache_dir=str(cache_dir),
                streaming=True,
                **kwargs,
            )
        except DatasetError:
            raise
        except Exception as exc:
            raise DatasetError(f"{label}: cannot load: {_message(exc)}") from exc
        if spec.split not in splits:
            raise DatasetError(f"{label}: split {spec.split!r} not found; available splits: {', '.join(splits)}")
        rows_in = splits[spec.split]
        if hasattr(rows_in, "decode"):
            rows_in = rows_in.decode(False)  # images/audio stay bytes: no PIL needed, nothing lost
        return _collect(itertools.islice(rows_in, count), f"{label} split {spec.split!r}")


def _load_saved(folder: Path, split: str, count: int | None, label: str) -> list[dict]:
    import datasets

    with _quiet():
        try:
            saved = datasets.load_from_disk(str(folder))
        except Exception as exc:
            raise DatasetError(f"{label}: cannot load the saved dataset: {_message(exc)}") from exc
        if isinstance(saved, datasets.DatasetDict):
            if split not in saved:
                raise DatasetError(f"{label}: split {split!r} not found; available splits: {', '.join(saved)}")
            table = saved[split]
        else:  # a single saved Dataset: usable for any split unless it records a different one
            if saved.split is not None and str(saved.split) != split:
                raise DatasetError(f"{label}: split {split!r} not found; available splits: {saved.split}")
            table = saved
        if count is not None and count < len(table):
            table = table.select(range(count))
        return _collect(iter(table), f"{label} split {split!r}")


def _discover_config(
    datasets: Any, target: str, spec: HFSpec, data_files: Any, label: str, cache_dir: Path
) -> str | None:
    """No ``name``: the only config; else "default" or the first config that has the split."""
    names = list(datasets.get_dataset_config_names(target, revision=spec.revision, data_files=data_files))
    if len(names) <= 1:
        return names[0] if names else None
    for config in sorted(names, key=lambda n: n != "default"):
        try:
            available = datasets.get_dataset_split_names(
                target, config, revision=spec.revision, data_files=data_files, cache_dir=str(cache_dir)
            )
        except Exception:
            continue
        if spec.split in available:
            return config
    raise DatasetError(
        f"{label}: no config has a {spec.split!r} split; set `name` to one of: {', '.join(names)}"
    )


def _collect(rows: Iterator[dict], label: str) -> list[dict]:
    result: list[dict] = []
    try:
        for row in rows:
            result.append(to_jsonable(row))
    except Exception as exc:
        raise DatasetError(f"{label}: error after row {len(result)}: {_message(exc)}") from exc
    return result


def _clean_kwargs(kwargs: Any, label: str) -> dict[str, Any]:
    if kwargs is None:
        return {}
    if not isinstance(kwargs, dict):
        raise DatasetError(f"{label}: dataset_kwargs must be an object")
    result = {}
    for key, value in kwargs.items():
        if key in _FORBIDDEN_KWARGS:
            raise DatasetError(f"{label}: dataset_kwargs.{key} is not allowed in a manifest")
        if key in _OWN_FIELDS:
            raise DatasetError(f"{label}: dataset_kwargs.{key}: set the dataset's own `{key}` field instead")
        if key not in _IGNORED_KWARGS:
            result[key] = value
    return result


def _merge_data_files(top: Any, nested: Any, label: str) -> Any:
    if top is not None and nested is not None and top != nested:
        raise DatasetError(f"{label}: data_files and dataset_kwargs.data_files disagree; give only one")
    return top if top is not None else nested


def _check_relative(patterns: Any, where: str, label: str) -> None:
    """Outside builder mode, file patterns must stay inside the dataset (no URLs, no escapes)."""
    if patterns is None:
        return
    if isinstance(patterns, dict):
        items = [p for v in patterns.values() for p in ([v] if isinstance(v, str) else v)]
    else:
        items = [patterns] if isinstance(patterns, str) else list(patterns)
    for item in items:
        bad = (
            not isinstance(item, str)
            or "://" in item
            or "::" in item
            or item.startswith(("/", "~", "\\"))
            or re.match(r"[A-Za-z]:", item) is not None
            or ".." in re.split(r"[/\\]", item)
        )
        if bad:
            raise DatasetError(
                f"{label}: {where} entry {item!r} must be a relative pattern inside the dataset "
                "(URLs are only allowed with path 'json' or 'csv')"
            )


def _local_folder(path: str, base_dir: Path | None, label: str) -> Path | None:
    """The dataset folder ``path`` names (relative to the manifest's folder), or None for a hub id."""
    if "://" in path:
        raise DatasetError(f"{label}: a URL is not a dataset path; use path 'json' or 'csv' with data_files")
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = (base_dir or Path.cwd()) / candidate
    if candidate.is_dir():
        return candidate.resolve()
    if candidate.exists():
        raise DatasetError(
            f"{label}: {candidate} is a file; give a dataset folder or hub id, or use "
            "{'path': ..., 'format': ...} without Hugging Face fields to read a single file"
        )
    if path.startswith((".", "/", "~")) or "\\" in path or not _HUB_ID.fullmatch(path) or ".." in path:
        raise DatasetError(f"{label}: local dataset folder not found: {candidate}")
    return None


def _is_saved_dataset(folder: Path) -> bool:
    return (folder / "dataset_dict.json").is_file() or (
        (folder / "state.json").is_file() and (folder / "dataset_info.json").is_file()
    )


def _smaller(max_rows: Any, limit: int | None, label: str) -> int | None:
    for name, value in (("max_rows", max_rows), ("limit", limit)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise DatasetError(f"{label}: {name} must be a non-negative integer (found {value!r})")
    values = [v for v in (max_rows, limit) if v is not None]
    return min(values) if values else None


def _message(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text if len(text) <= 500 else text[:497] + '...'}"


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence datasets' progress bars and log lines for one call, then restore the user's settings."""
    from datasets.utils import logging as hf_logging

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity(hf_logging.CRITICAL)
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
