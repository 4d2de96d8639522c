"""A local stand-in for the gateway's ``/files`` store (purpose ``evals``).

Datasets and grader/preprocessor ``.py`` files are copied into ``<evalnb home>/files/``
and referenced from manifests by id, as with the gateway. Ids are content-addressed
(hash of purpose, file name and bytes), so uploading the same file again returns the same
id and the suite version, which hashes the manifest, stays stable across notebook re-runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from evalnb.data.row_readers import infer_format
from evalnb.errors import DatasetError
from evalnb.home import evalnb_home

PURPOSES = frozenset({"assistants", "batch", "fine-tune", "vision", "user_data", "evals"})
# Gateway ids are opaque (``file-abc123``, ``file_dataset123``); any id in this safe charset
# is looked up, anything else (slashes, dots, ``..``) is refused before touching the disk.
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_CHUNK = 1 << 20


def upload(path: str | os.PathLike[str], purpose: str = "evals") -> str:
    """Copy a file into the store and return its id (``file-<24 hex>``)."""
    source = Path(path).expanduser()
    if not source.is_file():
        raise DatasetError(f"cannot upload {str(source)!r}: not a file")
    if purpose not in PURPOSES:
        raise DatasetError(f"cannot upload {source.name!r}: unknown purpose {purpose!r}; use one of {sorted(PURPOSES)}")
    folder = _folder()
    digest = hashlib.sha256(f"{purpose}\0{source.name}\0".encode())
    size = 0
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=".upload-")
    try:
        with open(source, "rb") as src, os.fdopen(fd, "wb") as dst:
            while chunk := src.read(_CHUNK):
                digest.update(chunk)
                dst.write(chunk)
                size += len(chunk)
        file_id = "file-" + digest.hexdigest()[:24]
        if (folder / f"{file_id}.json").is_file():
            return file_id  # same purpose, name and bytes: already stored
        os.replace(tmp_name, folder / file_id)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    meta = {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": source.name,
        "purpose": purpose,
        "expires_at": None,
    }
    _write_json(folder / f"{file_id}.json", meta)  # written last: its presence marks a complete upload
    return file_id


def path_for(file_id: str) -> Path:
    """Where the stored bytes of ``file_id`` live."""
    info(file_id)
    return _folder() / file_id


def info(file_id: str) -> dict[str, Any]:
    """The file's metadata: id, object, bytes, created_at, filename, purpose, expires_at."""
    _check_id(file_id)
    meta_path = _folder() / f"{file_id}.json"
    if not meta_path.is_file() or not (_folder() / file_id).is_file():
        raise DatasetError(f"unknown file id {file_id!r}: upload the file first with evalnb.data.upload(path)")
    return json.loads(meta_path.read_text(encoding="utf-8"))


def list_files() -> list[dict[str, Any]]:
    """Metadata of every stored file, oldest first."""
    found = []
    for meta_path in _folder().glob("*.json"):
        if _SAFE_ID.fullmatch(meta_path.stem) and (meta_path.parent / meta_path.stem).is_file():
            found.append(json.loads(meta_path.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: (m.get("created_at", 0), m.get("id", "")))


def delete(file_id: str) -> None:
    """Remove a stored file and its metadata."""
    info(file_id)
    (_folder() / f"{file_id}.json").unlink()
    (_folder() / file_id).unlink(missing_ok=True)


def open_file(file_id: str) -> IO[bytes]:
    """Open the stored bytes for reading (binary)."""
    return open(path_for(file_id), "rb")


def read_text(file_id: str) -> str:
    """The stored file as UTF-8 text (for grader and preprocessor ``.py`` sources)."""
    data = path_for(file_id).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        name = info(file_id)["filename"]
        raise DatasetError(f"file {file_id!r} ({name}): not valid UTF-8 (byte {exc.start + 1})") from None


def file_format(file_id: str, declared: str | None = None) -> str:
    """``declared`` if given, else the format implied by the uploaded file's name."""
    if declared:
        return declared
    name = info(file_id)["filename"]
    fmt = infer_format(name)
    if fmt is None:
        raise DatasetError(
            f"cannot infer the format of file {file_id!r} ({name}) from its name; "
            "set the dataset's format to 'jsonl' or 'csv'"
        )
    return fmt


def _check_id(file_id: object) -> None:
    if not isinstance(file_id, str) or not _SAFE_ID.fullmatch(file_id):
        raise DatasetError(f"malformed file id {file_id!r}: expected letters, digits, '_' and '-' only")


def _folder() -> Path:
    folder = evalnb_home() / "files"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _write_json(path: Path, value: dict[str, Any]) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".meta-")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(value, out, indent=1)
    os.replace(tmp_name, path)
