"""Rows from JSONL, CSV and JSON bytes, with errors that name the file and the line.

Readers take an iterable of raw byte lines (an open binary file, or an HTTP stream) so the
same code serves local files, the file store and downloaded ``data_files``, and so a
``limit`` stops reading early: a broken line after the last needed row is never seen.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from evalnb._gc import gc_paused
from evalnb.errors import DatasetError

FORMATS = ("jsonl", "csv", "json")
_SUFFIX_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".json": "json"}
_BOM = b"\xef\xbb\xbf"


def infer_format(filename: str) -> str | None:
    """The format implied by a file name's suffix (``.jsonl``/``.ndjson``, ``.csv``, ``.json``)."""
    return _SUFFIX_FORMATS.get(Path(filename).suffix.lower())


def read_file(path: Path, fmt: str, *, source: str, limit: int | None = None, **options: Any) -> list[dict]:
    """Read a local file; ``source`` prefixes every error (e.g. "task 'qa': data/qa.jsonl")."""
    with open(path, "rb") as lines:
        return read_rows(lines, fmt, source=source, limit=limit, **options)


def read_rows(
    lines: Iterable[bytes],
    fmt: str,
    *,
    source: str,
    limit: int | None = None,
    delimiter: str = ",",
    field: str | None = None,
) -> list[dict]:
    """Parse byte lines in ``fmt``, reading no further than ``limit`` rows need."""
    if limit is not None and limit <= 0:
        return []
    if fmt == "jsonl":
        rows: Iterator[dict] = iter_jsonl(lines, source=source)
    elif fmt == "csv":
        rows = iter_csv(lines, source=source, delimiter=delimiter)
    elif fmt == "json":
        rows = iter(read_json(lines, source=source, field=field))
    else:
        raise DatasetError(f"{source}: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    with gc_paused():
        return list(itertools.islice(rows, limit))


def iter_jsonl(lines: Iterable[bytes], *, source: str) -> Iterator[dict]:
    """One JSON object per non-blank line; split on b"\\n" only (U+2028 inside strings is fine)."""
    loads = json.loads
    for lineno, raw in enumerate(lines, 1):
        if lineno == 1 and raw.startswith(_BOM):
            raw = raw[3:]
        try:
            value = loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{source} line {lineno}: not valid UTF-8 (byte {exc.start + 1})") from None
        except json.JSONDecodeError as exc:
            if not raw.strip():
                continue
            raise DatasetError(f"{source} line {lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        if type(value) is not dict:
            raise DatasetError(f"{source} line {lineno}: not a JSON object (found {_type_name(value)})")
        yield value


def iter_csv(lines: Iterable[bytes], *, source: str, delimiter: str = ",") -> Iterator[dict]:
    """Header row first; every value is a string; a ragged row names its missing/extra fields."""
    physical = _decoded_lines(lines, source)
    reader = csv.reader(physical, delimiter=delimiter)
    header: list[str] | None = None
    end = 0
    while True:
        start = end + 1
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DatasetError(f"{source} line {reader.line_num}: {exc}") from None
        end = reader.line_num
        if not record:
            continue
        if header is None:
            header = _check_header(record, source, start)
            continue
        if len(record) != len(header):
            raise DatasetError(f"{source} line {start}: {_ragged(record, header)}")
        yield dict(zip(header, record))


def read_json(lines: Iterable[bytes], *, source: str, field: str | None = None) -> list[dict]:
    """A whole-file JSON array of objects, or an object whose ``field`` holds that array."""
    data = b"".join(lines)
    if data.startswith(_BOM):
        data = data[3:]
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{source}: not valid UTF-8 (byte {exc.start + 1})") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{source} line {exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    if field is not None:
        if not isinstance(value, dict) or field not in value:
            raise DatasetError(f"{source}: expected a JSON object with a {field!r} field")
        value = value[field]
    if not isinstance(value, list):
        raise DatasetError(f"{source}: expected a JSON array of objects (found {_type_name(value)})")
    for index, item in enumerate(value):
        if type(item) is not dict:
            raise DatasetError(f"{source} item {index}: not a JSON object (found {_type_name(item)})")
    return value


def _decoded_lines(lines: Iterable[bytes], source: str) -> Iterator[str]:
    for lineno, raw in enumerate(lines, 1):
        if lineno == 1 and raw.startswith(_BOM):
            raw = raw[3:]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{source} line {lineno}: not valid UTF-8 (byte {exc.start + 1})") from None


def _check_header(record: list[str], source: str, lineno: int) -> list[str]:
    seen: set[str] = set()
    for name in record:
        if name in seen:
            raise DatasetError(f"{source} line {lineno}: duplicate column {name!r} in the header row")
        seen.add(name)
    return record


def _ragged(record: list[str], header: list[str]) -> str:
    counts = f"{len(record)} values but the header has {len(header)} columns"
    if len(record) < len(header):
        return f"{counts}; missing: {', '.join(header[len(record):])}"
    extra = ", ".join(repr(v if len(v) <= 40 else v[:37] + "...") for v in record[len(header) :])
    return f"{counts}; extra values: {extra}"


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__
