"""Rows from JSONL, CSV and JSON bytes, with errors that name the file and the line.

Readers take an iterable of raw byte lines (an open binary file, or an HTTP stream) so the
same code serves local files, the file store, downloaded ``data_files`` and the files of a
local Hugging Face folder, and so a ``limit`` stops reading early: a broken line after the
last needed row is never seen.

Text is UTF-8 (a leading BOM is skipped) unless an ``encoding`` is given. An encoding whose
newline is the byte ``\\n`` (latin-1, cp1252, shift_jis, ...) is decoded line by line; any
other (utf-16, utf-32) is decoded by ``read_file`` as a whole text stream and fed on as UTF-8.
"""

from __future__ import annotations

import codecs
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


def read_file(
    path: Path, fmt: str, *, source: str, limit: int | None = None, encoding: str | None = None,
    hint: str = "", **options: Any,
) -> list[dict]:
    """Read a local file; ``source`` prefixes every error (e.g. "task 'qa': data/qa.jsonl").

    ``hint`` ends the "not valid UTF-8" error: what the user can do about it.
    """
    if encoding is not None and not byte_lines_work(encoding):
        with open(path, encoding=encoding, newline="") as text:
            try:
                lines = [line.encode("utf-8") for line in text]
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{source}: not valid {encoding} ({exc.reason})") from None
        return read_rows(lines, fmt, source=source, limit=limit, hint=hint, **options)
    with open(path, "rb") as raw:
        return read_rows(raw, fmt, source=source, limit=limit, encoding=encoding, hint=hint, **options)


def iter_file(
    path: Path, fmt: str, *, source: str, limit: int | None = None, encoding: str | None = None,
    hint: str = "",
) -> Iterator[dict]:
    """`read_file` a row at a time: JSONL and CSV are parsed as they are read, so a run over a
    million-row file holds only the rows in flight (other formats are read whole, then yielded).

    The file is opened when iteration starts and closed when it ends or the iterator is dropped.
    """
    if fmt not in ("jsonl", "csv") or (encoding is not None and not byte_lines_work(encoding)):
        yield from read_file(path, fmt, source=source, limit=limit, encoding=encoding, hint=hint)
        return
    if limit is not None and limit <= 0:
        return
    text = _Text(encoding, hint)
    with open(path, "rb") as raw:
        rows = iter_jsonl(raw, source=source, text=text) if fmt == "jsonl" else iter_csv(raw, source=source, text=text)
        yield from itertools.islice(rows, limit)


def byte_lines_work(encoding: str) -> bool:
    """Whether text in ``encoding`` can be split into lines on the byte b"\\n" (utf-8, latin-1, cp1252...)."""
    name = codecs.lookup(encoding).name
    return not name.startswith(("utf-16", "utf-32", "utf_16", "utf_32")) and "\n".encode(name) == b"\n"


def read_rows(
    lines: Iterable[bytes],
    fmt: str,
    *,
    source: str,
    limit: int | None = None,
    delimiter: str = ",",
    field: str | None = None,
    encoding: str | None = None,
    hint: str = "",
) -> list[dict]:
    """Parse byte lines in ``fmt``, reading no further than ``limit`` rows need.

    ``fmt`` "json" is a JSON array (or an object holding one under ``field``); "json_or_lines"
    sniffs the first non-blank line and reads a JSON array or JSON Lines (as `datasets` does).
    """
    if limit is not None and limit <= 0:
        return []
    text = _Text(encoding, hint)
    if fmt == "json_or_lines":
        lines, fmt = _sniff_json(lines, field)
    if fmt == "jsonl":
        rows: Iterator[dict] = iter_jsonl(lines, source=source, text=text)
    elif fmt == "csv":
        rows = iter_csv(lines, source=source, delimiter=delimiter, text=text)
    elif fmt == "json":
        rows = iter(read_json(lines, source=source, field=field, text=text))
    else:
        raise DatasetError(f"{source}: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    with gc_paused():
        return list(itertools.islice(rows, limit))


class _Text:
    """How byte lines become text: the encoding, and what its decoding error says."""

    __slots__ = ("encoding", "hint")

    def __init__(self, encoding: str | None, hint: str) -> None:
        self.encoding = codecs.lookup(encoding).name if encoding else "utf-8"
        self.hint = hint

    def error(self, where: str, exc: UnicodeDecodeError) -> DatasetError:
        name = "UTF-8" if self.encoding == "utf-8" else self.encoding
        hint = f"; {self.hint}" if self.hint and self.encoding == "utf-8" else ""
        return DatasetError(f"{where}: not valid {name} (byte {exc.start + 1}){hint}")


_UTF8 = _Text(None, "")


def _sniff_json(lines: Iterable[bytes], field: str | None) -> tuple[Iterable[bytes], str]:
    """A JSON array (or ``field`` given) -> "json", else "jsonl"; the lines read are put back."""
    lines = iter(lines)
    head: list[bytes] = []
    for line in lines:
        head.append(line)
        if line.strip(b" \t\r\n\xef\xbb\xbf"):
            break
    first = head[-1].lstrip(b" \t\xef\xbb\xbf") if head else b""
    fmt = "json" if first.startswith(b"[") or field is not None else "jsonl"
    return itertools.chain(head, lines), fmt


_DECODER = json.JSONDecoder()


def iter_jsonl(lines: Iterable[bytes], *, source: str, text: _Text = _UTF8) -> Iterator[dict]:
    """One JSON object per non-blank line; split on b"\\n" only (U+2028 inside strings is fine)."""
    loads = _DECODER.decode  # json.loads of a str without its per-call checks
    encoding = text.encoding
    for lineno, raw in enumerate(lines, 1):
        if lineno == 1 and raw.startswith(_BOM):
            raw = raw[3:]
        try:
            value = loads(raw.decode(encoding))
        except UnicodeDecodeError as exc:
            raise text.error(f"{source} line {lineno}", exc) from None
        except json.JSONDecodeError as exc:
            if not raw.strip():
                continue
            raise DatasetError(f"{source} line {lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        if type(value) is not dict:
            raise DatasetError(f"{source} line {lineno}: not a JSON object (found {_type_name(value)})")
        yield value


def iter_csv(lines: Iterable[bytes], *, source: str, delimiter: str = ",", text: _Text = _UTF8) -> Iterator[dict]:
    """Header row first; every value is a string; a ragged row names its missing/extra fields."""
    physical = _decoded_lines(lines, source, text)
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


def read_json(lines: Iterable[bytes], *, source: str, field: str | None = None, text: _Text = _UTF8) -> list[dict]:
    """A whole-file JSON array of objects, or an object whose ``field`` holds that array."""
    data = b"".join(lines)
    if data.startswith(_BOM):
        data = data[3:]
    try:
        value = json.loads(data.decode(text.encoding))
    except UnicodeDecodeError as exc:
        raise text.error(source, exc) from None
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


def _decoded_lines(lines: Iterable[bytes], source: str, text: _Text) -> Iterator[str]:
    encoding = text.encoding
    for lineno, raw in enumerate(lines, 1):
        if lineno == 1 and raw.startswith(_BOM):
            raw = raw[3:]
        try:
            yield raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise text.error(f"{source} line {lineno}", exc) from None


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
