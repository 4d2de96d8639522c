"""The CSV and JSON files of a local Hugging Face dataset folder, read as written.

`datasets` decides which files make a split (a README ``configs:`` block, or its file-name
conventions); reading them through it would also type the values its way — pandas infers
numbers in a CSV (``007`` becomes 7, a column with a gap becomes floats), pyarrow turns ISO
date strings in JSON into timestamps — so a folder's rows would differ from the same file
given as a local dataset. Here the resolved files go through evalnb's own readers instead:
CSV values are strings, JSON keeps its types, exactly as ``{path: data/x.csv}`` reads them.

Only plain files with the options those readers have (``sep``/``delimiter``, ``encoding``,
``field``) are read here; a folder whose config asks for anything else (``skiprows``,
declared ``features``, compressed files, ...) is left to `datasets` (`read_split_files`
returns None).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from evalnb.data.row_readers import read_file
from evalnb.errors import DatasetError

__all__ = ["read_split_files"]

_SUFFIXES = {"csv": (".csv",), "json": (".json", ".jsonl", ".ndjson")}
# config fields the readers honour, plus those of every BuilderConfig
_READ = {"csv": {"sep", "delimiter", "encoding"}, "json": {"encoding", "field"}}
_BASE = {"name", "version", "data_dir", "data_files", "description", "features"}
# settings that do not change what is read
_HARMLESS = {"use_threads", "block_size", "chunksize", "newlines_in_values", "on_mixed_types", "parse_agent_traces",
             "verbose", "memory_map", "error_bad_lines", "warn_bad_lines", "encoding_errors", "on_bad_lines"}


def read_split_files(builder: Any, split: str, limit: int | None, label: str) -> list[dict] | None:
    """Rows of ``split`` read from the builder's local CSV/JSON files, or None to leave it to `datasets`."""
    kind = getattr(builder, "name", None)
    options = _options(builder, kind)
    if options is None:
        return None
    files = {str(name): list(paths) for name, paths in (builder.config.data_files or {}).items()}
    if split not in files:
        raise DatasetError(f"{label}: split {split!r} not found; available splits: {', '.join(files) or 'none'}")
    paths = [Path(p) for p in files[split]]
    if not all(p.suffix.lower() in _SUFFIXES[kind] and p.is_file() for p in paths):
        return None  # compressed, remote or unusual files: datasets knows how
    rows: list[dict] = []
    for path in paths:
        remaining = None if limit is None else limit - len(rows)
        if remaining is not None and remaining <= 0:
            break
        fmt = "csv" if kind == "csv" else "json_or_lines"
        rows += read_file(path, fmt, source=f"{label} split {split!r}: {path.name}", limit=remaining,
                          hint="name its encoding in the README configs block (encoding: latin-1)", **options)
    return rows


def _options(builder: Any, kind: str | None) -> dict[str, Any] | None:
    """The reader options of the builder's config, or None when it sets one the readers lack."""
    if kind not in _READ:
        return None
    config = builder.config
    if getattr(config, "features", None) is not None or getattr(builder.info, "features", None) is not None:
        return None  # declared types: the dataset's author asked datasets to apply them
    options: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name in _BASE or field.name in _HARMLESS:
            continue
        default = field.default if field.default is not dataclasses.MISSING else None
        if field.name in _READ[kind]:
            if field.name == "delimiter" and value is not None:
                options["delimiter"] = value
            elif field.name == "sep" and value != default:
                options.setdefault("delimiter", value)
            elif field.name == "encoding" and value is not None and str(value).lower() not in ("utf-8", "utf8"):
                options["encoding"] = value
            elif field.name == "field" and value is not None:
                options["field"] = value
        elif value != default:
            return None
    delimiter = options.get("delimiter")
    if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1):
        return None  # a regex separator: pandas' job
    return options
