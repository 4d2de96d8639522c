"""``load_rows``: one entry point from any dataset declaration to a list of row dicts.

A declaration is the manifest's model or a plain dict; only its fields are read, so this
module does not depend on the manifest's class names. The kind is decided by its fields:
``rows`` → the rows written in the manifest (copied, so a run never changes the suite);
``file_id`` → the file store; ``source: huggingface`` or any Hugging Face-only field →
Hugging Face; ``format``, or a ``path`` ending in ``.jsonl``/``.ndjson``/``.csv``/``.json`` →
a local file relative to the manifest's folder; any other ``path`` → Hugging Face.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from evalnb.data import upload_store
from evalnb.data.row_readers import infer_format, iter_file, read_file
from evalnb.errors import DatasetError
from evalnb.home import evalnb_home

Kind = Literal["inline", "file", "local", "huggingface"]
HF_ONLY_FIELDS = ("name", "split", "revision", "max_rows", "dataset_kwargs", "data_files")
LOCAL_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".json")


def load_rows(
    dataset: Any,
    *,
    base_dir: Path | None = None,
    task_id: str,
    default_split: str = "test",
    allow_private_hosts: bool = False,
    limit: int | None = None,
    cache_dir: Path | None = None,
) -> list[dict]:
    """Load a task's rows (at most ``limit``); errors are DatasetError naming task, file and line.

    ``default_split`` applies when the declaration has no ``split`` (few-shot callers pass
    "train"). ``allow_private_hosts`` lets tests serve ``data_files`` from 127.0.0.1.
    ``cache_dir`` is the ``datasets`` cache, by default ``<evalnb home>/hf-cache``.
    """
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise DatasetError(f"task {task_id!r}: limit must be a non-negative integer (found {limit!r})")
    kind = dataset_kind(dataset)
    if kind == "inline":
        return _inline_rows(dataset, task_id, limit)
    if kind == "file":
        return _load_file_store(dataset, task_id, limit)
    if kind == "local":
        return _load_local(dataset, base_dir, task_id, limit)
    _refuse_file_as_huggingface(dataset, base_dir, task_id)
    from evalnb.data.hf_datasets import HFSpec, load_huggingface  # lazy: only Hugging Face datasets need it

    spec = HFSpec(
        path=_get(dataset, "path"),
        split=_get(dataset, "split") or default_split,
        name=_get(dataset, "name"),
        revision=_get(dataset, "revision"),
        max_rows=_get(dataset, "max_rows"),
        dataset_kwargs=_get(dataset, "dataset_kwargs") or {},
        data_files=_get(dataset, "data_files"),
    )
    return load_huggingface(
        spec,
        base_dir=base_dir,
        task_id=task_id,
        allow_private_hosts=allow_private_hosts,
        limit=limit,
        cache_dir=cache_dir or evalnb_home() / "hf-cache",
    )


def iter_rows(
    dataset: Any,
    *,
    base_dir: Path | None = None,
    task_id: str,
    default_split: str = "test",
    allow_private_hosts: bool = False,
    limit: int | None = None,
) -> Iterator[dict]:
    """`load_rows` as a stream: a local or uploaded JSONL/CSV file is parsed while it is read
    (a million rows never sit in memory together); other sources are loaded, then yielded.

    The same rows in the same order as `load_rows`, with the same errors (raised when the
    bad line is reached).
    """
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise DatasetError(f"task {task_id!r}: limit must be a non-negative integer (found {limit!r})")
    kind = dataset_kind(dataset)
    if kind == "inline":
        return iter(_inline_rows(dataset, task_id, limit))
    if kind == "file":
        path, fmt, source = _stored_file(dataset, task_id)
        return iter_file(path, fmt, source=source, limit=limit, hint=_UPLOAD_HINT)
    if kind == "local":
        path, fmt, given, encoding = _local_file(dataset, base_dir, task_id)
        try:
            _check_encoding(encoding)
        except LookupError:
            raise DatasetError(f"task {task_id!r}: {given}: unknown encoding {encoding!r}") from None
        return iter_file(path, fmt, source=f"task {task_id!r}: {given}", limit=limit, encoding=encoding,
                         hint=_LOCAL_HINT)
    return iter(load_rows(dataset, base_dir=base_dir, task_id=task_id, default_split=default_split,
                          allow_private_hosts=allow_private_hosts, limit=limit))


def _check_encoding(encoding: str | None) -> None:
    if encoding is not None:
        import codecs

        codecs.lookup(encoding)


_UPLOAD_HINT = ("uploaded files are read as UTF-8: convert it and upload it again, or read it "
                "as a local file with {path: ..., encoding: ...}")
_LOCAL_HINT = "if the file is in another encoding, name it in the dataset (e.g. encoding: latin-1)"


def dataset_kind(dataset: Any) -> Kind:
    """Which loader a declaration needs (see the module docstring for the rule)."""
    if _get(dataset, "rows") is not None:
        return "inline"
    if _get(dataset, "file_id") is not None:
        return "file"
    if str(_get(dataset, "source") or "").lower() == "huggingface":
        return "huggingface"
    if any(_get(dataset, key) is not None for key in HF_ONLY_FIELDS):
        return "huggingface"
    path = _get(dataset, "path")
    if _get(dataset, "format") is not None or (isinstance(path, str) and Path(path).suffix.lower() in LOCAL_SUFFIXES):
        return "local"
    return "huggingface"


def _inline_rows(dataset: Any, task_id: str, limit: int | None) -> list[dict]:
    """Copies of the rows written in the manifest (a plain dict declaration is checked here)."""
    import copy

    rows = _get(dataset, "rows")
    if not isinstance(rows, list):
        raise DatasetError(f"task {task_id!r}: dataset.rows must be a list of JSON objects")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DatasetError(f"task {task_id!r}: dataset.rows[{index}]: not a JSON object (found {type(row).__name__})")
    return copy.deepcopy(rows[:limit] if limit is not None else rows)


def _stored_file(dataset: Any, task_id: str) -> tuple[Path, str, str]:
    """(path, format, source for messages) of an uploaded dataset file."""
    file_id = _get(dataset, "file_id")
    try:
        path = upload_store.path_for(file_id)
        fmt = upload_store.file_format(file_id, _get(dataset, "format"))
        filename = upload_store.info(file_id)["filename"]
    except DatasetError as exc:
        raise DatasetError(f"task {task_id!r}: {exc}") from None
    return path, fmt, f"task {task_id!r}: {filename} ({file_id})"


def _load_file_store(dataset: Any, task_id: str, limit: int | None) -> list[dict]:
    path, fmt, source = _stored_file(dataset, task_id)
    return read_file(path, fmt, source=source, limit=limit, hint=_UPLOAD_HINT)


def _load_local(dataset: Any, base_dir: Path | None, task_id: str, limit: int | None) -> list[dict]:
    path, fmt, given, encoding = _local_file(dataset, base_dir, task_id)
    try:
        return read_file(path, fmt, source=f"task {task_id!r}: {given}", limit=limit, encoding=encoding,
                         hint=_LOCAL_HINT)
    except LookupError:
        raise DatasetError(f"task {task_id!r}: {given}: unknown encoding {encoding!r}") from None


def _local_file(dataset: Any, base_dir: Path | None, task_id: str) -> tuple[Path, str, str, str | None]:
    """(resolved path, format, the path as given, encoding) of a local dataset file."""
    given = _get(dataset, "path")
    if not isinstance(given, str) or not given:
        raise DatasetError(f"task {task_id!r}: the dataset needs a `file_id` or a `path`")
    path = Path(given).expanduser()
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    path = path.resolve()
    if not path.is_file():
        raise DatasetError(f"task {task_id!r}: dataset file not found: {path}")
    fmt = _get(dataset, "format") or infer_format(path.name)
    if fmt is None:
        raise DatasetError(f"task {task_id!r}: cannot infer the format of {given!r}; set format to 'jsonl' or 'csv'")
    return path, fmt, given, _get(dataset, "encoding")


def _refuse_file_as_huggingface(dataset: Any, base_dir: Path | None, task_id: str) -> None:
    """A local file given a Hugging Face field (``max_rows`` most often): say which, and the way out."""
    path = _get(dataset, "path")
    if not isinstance(path, str) or Path(path).suffix.lower() not in LOCAL_SUFFIXES:
        return
    given = [key for key in HF_ONLY_FIELDS if key != "split" and _get(dataset, key) is not None] or ["split"]
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = (base_dir or Path.cwd()) / candidate
    if candidate.is_file():
        raise DatasetError(
            f"task {task_id!r}: {path!r} is a local file, but {', '.join(given)} made the dataset a Hugging "
            "Face one; a local file takes only path, format and encoding (to evaluate fewer rows, pass "
            "max_samples= to evalnb.run)"
        )


def _get(dataset: Any, key: str) -> Any:
    """A field of a manifest model or a plain dict (None when absent)."""
    if isinstance(dataset, dict):
        return dataset.get(key)
    return getattr(dataset, key, None)
