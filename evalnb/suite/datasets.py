"""The four forms a manifest ``dataset`` takes (SPEC §3 and the Manifest decisions).

- **Which form.** ``{"rows": [...]}`` is rows written in the manifest (an evalnb extension,
  `InlineDataset`). ``{"file_id", "format"?}`` is an uploaded file. Otherwise a ``dataset`` is
  Hugging Face when it has ``source`` or any Hugging Face-only key (``name``, ``split``,
  ``revision``, ``max_rows``, ``dataset_kwargs``, ``data_files``); else it is a local file when
  it has ``format`` or its ``path`` ends in ``.jsonl``, ``.ndjson``, ``.csv`` or ``.json`` (any
  case); any other ``path`` is Hugging Face (a repo id such as ``org/name``, a builder such as
  ``json``, or a local dataset folder). See ``dataset_kind``; ``evalnb.data.loaders`` agrees.
- **Split.** A Hugging Face dataset without ``split`` gets ``"test"`` as a task dataset and
  ``"train"`` as a few-shot dataset, filled in at validation (``with_split``) so the canonical
  form is explicit. ``HuggingFaceDataset.split`` built directly in Python may stay ``None``: the
  loader's ``default_split`` then applies.
- **Builder mode.** ``path`` ``"json"``/``"csv"`` needs ``data_files`` (top level or in
  ``dataset_kwargs``), whose values must be http(s) URLs with a host. A host that is an unsafe
  address in any spelling (loopback, private, link-local, reserved) or ``localhost`` is refused
  here; host names are resolved and checked when rows are loaded (``evalnb.data.url_safety``).
- **Inline rows** are held to the rules a file's rows meet: each is a JSON object (``not a JSON
  object (found list)``, as a JSONL line that is not one), its values JSON values, 1 to
  ``MAX_ROWS`` of them (the cap a Hugging Face ``max_rows`` has; an empty list is an error here,
  as an empty file is for ``Suite.validate()``). They are part of the manifest, so
  ``suite.version`` changes when a row does.
- **Encoding.** A local file may name its text ``encoding`` (default UTF-8): an evalnb
  extension, like the local file form itself; the name must be one Python knows.
"""

from __future__ import annotations

import codecs
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Discriminator, Field, Tag, WithJsonSchema
from pydantic_core import InitErrorDetails

from evalnb.suite._validation import ManifestModel, NonEmptyStr, custom_error, problem, show_value, union_message

__all__ = [
    "MAX_HF_ROWS",
    "FileDataset",
    "LocalDataset",
    "HuggingFaceDataset",
    "InlineDataset",
    "Dataset",
    "DATASET_TAGS",
    "dataset_kind",
    "with_split",
]

MAX_HF_ROWS = 1_000_000
MAX_ROWS = MAX_HF_ROWS  # inline rows: the one row cap SPEC §2.2 states
LOCAL_FILE_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".json")  # as evalnb.data.loaders
HF_ONLY_KEYS = frozenset({"source", "name", "split", "revision", "max_rows", "dataset_kwargs", "data_files"})
BUILDER_PATHS = frozenset({"json", "csv"})

DatasetFormat = Literal["jsonl", "csv"]


class FileDataset(ManifestModel):
    """An uploaded file (``evalnb.data.upload_store``); ``format`` is inferred from its name if omitted."""

    file_id: NonEmptyStr
    format: DatasetFormat | None = None

    @classmethod
    def _unknown_field(cls, key: str) -> str:
        if key == "path":
            return "unknown field; a dataset has either file_id or path, not both"
        return "unknown field; a file_id dataset takes only file_id and format"


def _known_encoding(value: str) -> str:
    try:
        codecs.lookup(value)
    except LookupError:
        raise custom_error("unknown_encoding", f"unknown encoding {value!r} (e.g. utf-8, latin-1, cp1252, utf-16)") from None
    return value


