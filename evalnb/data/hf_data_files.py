"""Hugging Face "builder mode": ``path: json`` or ``csv`` with ``data_files`` URLs.

Read here rather than through ``datasets``: every URL (and every redirect) is checked
before a byte is fetched, rows stream so ``max_rows`` stops the download early, JSON values
arrive exactly as written (pyarrow's JSON reader turns ISO-date strings into timestamps),
CSV values stay strings as for uploaded files, and no extra HTTP stack (aiohttp) is needed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import closing
from typing import Any

from evalnb.data.url_stream import iter_url_lines
from evalnb.data.row_readers import byte_lines_work, read_rows
from evalnb.data.url_safety import check_public_url
from evalnb.errors import DatasetError

BUILDERS = ("json", "csv")
_OPTIONS = {"json": {"field"}, "csv": {"sep", "delimiter"}}


def normalise_data_files(data_files: Any, split: str, label: str) -> dict[str, list[str]]:
    """``{split: [files]}``; a bare string or list of files is taken as the requested split."""
    if isinstance(data_files, str):
        data_files = {split: [data_files]}
    elif isinstance(data_files, (list, tuple)):
        data_files = {split: list(data_files)}
    if not isinstance(data_files, Mapping) or not data_files:
        raise DatasetError(f"{label}: data_files must be a URL, a list of URLs or a {{split: URL(s)}} mapping")
    result: dict[str, list[str]] = {}
    for name, files in data_files.items():
        files = [files] if isinstance(files, str) else files
        if not isinstance(files, (list, tuple)) or not files or not all(isinstance(f, str) and f for f in files):
            raise DatasetError(f"{label}: data_files[{name!r}] must be a URL or a non-empty list of URLs")
        result[str(name)] = list(files)
    return result


def load_builder_rows(
    builder: str,
    data_files: Any,
    options: dict[str, Any],
    *,
    split: str,
    label: str,
    limit: int | None,
    allow_private: bool,
) -> list[dict]:
    """Rows of ``split``; all URLs of all splits are checked before anything is fetched."""
    if data_files is None:
        raise DatasetError(f"{label}: data_files is required when path is {builder!r}")
    files = normalise_data_files(data_files, split, label)
    for urls in files.values():
        for url in urls:
            try:
                check_public_url(url, allow_private=allow_private)
            except DatasetError as exc:
                raise DatasetError(f"{label}: data_files: {exc}") from None
    if split not in files:
        raise DatasetError(f"{label}: split {split!r} not found; available splits: {', '.join(files)}")
    reader_options = _reader_options(builder, options, label)
    rows: list[dict] = []
    for url in files[split]:
        remaining = None if limit is None else limit - len(rows)
        if remaining is not None and remaining <= 0:
            break
        with closing(iter_url_lines(url, allow_private=allow_private)) as lines:
            rows.extend(_read(builder, lines, f"{label}: {url}", remaining, reader_options))
    return rows


def _read(builder: str, lines: Iterator[bytes], source: str, limit: int | None, options: dict[str, Any]) -> list[dict]:
    # json: a JSON array (or an object holding one under `field`) or JSON Lines, sniffed
    return read_rows(lines, "csv" if builder == "csv" else "json_or_lines", source=source, limit=limit, **options)


def _reader_options(builder: str, options: dict[str, Any], label: str) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in options.items():
        if key == "encoding":
            try:
                usable = isinstance(value, str) and byte_lines_work(value)
            except LookupError:
                raise DatasetError(f"{label}: dataset_kwargs.encoding {value!r}: unknown encoding") from None
            if not usable:
                raise DatasetError(f"{label}: dataset_kwargs.encoding {value!r}: not supported for data_files URLs "
                                   "(use an encoding whose newline is the byte \\n, e.g. utf-8 or latin-1)")
            result["encoding"] = value
        elif key in _OPTIONS[builder]:
            if not isinstance(value, str) or (key != "field" and len(value) != 1):
                expected = "string" if key == "field" else "single character"
                raise DatasetError(f"{label}: dataset_kwargs.{key} must be a {expected}")
            result["delimiter" if key == "sep" else key] = value
        else:
            allowed = ", ".join(sorted(_OPTIONS[builder] | {"encoding", "data_files"}))
            raise DatasetError(
                f"{label}: dataset_kwargs.{key} is not supported for path {builder!r} (supported: {allowed})"
            )
    return result
