"""Hugging Face datasets: hub ids, local dataset folders, ``save_to_disk`` folders, builder mode.

Hub ids and local folders get their builder from ``datasets.load_dataset_builder`` (which
reads a README ``configs:`` block or the file-name conventions) and stream the split, so
``max_rows`` reads only that many rows. A local folder of plain CSV/JSON files is then read
by evalnb's own readers (`evalnb.data.hf_folder`: values as written, as for a local file);
``save_to_disk`` folders go through ``load_from_disk``. Values become plain JSON types
(`to_jsonable`): a date is "2024-01-15", a datetime ISO 8601; a timestamp that pyarrow read
out of a JSON string is given back as the string's date when its column holds only
midnights (pyarrow parses "2024-01-15" as a timestamp). ``datasets`` is imported only when
needed, and every error names the task.
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

from evalnb.data.hf_data_files import BUILDERS, load_builder_rows
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
    return _load_streaming(target, spec, data_files, kwargs, count, label, cache_dir, local=folder is not None)


def to_jsonable(value: Any, dates: bool = False) -> Any:
    """Arrow/numpy/datetime values as plain JSON types (bytes as base64, decimals as numbers).

    A date is "YYYY-MM-DD" and a datetime ISO 8601; ``dates=True`` writes datetimes as their
    date (for a column of midnights that pyarrow parsed out of date strings).
    """
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, dates) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, dates) for v in value]
    if dates and isinstance(value, dt.datetime):
        return value.date().isoformat()
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
    target: str, spec: HFSpec, data_files: Any, kwargs: dict[str, Any], count: int | None, label: str,
    cache_dir: Path, *, local: bool,
) -> list[dict]:
    import datasets

    from evalnb.data.hf_folder import read_split_files

    with _quiet(), _offline_as_set():
        try:
            config = spec.name or _discover_config(datasets, target, spec, data_files, label, cache_dir)
            if config:
                label = f"{label} config {config!r}"
            # what load_dataset(..., streaming=True) does, with the builder kept to look at
            builder = datasets.load_dataset_builder(
                target, config, data_files=data_files, revision=spec.revision, cache_dir=str(cache_dir), **kwargs
            )
            rows = read_split_files(builder, spec.split, count, label) if local else None
            if rows is not None:
                return rows
            splits = builder.as_streaming_dataset()
            if spec.split not in splits:
                raise DatasetError(f"{label}: split {spec.split!r} not found; available splits: {', '.join(splits)}")
            rows_in = splits[spec.split]
            if getattr(rows_in, "features", None) is not None:  # unknown for a streamed CSV: nothing to decode
                rows_in = rows_in.decode(False)  # images/audio stay bytes: no PIL needed, nothing lost
        except DatasetError:
            raise
        except Exception as exc:
            offline = " (offline mode is on: only datasets already in the cache load)" if _offline() else ""
            raise DatasetError(f"{label}: cannot load: {_message(exc)}{offline}") from exc
        # pyarrow reads ISO date strings in JSON as timestamps: give dates back as dates
        inferred = getattr(builder, "name", None) == "json"
        return _collect(itertools.islice(rows_in, count), f"{label} split {spec.split!r}", inferred_dates=inferred)


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


def _collect(rows: Iterator[dict], label: str, *, inferred_dates: bool = False) -> list[dict]:
    raw: list[dict] = []
    try:
        for row in rows:
            raw.append(row)
    except Exception as exc:
        raise DatasetError(f"{label}: error after row {len(raw)}: {_message(exc)}") from exc
    dates = _midnight_columns(raw) if inferred_dates else set()
    if not dates:
        return [to_jsonable(row) for row in raw]
    return [{str(k): to_jsonable(v, k in dates) for k, v in row.items()} for row in raw]


def _midnight_columns(rows: list[dict]) -> set[str]:
    """Columns whose datetimes are all naive midnights: dates pyarrow parsed into timestamps."""
    verdict: dict[str, bool] = {}
    for row in rows:
        for key, value in row.items():
            for stamp in _datetimes(value):
                verdict[key] = verdict.get(key, True) and stamp.tzinfo is None and stamp.time() == dt.time(0)
    return {key for key, ok in verdict.items() if ok}


def _datetimes(value: Any) -> Iterator[dt.datetime]:
    if isinstance(value, dt.datetime):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _datetimes(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _datetimes(item)


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


def _offline() -> bool:
    """HF_DATASETS_OFFLINE (when set) else HF_HUB_OFFLINE, read now, as `datasets` reads them."""
    import os

    value = os.environ.get("HF_DATASETS_OFFLINE")
    if value is None:
        value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in ("1", "ON", "YES", "TRUE")


@contextmanager
def _offline_as_set() -> Iterator[None]:
    """Offline mode as the environment says now, also when it was set after `datasets` was imported.

    `datasets` and `huggingface_hub` read the variables once, at import; a notebook that sets
    ``os.environ["HF_HUB_OFFLINE"] = "1"`` later would still go online. This only ever turns
    offline mode on, for one load, and puts the flags back.
    """
    if not _offline():
        yield
        return
    import datasets.config as dataset_config
    import huggingface_hub.constants as hub_constants

    saved = (dataset_config.HF_HUB_OFFLINE, dataset_config.HF_DATASETS_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    dataset_config.HF_HUB_OFFLINE = dataset_config.HF_DATASETS_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        dataset_config.HF_HUB_OFFLINE, dataset_config.HF_DATASETS_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved


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
