"""load_rows for local files and the file store, and the JSONL/CSV/JSON readers under it."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from evalnb.data import load_rows, upload
from evalnb.data.loaders import dataset_kind
from evalnb.data.row_readers import infer_format, read_rows
from evalnb.errors import DatasetError


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))


def write(path, data: bytes | str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


# --- JSONL


def test_jsonl_rows_keep_json_types(tmp_path):
    rows = [{"q": "a", "n": 1, "f": 2.5, "b": True, "none": None, "list": [1, "x"], "obj": {"k": "v"}}]
    write(tmp_path / "d.jsonl", jsonl(rows))
    assert load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t") == rows


def test_jsonl_line_that_is_not_an_object_names_task_file_and_line(tmp_path):
    lines = [json.dumps({"i": i}) for i in range(6)] + ["[1, 2]"]
    write(tmp_path / "data.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(DatasetError) as info:
        load_rows({"path": "data.jsonl"}, base_dir=tmp_path, task_id="X")
    assert str(info.value) == "task 'X': data.jsonl line 7: not a JSON object (found list)"


@pytest.mark.parametrize(("line", "found"), [('"text"', "str"), ("3", "int"), ("null", "null"), ("true", "bool")])
def test_jsonl_scalars_are_not_objects(tmp_path, line, found):
    write(tmp_path / "d.jsonl", '{"a": 1}\n' + line + "\n")
    with pytest.raises(DatasetError, match=rf"d\.jsonl line 2: not a JSON object \(found {found}\)"):
        load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t")


def test_jsonl_invalid_json_counts_blank_lines(tmp_path):
    write(tmp_path / "d.jsonl", '{"a": 1}\n\n   \n{"a": 2,}\n')
    with pytest.raises(DatasetError, match=r"task 't': d\.jsonl line 4: invalid JSON: .*\(column 9\)"):
        load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t")


def test_jsonl_blank_lines_crlf_bom_and_no_final_newline(tmp_path):
    write(tmp_path / "d.jsonl", b'\xef\xbb\xbf{"a": 1}\r\n\r\n{"a": 2}\r\n  \n{"a": 3}')
    assert load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t") == [{"a": 1}, {"a": 2}, {"a": 3}]


def test_jsonl_line_separators_inside_strings_do_not_split_rows(tmp_path):
    rows = [{"text": "a\u2028b\u2029c\x85d\x0ce"}, {"text": "next"}]
    write(tmp_path / "d.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t") == rows


def test_jsonl_invalid_utf8_names_the_line(tmp_path):
    write(tmp_path / "d.jsonl", b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(DatasetError, match=r"d\.jsonl line 2: not valid UTF-8 \(byte 8\)"):
        load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t")


def test_empty_jsonl_gives_no_rows(tmp_path):
    write(tmp_path / "d.jsonl", "\n\n")
    assert load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t") == []


@pytest.mark.parametrize(("limit", "expected"), [(0, 0), (1, 1), (4, 4), (5, 5), (9, 5)])
def test_limit_edges(tmp_path, limit, expected):
    write(tmp_path / "d.jsonl", jsonl({"i": i} for i in range(5)))
    rows = load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t", limit=limit)
    assert rows == [{"i": i} for i in range(expected)]


def test_limit_stops_before_a_broken_line(tmp_path):
    write(tmp_path / "d.jsonl", jsonl({"i": i} for i in range(3)) + "not json\n")
    assert len(load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t", limit=3)) == 3
    with pytest.raises(DatasetError, match="line 4: invalid JSON"):
        load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t", limit=4)


def test_negative_limit_is_an_error(tmp_path):
    write(tmp_path / "d.jsonl", '{"a": 1}\n')
    with pytest.raises(DatasetError, match="limit must be a non-negative integer"):
        load_rows({"path": "d.jsonl"}, base_dir=tmp_path, task_id="t", limit=-1)


# --- CSV


def test_csv_values_are_strings_and_bom_is_dropped(tmp_path):
    write(tmp_path / "d.csv", b"\xef\xbb\xbfquestion,answer,n\r\n\"Say \"\"hi\"\", ok?\",hi,3\r\n2+2,4,\r\n")
    rows = load_rows({"path": "d.csv"}, base_dir=tmp_path, task_id="t")
    assert rows == [{"question": 'Say "hi", ok?', "answer": "hi", "n": "3"}, {"question": "2+2", "answer": "4", "n": ""}]


def test_csv_quoted_newlines_and_blank_lines(tmp_path):
    write(tmp_path / "d.csv", 'a,b\n"line1\nline2",x\n\n3,y\n')
    rows = load_rows({"path": "d.csv"}, base_dir=tmp_path, task_id="t")
    assert rows == [{"a": "line1\nline2", "b": "x"}, {"a": "3", "b": "y"}]


def test_csv_missing_fields_name_file_line_and_fields(tmp_path):
    write(tmp_path / "d.csv", 'q,a,c\n"multi\nline",b,c\nonly\n')
    with pytest.raises(DatasetError) as info:
        load_rows({"path": "d.csv"}, base_dir=tmp_path, task_id="t")
    assert str(info.value) == "task 't': d.csv line 4: 1 values but the header has 3 columns; missing: a, c"


def test_csv_extra_values_are_named(tmp_path):
    write(tmp_path / "d.csv", "q,a\n1,2\n3,4,5,six\n")
    with pytest.raises(DatasetError, match=r"d\.csv line 3: 4 values but the header has 2 columns; extra values: '5', 'six'"):
        load_rows({"path": "d.csv"}, base_dir=tmp_path, task_id="t")


def test_csv_duplicate_header(tmp_path):
    write(tmp_path / "d.csv", "q,a,q\n1,2,3\n")
    with pytest.raises(DatasetError, match=r"line 1: duplicate column 'q'"):
        load_rows({"path": "d.csv"}, base_dir=tmp_path, task_id="t")


def test_csv_invalid_utf8_names_the_line(tmp_path):
    write(tmp_path / "d.csv", b"q,a\n1,2\n3,\xe9\n")
    with pytest.raises(DatasetError, match=r"d\.csv line 3: not valid UTF-8"):
        load_rows({"path": "d.csv"}, base_dir=tmp_path, task_id="t")


def test_a_latin1_csv_says_how_to_read_it_and_reads_with_its_encoding(tmp_path):
    write(tmp_path / "d.csv", "name,city\nJosé,Málaga\n".encode("latin-1"))
    with pytest.raises(DatasetError, match=r"d\.csv line 2: not valid UTF-8 \(byte 4\); if the file is in another "
                                           r"encoding, name it in the dataset \(e\.g\. encoding: latin-1\)"):
        load_rows({"path": "d.csv"}, base_dir=tmp_path, task_id="t")
    rows = load_rows({"path": "d.csv", "encoding": "latin-1"}, base_dir=tmp_path, task_id="t")
    assert rows == [{"name": "José", "city": "Málaga"}]


@pytest.mark.parametrize(
    ("encoding", "name"),
    [("cp1252", "d.csv"), ("utf-16", "d.csv"), ("utf-16", "d.jsonl"), ("utf-8-sig", "d.jsonl"), ("shift_jis", "d.jsonl")],
)
def test_files_in_other_encodings_read_as_written(tmp_path, encoding, name):
    text = "“Nämlich” — 東京 ok"
    if encoding == "cp1252":
        text = "“Nämlich” — ok"  # cp1252 has no kanji
    elif encoding == "shift_jis":
        text = "東京 ok"
    if name.endswith(".csv"):
        write(tmp_path / name, f"q,a\n{text},1\nplain,2\n".encode(encoding))
        expected = [{"q": text, "a": "1"}, {"q": "plain", "a": "2"}]
    else:
        expected = [{"q": text, "n": 1}, {"q": "plain", "n": 2}]
        write(tmp_path / name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in expected).encode(encoding))
    assert load_rows({"path": name, "encoding": encoding}, base_dir=tmp_path, task_id="t") == expected
    assert load_rows({"path": name, "encoding": encoding}, base_dir=tmp_path, task_id="t", limit=1) == expected[:1]


def test_a_wrong_encoding_is_named_in_the_error(tmp_path):
    write(tmp_path / "d.csv", "q\n東京\n".encode("utf-8"))
    with pytest.raises(DatasetError, match=r"line 2: not valid ascii \(byte 1\)$"):
        load_rows({"path": "d.csv", "encoding": "ascii"}, base_dir=tmp_path, task_id="t")


def test_an_uploaded_file_that_is_not_utf8_says_what_to_do(tmp_path):
    file_id = upload(write(tmp_path / "qa.csv", "q\nJosé\n".encode("latin-1")))
    with pytest.raises(DatasetError, match=r"not valid UTF-8 \(byte 4\); uploaded files are read as UTF-8"):
        load_rows({"file_id": file_id}, task_id="t")


@pytest.mark.parametrize("content", ["", "\n", "q,a\n"])
def test_csv_without_data_rows_is_empty(tmp_path, content):
    write(tmp_path / "d.csv", content)
    assert load_rows({"path": "d.csv"}, base_dir=tmp_path, task_id="t") == []


def test_csv_limit_stops_before_a_ragged_row(tmp_path):
    write(tmp_path / "d.csv", "q,a\n1,2\n3\n")
    assert load_rows({"path": "d.csv"}, base_dir=tmp_path, task_id="t", limit=1) == [{"q": "1", "a": "2"}]


# --- JSON array files and the format rules


def test_json_array_file(tmp_path):
    write(tmp_path / "d.json", json.dumps([{"a": 1}, {"a": 2}, {"a": 3}]))
    assert load_rows({"path": "d.json"}, base_dir=tmp_path, task_id="t", limit=2) == [{"a": 1}, {"a": 2}]
    write(tmp_path / "bad.json", json.dumps([{"a": 1}, 2]))
    with pytest.raises(DatasetError, match=r"bad\.json item 1: not a JSON object \(found int\)"):
        load_rows({"path": "bad.json"}, base_dir=tmp_path, task_id="t")


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("x.jsonl", "jsonl"), ("x.NDJSON", "jsonl"), ("x.csv", "csv"), ("x.json", "json"), ("x.txt", None), ("x", None)],
)
def test_infer_format(name, fmt):
    assert infer_format(name) == fmt


def test_explicit_format_overrides_the_suffix(tmp_path):
    write(tmp_path / "rows.txt", '{"a": 1}\n')
    assert load_rows({"path": "rows.txt", "format": "jsonl"}, base_dir=tmp_path, task_id="t") == [{"a": 1}]
    write(tmp_path / "rows.data", "a\n1\n")
    assert load_rows({"path": "rows.data", "format": "csv"}, base_dir=tmp_path, task_id="t") == [{"a": "1"}]


def test_unknown_format_is_an_error():
    with pytest.raises(DatasetError, match="unknown format 'xml'"):
        read_rows([b"<a/>"], "xml", source="task 't': x")


# --- local paths


def test_local_path_is_relative_to_base_dir(tmp_path, monkeypatch):
    write(tmp_path / "suite" / "data" / "d.jsonl", '{"a": 1}\n')
    monkeypatch.chdir(tmp_path)
    assert load_rows({"path": "data/d.jsonl"}, base_dir=tmp_path / "suite", task_id="t") == [{"a": 1}]
    assert load_rows({"path": "suite/data/d.jsonl"}, task_id="t") == [{"a": 1}]  # no base_dir: cwd


def test_missing_local_file_names_task_and_resolved_path(tmp_path):
    with pytest.raises(DatasetError) as info:
        load_rows({"path": "data/nope.jsonl"}, base_dir=tmp_path, task_id="qa")
    assert str(info.value) == f"task 'qa': dataset file not found: {tmp_path / 'data' / 'nope.jsonl'}"


def test_local_folder_with_data_suffix_is_not_a_file(tmp_path):
    (tmp_path / "weird.jsonl").mkdir()
    with pytest.raises(DatasetError, match="dataset file not found"):
        load_rows({"path": "weird.jsonl"}, base_dir=tmp_path, task_id="t")


def test_manifest_style_objects_are_read_by_attribute(tmp_path):
    write(tmp_path / "d.csv", "a\n1\n")
    local = SimpleNamespace(path="d.csv", format=None)
    assert load_rows(local, base_dir=tmp_path, task_id="t") == [{"a": "1"}]


# --- the file store


def test_file_store_rows_with_inferred_and_declared_format(tmp_path):
    file_id = upload(write(tmp_path / "qa.csv", "q,a\n1,2\n"))
    assert load_rows({"file_id": file_id}, task_id="t") == [{"q": "1", "a": "2"}]
    assert load_rows(SimpleNamespace(file_id=file_id, format="csv"), task_id="t") == [{"q": "1", "a": "2"}]
    other = upload(write(tmp_path / "qa.data", '{"q": 1}\n'))
    assert load_rows({"file_id": other, "format": "jsonl"}, task_id="t") == [{"q": 1}]


def test_file_store_errors_name_the_task_the_file_and_the_line(tmp_path):
    file_id = upload(write(tmp_path / "qa.jsonl", '{"a": 1}\n["x"]\n'))
    with pytest.raises(DatasetError) as info:
        load_rows({"file_id": file_id}, task_id="qa")
    assert str(info.value) == f"task 'qa': qa.jsonl ({file_id}) line 2: not a JSON object (found list)"


def test_file_store_unknown_and_malformed_ids(tmp_path):
    with pytest.raises(DatasetError, match=r"task 'qa': unknown file id 'file-abc123'"):
        load_rows({"file_id": "file-abc123"}, task_id="qa")
    with pytest.raises(DatasetError, match=r"task 'qa': malformed file id '\.\./\.\./etc/passwd'"):
        load_rows({"file_id": "../../etc/passwd", "format": "jsonl"}, task_id="qa")


def test_file_store_needs_a_format_for_unknown_names(tmp_path):
    file_id = upload(write(tmp_path / "qa.txt", '{"a": 1}\n'))
    with pytest.raises(DatasetError, match=r"task 'qa': cannot infer the format of file .*qa\.txt"):
        load_rows({"file_id": file_id}, task_id="qa")


# --- which loader


@pytest.mark.parametrize(
    ("dataset", "kind"),
    [
        ({"file_id": "file-1"}, "file"),
        ({"file_id": "file-1", "format": "csv"}, "file"),
        ({"path": "data/x.jsonl"}, "local"),
        ({"path": "data/x.CSV"}, "local"),
        ({"path": "data/x.json"}, "local"),
        ({"path": "data/x.txt", "format": "jsonl"}, "local"),
        ({"path": "facebook/belebele"}, "huggingface"),
        ({"path": "data/folder"}, "huggingface"),
        ({"path": "data/x.jsonl", "split": "test"}, "huggingface"),
        ({"source": "huggingface", "path": "x.jsonl"}, "huggingface"),
        ({"path": "json", "data_files": "https://e.example/x.jsonl"}, "huggingface"),
        ({"path": "gsm8k", "name": "main"}, "huggingface"),
        (SimpleNamespace(path="x.jsonl", format=None), "local"),
        (SimpleNamespace(source="huggingface", path="org/ds", split=None), "huggingface"),
    ],
)
def test_dataset_kind(dataset, kind):
    assert dataset_kind(dataset) == kind


# --- speed


def test_100k_row_jsonl_loads_quickly(tmp_path):
    row = {"question": "What is 12 + 30? Answer with a number only.", "answer": "42", "choices": ["a", "b", "c"],
           "meta": {"source": "synthetic", "difficulty": 2}}
    write(tmp_path / "big.jsonl", jsonl({**row, "id": i} for i in range(100_000)))
    start = time.perf_counter()
    rows = load_rows({"path": "big.jsonl"}, base_dir=tmp_path, task_id="t")
    elapsed = time.perf_counter() - start
    assert len(rows) == 100_000 and rows[-1]["id"] == 99_999
    print(f"\n100k-row JSONL: {elapsed:.3f} s, {len(rows) / elapsed:,.0f} rows/s")
    assert elapsed < 5.0