Encoding = Annotated[NonEmptyStr, AfterValidator(_known_encoding)]


class LocalDataset(ManifestModel):
    """A local JSONL/CSV file, relative to the manifest's folder (an evalnb extension)."""

    path: NonEmptyStr
    format: DatasetFormat | None = None
    encoding: Encoding | None = Field(
        default=None, description="the file's text encoding, e.g. latin-1 (default utf-8); an evalnb extension"
    )

    @classmethod
    def _unknown_field(cls, key: str) -> str:
        return "unknown field; a local file dataset takes only path, format and encoding"


def _json_row(value: Any) -> Any:
    """A row is a JSON object whose values are JSON values (what a JSONL line holds)."""
    if not isinstance(value, dict):
        raise custom_error("row_type", f"not a JSON object (found {_type_name(value)})")
    for key, item in value.items():
        if not isinstance(key, str):
            raise custom_error("row_key", f"field names must be strings (found {show_value(key)})")
        where = _not_json(item)
        if where is not None:
            path, bad = where
            raise custom_error("row_value", f"field {key + path!r} must be a string, number, boolean, null, list "
                                            f"or object (found {_type_name(bad)})")
    return value


def _not_json(value: Any, path: str = "") -> tuple[str, Any] | None:
    """(path below the field, value) of the first part of ``value`` that JSON cannot hold."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if value == value and value not in (float("inf"), float("-inf")) else (path, value)
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _not_json(item, f"{path}.{i}")
            if found is not None:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}.{key}", key
            found = _not_json(item, f"{path}.{key}")
            if found is not None:
                return found
        return None
    return path, value


def _type_name(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)  # nan, inf
    return "null" if value is None else type(value).__name__


Row = Annotated[Any, AfterValidator(_json_row), WithJsonSchema({"type": "object"})]


class InlineDataset(ManifestModel):
    """Rows written in the manifest itself (an evalnb extension): ``{"rows": [{...}, ...]}``."""

    rows: Annotated[list[Row], Field(min_length=1, max_length=MAX_ROWS)] = Field(
        description=f"the rows themselves, 1 to {MAX_ROWS:,} JSON objects; an evalnb extension "
        "(the gateway takes file_id and Hugging Face datasets)",
    )

    @classmethod
    def _unknown_field(cls, key: str) -> str:
        return "unknown field; an inline dataset takes only rows"


_DATA_FILES_WORDS = "a URL, a list of URLs or a mapping of split name to URL(s)"
DataFiles = Annotated[str | list[str] | dict[str, str | list[str]], union_message(_DATA_FILES_WORDS)]


class HuggingFaceDataset(ManifestModel):
    """A Hugging Face dataset: a repo id, a builder (``json``/``csv`` + ``data_files``) or a folder."""

    source: Literal["huggingface"] = "huggingface"
    path: NonEmptyStr
    name: str | None = None
    split: NonEmptyStr | None = None  # None: the loader's default ("test", few-shot "train")
    revision: str | None = None
    max_rows: Annotated[int, Field(ge=1, le=MAX_HF_ROWS)] | None = None
    dataset_kwargs: dict[str, Any] | None = None
    data_files: DataFiles | None = None

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        path = data.get("path")
        if not isinstance(path, str) or path not in BUILDER_PATHS:
            return []
        kwargs = data.get("dataset_kwargs")
        nested = kwargs.get("data_files") if isinstance(kwargs, dict) else None
        if data.get("data_files") is None and nested is None:
            return [
                problem(
                    ("data_files",),
                    "missing",
                    f"required when path is {path!r} (builder mode): give data_files "
                    "here or in dataset_kwargs",
                )
            ]
        problems = []
        nested_loc = ("dataset_kwargs", "data_files")
        if nested is not None and not isinstance(nested, (str, list, dict)):
            msg = f"must be {_DATA_FILES_WORDS} (found {show_value(nested)})"
            problems.append(problem(nested_loc, "type_error", msg))
        for loc, files in ((("data_files",), data.get("data_files")), (nested_loc, nested)):
            bad = _non_http_urls(files)
            if bad:
                msg = f"builder data_files must be http(s) URLs (found {show_value(bad[0])})"
                problems.append(problem(loc, "url_scheme", msg))
                continue
            for where, message in _unsafe_hosts(files):
                problems.append(problem((*loc, *where), "url_host", message))
        return problems


Dataset = Annotated[
    Annotated[InlineDataset, Tag("inline")]
    | Annotated[FileDataset, Tag("file")]
    | Annotated[LocalDataset, Tag("local")]
    | Annotated[HuggingFaceDataset, Tag("huggingface")],
    Discriminator(
        lambda value: dataset_kind(value),
        custom_error_type="dataset_form",
        custom_error_message=(
            'must be {"rows": [...]} (rows written here), {"file_id": ...} (an uploaded file), {"path": "data/x.jsonl"} (a local '
            'file) or a Hugging Face dataset {"path": "org/name", ...}'
        ),
    ),
]
# The union's tags; a model with a `Dataset` field lists them in `_tagged_unions`.
DATASET_TAGS = {"inline": InlineDataset, "file": FileDataset, "local": LocalDataset, "huggingface": HuggingFaceDataset}


def dataset_kind(value: Any) -> Literal["inline", "file", "local", "huggingface"] | None:
    """Which dataset form a manifest ``dataset`` value is (the rule in the module docstring)."""
    if isinstance(value, BaseModel):
        return next((tag for tag, model in DATASET_TAGS.items() if isinstance(value, model)), None)
    if not isinstance(value, dict):
        return None
    if "rows" in value:
        return "inline"
    if "file_id" in value:
        return "file"
    if HF_ONLY_KEYS & value.keys():
        return "huggingface"
    if "format" in value:
        return "local"
    path = value.get("path")
    if isinstance(path, str) and path.lower().endswith(LOCAL_FILE_SUFFIXES):
        return "local"
    return "huggingface" if "path" in value else None


def with_split(dataset: Any, split: str) -> Any:
    """A raw Hugging Face dataset dict with its default split filled in (others unchanged)."""
    if dataset_kind(dataset) != "huggingface" or not isinstance(dataset, dict):
        return dataset
    return dataset if dataset.get("split") is not None else {**dataset, "split": split}


def _unsafe_hosts(files: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """(location under data_files, message) for each URL whose host is refused without DNS:
    loopback, private, link-local or reserved addresses in any spelling, and ``localhost``.
    Host names are resolved and checked again when rows are loaded."""
    from evalnb.data.url_safety import check_url_literal
    from evalnb.errors import DatasetError

    entries: list[tuple[tuple[str | int, ...], Any]] = []
    if isinstance(files, dict):
        for split, value in files.items():
            if isinstance(value, list):
                entries += [((split, i), v) for i, v in enumerate(value)]
            else:
                entries.append(((split,), value))
    elif isinstance(files, list):
        entries = [((i,), v) for i, v in enumerate(files)]
    elif files is not None:
        entries = [((), files)]
    found = []
    for where, url in entries:
        if isinstance(url, str):
            try:
                check_url_literal(url)
            except DatasetError as exc:
                found.append((where, str(exc)))
    return found


def _non_http_urls(files: Any) -> list[Any]:
    """The entries of a ``data_files`` value that are not http(s) URLs with a host."""
    from urllib.parse import urlsplit

    if isinstance(files, dict):
        values = [v for value in files.values() for v in (value if isinstance(value, list) else [value])]
    elif isinstance(files, list):
        values = files
    else:
        values = [files] if files is not None else []
    bad = []
    for value in values:
        if not isinstance(value, str):
            continue  # a type error, reported by the field
        try:
            parts = urlsplit(value)
            ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        except ValueError:
            ok = False
        if not ok:
            bad.append(value)
    return bad
