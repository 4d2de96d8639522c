"""The local file store: upload, look-up, metadata, deletion and id safety."""

from __future__ import annotations

import json
import re
import time

import pytest

from evalnb.data import path_for, upload, upload_store
from evalnb.errors import DatasetError


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_bytes(b'{"q": "2+2?", "a": "4"}\n{"q": "caf\xc3\xa9", "a": "x"}\n')
    return path


def test_upload_round_trip(data_file, home):
    before = int(time.time())
    file_id = upload(data_file)
    assert re.fullmatch(r"file-[0-9a-f]{24}", file_id)
    stored = path_for(file_id)
    assert stored == home / "files" / file_id
    assert stored.read_bytes() == data_file.read_bytes()
    meta = upload_store.info(file_id)
    assert meta["id"] == file_id
    assert meta["object"] == "file"
    assert meta["filename"] == "qa.jsonl"
    assert meta["bytes"] == data_file.stat().st_size
    assert meta["purpose"] == "evals"
    assert isinstance(meta["created_at"], int) and before <= meta["created_at"] <= int(time.time())
    assert json.loads((home / "files" / f"{file_id}.json").read_text()) == meta


def test_same_file_same_id_other_name_or_purpose_other_id(data_file, tmp_path):
    first = upload(data_file)
    assert upload(data_file) == first
    copy = tmp_path / "other.jsonl"
    copy.write_bytes(data_file.read_bytes())
    assert upload(copy) != first
    assert upload(data_file, purpose="user_data") != first
    assert len(upload_store.list_files()) == 3


def test_changed_content_gets_a_new_id(data_file):
    first = upload(data_file)
    data_file.write_bytes(data_file.read_bytes() + b'{"q": "new"}\n')
    second = upload(data_file)
    assert second != first
    assert path_for(first).read_bytes() != path_for(second).read_bytes()


def test_list_and_delete(data_file, tmp_path):
    py = tmp_path / "grader.py"
    py.write_text("def grade(sample, item):\n    return 1\n")
    a, b = upload(data_file), upload(py)
    assert {m["id"] for m in upload_store.list_files()} == {a, b}
    upload_store.delete(a)
    assert [m["id"] for m in upload_store.list_files()] == [b]
    with pytest.raises(DatasetError, match=f"unknown file id '{a}'"):
        path_for(a)
    with pytest.raises(DatasetError, match="unknown file id"):
        upload_store.delete(a)


def test_list_files_is_empty_in_a_fresh_home():
    assert upload_store.list_files() == []


def test_read_text_and_open_file(tmp_path):
    py = tmp_path / "grader.py"
    py.write_text("# é\ndef grade(sample, item):\n    return True\n", encoding="utf-8")
    file_id = upload(py)
    assert upload_store.read_text(file_id) == py.read_text(encoding="utf-8")
    with upload_store.open_file(file_id) as handle:
        assert handle.read() == py.read_bytes()


def test_read_text_rejects_invalid_utf8(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"x = 1\n\xff\n")
    file_id = upload(bad)
    with pytest.raises(DatasetError, match=r"bad\.py.*not valid UTF-8 \(byte 7\)"):
        upload_store.read_text(file_id)


@pytest.mark.parametrize(
    "bad_id",
    ["../x", "..", "../../etc/passwd", "file-../../x", "a/b", "/etc/passwd", "file-abc.json", ".hidden", "", " file-1", "x" * 200,
     "file-\x00"],
)
def test_malformed_ids_are_refused_and_named(bad_id):
    for call in (path_for, upload_store.info, upload_store.delete, upload_store.read_text, upload_store.open_file):
        with pytest.raises(DatasetError, match="malformed file id") as info:
            call(bad_id)
        assert repr(bad_id) in str(info.value)


def test_non_string_id_is_refused():
    with pytest.raises(DatasetError, match="malformed file id None"):
        path_for(None)  # type: ignore[arg-type]


def test_traversal_cannot_reach_files_outside_the_store(home, data_file):
    upload(data_file)
    secret = home / "secret.json"
    secret.write_text('{"id": "x"}')
    with pytest.raises(DatasetError):
        upload_store.info("../secret")


@pytest.mark.parametrize("gateway_id", ["file-abc123", "file_dataset123", "file-000000000000000000000000"])
def test_unknown_well_formed_ids_say_upload_first(gateway_id):
    with pytest.raises(DatasetError, match=f"unknown file id '{gateway_id}'.*upload"):
        path_for(gateway_id)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.jsonl", "jsonl"), ("a.ndjson", "jsonl"), ("A.JSONL", "jsonl"), ("a.csv", "csv"), ("a.b.CSV", "csv")],
)
def test_format_is_inferred_from_the_uploaded_name(tmp_path, name, fmt):
    path = tmp_path / name
    path.write_text("x\n")
    assert upload_store.file_format(upload(path)) == fmt


@pytest.mark.parametrize("name", ["data.txt", "data", "data.jsonl.gz", "grader.py"])
def test_unknown_suffix_asks_for_format(tmp_path, name):
    path = tmp_path / name
    path.write_text("x\n")
    file_id = upload(path)
    with pytest.raises(DatasetError, match="set the dataset's format"):
        upload_store.file_format(file_id)
    assert upload_store.file_format(file_id, "csv") == "csv"


def test_upload_errors(tmp_path, data_file):
    with pytest.raises(DatasetError, match="not a file"):
        upload(tmp_path / "missing.jsonl")
    with pytest.raises(DatasetError, match="not a file"):
        upload(tmp_path)
    with pytest.raises(DatasetError, match="unknown purpose 'nope'"):
        upload(data_file, purpose="nope")


def test_empty_file_uploads(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    file_id = upload(empty)
    assert upload_store.info(file_id)["bytes"] == 0
    assert path_for(file_id).read_bytes() == b""


def test_no_temporary_files_are_left_behind(data_file, home):
    upload(data_file)
    upload(data_file)
    leftovers = [p.name for p in (home / "files").iterdir() if p.name.startswith(".")]
    assert leftovers == []
