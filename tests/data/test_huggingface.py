"""Hugging Face datasets, offline: local dataset folders, save_to_disk folders, and builder
mode served from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import os
import sys
import tempfile

if "datasets" not in sys.modules:  # datasets reads these at import; keep the hub offline and caches out of ~
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HOME", os.path.join(tempfile.gettempdir(), "evalnb-tests-hf-home"))

import datetime as dt
import gzip
import json
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from evalnb.data import load_rows
from evalnb.data.hf_datasets import to_jsonable
from evalnb.errors import DatasetError


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path):
    """A script-free dataset folder: data/test.jsonl (5 rows) and data/train.jsonl (3 rows)."""
    root = tmp_path / "suite" / "ds"
    write_jsonl(root / "data" / "test.jsonl", ({"q": f"test{i}", "i": i} for i in range(5)))
    write_jsonl(root / "data" / "train.jsonl", ({"q": f"train{i}", "i": i} for i in range(3)))
    return root


def hf(path, **fields):
    return {"source": "huggingface", "path": str(path), **fields}


# --- local dataset folders


def test_default_split_is_test_and_few_shot_callers_can_ask_for_train(folder):
    rows = load_rows(hf(folder), task_id="t")
    assert rows == [{"q": f"test{i}", "i": i} for i in range(5)]
    assert [r["q"] for r in load_rows(hf(folder), task_id="t", default_split="train")] == ["train0", "train1", "train2"]
    assert len(load_rows(hf(folder, split="train"), task_id="t", default_split="test")) == 3


def test_path_is_relative_to_base_dir(folder):
    rows = load_rows({"path": "ds", "split": "train"}, base_dir=folder.parent, task_id="t")
    assert len(rows) == 3


def test_manifest_style_object_with_split_none_uses_the_callers_default(folder):
    spec = SimpleNamespace(source="huggingface", path=str(folder), name=None, split=None, revision=None,
                           max_rows=None, dataset_kwargs={}, data_files=None)
    assert len(load_rows(spec, task_id="t", default_split="train")) == 3


def test_unknown_split_names_task_dataset_and_available_splits(folder):
    with pytest.raises(DatasetError) as info:
        load_rows(hf(folder, split="validation"), task_id="qa")
    message = str(info.value)
    assert message.startswith(f"task 'qa': dataset '{folder}'")
    assert "split 'validation' not found; available splits:" in message
    assert "train" in message and "test" in message


@pytest.mark.parametrize(("max_rows", "limit", "expected"), [(3, None, 3), (None, 2, 2), (3, 2, 2), (2, 4, 2),
                                                              (5, None, 5), (9, None, 5), (0, None, 0), (None, 0, 0)])
def test_max_rows_and_limit_the_smaller_wins(folder, max_rows, limit, expected):
    rows = load_rows(hf(folder, max_rows=max_rows), task_id="t", limit=limit)
    assert [r["i"] for r in rows] == list(range(expected))


def test_max_rows_reads_no_more_than_needed(tmp_path):
    root = tmp_path / "sharded"
    write_jsonl(root / "data" / "test-00000-of-00002.jsonl", ({"i": i} for i in range(5)))
    (root / "data" / "test-00001-of-00002.jsonl").write_text("{broken\n")
    assert [r["i"] for r in load_rows(hf(root, max_rows=5), task_id="t")] == [0, 1, 2, 3, 4]
    assert len(load_rows(hf(root), task_id="t", limit=4)) == 4
    with pytest.raises(DatasetError, match=r"task 't': dataset .* split 'test': test-00001-of-00002\.jsonl line 1: "
                                           r"invalid JSON"):
        load_rows(hf(root), task_id="t")


# --- CSV and JSON folders arrive as written


CAPITALS_CSV = "country,capital,founded,code\nFrance,Paris,2024-01-15,007\nJapan,Tokyo,,3.0\n"
CAPITALS = [{"country": "France", "capital": "Paris", "founded": "2024-01-15", "code": "007"},
            {"country": "Japan", "capital": "Tokyo", "founded": "", "code": "3.0"}]


def test_a_csv_folder_without_a_readme_loads_its_values_as_written(tmp_path):
    (tmp_path / "caps").mkdir()
    (tmp_path / "caps" / "test.csv").write_text(CAPITALS_CSV)
    assert load_rows(hf(tmp_path / "caps"), task_id="t") == CAPITALS
    assert load_rows({"path": "caps/test.csv"}, base_dir=tmp_path, task_id="t") == CAPITALS  # as the file alone


def test_a_csv_folder_with_a_readme_configs_block_loads(tmp_path):
    root = tmp_path / "caps"
    (root / "data").mkdir(parents=True)
    (root / "data" / "eval-set.csv").write_text(CAPITALS_CSV.replace(",", ";"))
    (root / "data" / "shots.csv").write_text("country;capital;founded;code\nPeru;Lima;;1\n")
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: main\n  sep: \";\"\n  data_files:\n  - split: test\n    path: data/eval-set.csv\n"
        "  - split: train\n    path: data/shots.csv\n---\n# capitals\n"
    )
    assert load_rows(hf(root), task_id="t") == CAPITALS
    assert load_rows(hf(root, name="main", split="train"), task_id="t") == [
        {"country": "Peru", "capital": "Lima", "founded": "", "code": "1"}]


def test_a_readme_can_name_the_files_encoding(tmp_path):
    root = tmp_path / "l1"
    root.mkdir()
    (root / "test.csv").write_bytes("name,city\nJosé,Málaga\n".encode("latin-1"))
    with pytest.raises(DatasetError, match=r"task 't': dataset .* test\.csv line 2: not valid UTF-8 \(byte 4\); "
                                           r"name its encoding in the README configs block"):
        load_rows(hf(root), task_id="t")
    (root / "README.md").write_text("---\nconfigs:\n- config_name: default\n  encoding: latin-1\n"
                                    "  data_files:\n  - split: test\n    path: test.csv\n---\n")
    assert load_rows(hf(root), task_id="t") == [{"name": "José", "city": "Málaga"}]


DATED = [{"day": "2024-01-15", "when": "2024-01-15T10:30:00", "n": 3, "tags": ["a"], "nested": {"d": "2024-02-01"}},
         {"day": "2024-02-29", "when": "2024-02-29T00:00:00", "n": 4, "tags": [], "nested": {"d": "2024-03-01"}}]


@pytest.mark.parametrize("name", ["test.jsonl", "test.json"])
def test_a_json_folder_gives_the_same_rows_as_the_file_given_alone(tmp_path, name):
    root = tmp_path / "dated"
    if name.endswith(".json"):
        root.mkdir()
        (root / name).write_text(json.dumps(DATED))  # a JSON array
    else:
        write_jsonl(root / name, DATED)
    from_folder = load_rows(hf(root), task_id="t")
    assert from_folder == DATED  # dates stay strings, exactly as written
    assert from_folder == load_rows({"path": f"dated/{name}"}, base_dir=tmp_path, task_id="t")


def test_dates_datasets_parses_out_of_json_come_back_as_dates(tmp_path):
    # a compressed file is read by datasets, whose pyarrow turns ISO date strings into timestamps
    root = tmp_path / "zipped"
    root.mkdir()
    rows = [{"day": "2024-01-15", "when": "2024-01-15T10:30:00", "n": 3},
            {"day": "2024-02-29", "when": "2024-02-29T00:00:00", "n": 4}]
    (root / "test.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert load_rows(hf(root), task_id="t") == rows  # not "2024-01-15T00:00:00"


def test_a_compressed_csv_folder_loads_through_datasets(tmp_path):
    root = tmp_path / "zipped"
    root.mkdir()
    (root / "test.csv.gz").write_bytes(gzip.compress(b"a,b\n1,x\n2,y\n"))
    # streamed CSV has no features to decode (that used to fail with datasets' raw ValueError)
    assert load_rows(hf(root), task_id="t") == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]


def test_a_broken_csv_in_a_folder_names_the_task_the_file_and_the_line(tmp_path):
    (tmp_path / "caps").mkdir()
    (tmp_path / "caps" / "test.csv").write_text(CAPITALS_CSV + "Chile\n")
    with pytest.raises(DatasetError, match=r"^task 'capitals': dataset '.*caps' .*split 'test': test\.csv line 4: "
                                           r"1 values but the header has 4 columns"):
        load_rows(hf(tmp_path / "caps"), task_id="capitals")
    assert len(load_rows(hf(tmp_path / "caps", max_rows=2), task_id="capitals")) == 2  # stops before it


def test_offline_mode_set_after_import_is_honoured_and_nothing_reaches_the_hub(tmp_path):
    from evalnb.testing import LocalModelServer

    script = (
        "import os, sys, datasets\n"
        "from evalnb.data import load_rows\n"
        "from evalnb.errors import DatasetError\n"
        "def attempt():\n"
        "    try:\n"
        "        load_rows({'path': 'evalnb-tests/no-such-dataset', 'split': 'test'}, task_id='hub', limit=5)\n"
        "    except DatasetError as exc:\n"
        "        return str(exc)\n"
        "print('ONLINE', attempt())\n"
        "sys.stdout.flush(); input()\n"  # the test reads the request count here
        "os.environ['HF_HUB_OFFLINE'] = '1'  # after datasets was imported\n"
        "print('OFFLINE', attempt())\n"
        "print('RESTORED', datasets.config.HF_HUB_OFFLINE)\n"
    )
    import subprocess

    with LocalModelServer() as hub:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
        env.update(HF_ENDPOINT=hub.base_url.rsplit("/v1", 1)[0], HF_HOME=str(tmp_path / "hf"),
                   EVALNB_HOME=str(tmp_path / "home"), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        online = proc.stdout.readline()
        asked_online = hub.request_count
        out, err = proc.communicate("\n", timeout=120)
    assert online.startswith("ONLINE task 'hub': dataset 'evalnb-tests/no-such-dataset'"), (online, err)
    assert asked_online > 0  # online, the (local stand-in) hub was asked
    assert hub.request_count == asked_online  # offline, not one more request
    offline = next(line for line in out.splitlines() if line.startswith("OFFLINE"))
    assert "task 'hub': dataset 'evalnb-tests/no-such-dataset'" in offline
    assert "offline mode is on: only datasets already in the cache load" in offline
    assert "RESTORED False" in out


def test_negative_max_rows_is_an_error(folder):
    with pytest.raises(DatasetError, match="max_rows must be a non-negative integer"):
        load_rows(hf(folder, max_rows=-1), task_id="t")


def test_revision_is_accepted_for_local_folders(folder):
    assert len(load_rows(hf(folder, revision="main"), task_id="t")) == 5


def test_parquet_values_become_plain_json(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({
        "i8": pa.array([1, 2], pa.int8()),
        "f32": pa.array([1.5, None], pa.float32()),
        "ts": pa.array([dt.datetime(2020, 1, 2, 3, 4, 5), None]),
        "day": pa.array([dt.date(2021, 5, 6), None]),
        "raw": pa.array([b"\xff\x00", b"ab"]),
        "dec": pa.array([Decimal("1.5"), Decimal("2")]),
        "nested": pa.array([{"x": [1, 2]}, {"x": []}]),
    })
    (tmp_path / "pq").mkdir()
    pq.write_table(table, tmp_path / "pq" / "test.parquet")
    rows = load_rows(hf(tmp_path / "pq"), task_id="t")
    assert rows == [
        {"i8": 1, "f32": 1.5, "ts": "2020-01-02T03:04:05", "day": "2021-05-06", "raw": "/wA=", "dec": 1.5, "nested": {"x": [1, 2]}},
        {"i8": 2, "f32": None, "ts": None, "day": None, "raw": "YWI=", "dec": 2, "nested": {"x": []}},
    ]
    json.dumps(rows)


def test_to_jsonable_handles_numpy_and_odd_types():
    np = pytest.importorskip("numpy")
    value = {"a": np.int64(3), "b": np.float32(0.5), "c": np.array([[1, 2]]), "d": np.bool_(True), 1: (dt.timedelta(seconds=90),),
             "e": Decimal("Infinity"), "f": object}
    out = to_jsonable(value)
    assert out == {"a": 3, "b": 0.5, "c": [[1, 2]], "d": True, "1": [90.0], "e": float("inf"), "f": "<class 'object'>"}
    assert type(out["a"]) is int and type(out["d"]) is bool


# --- configs


@pytest.fixture
def two_configs(tmp_path):
    root = tmp_path / "multi"
    root.mkdir()
    (root / "README.md").write_text(
        "---\nconfigs:\n"
        "- config_name: en\n  data_files:\n  - split: test\n    path: en/test.jsonl\n  - split: train\n    path: en/train.jsonl\n"
        "- config_name: fr\n  data_files:\n  - split: validation\n    path: fr/validation.jsonl\n"
        "---\n# Two configs\n"
    )
    for name in ("en/test", "en/train", "fr/validation"):
        write_jsonl(root / f"{name}.jsonl", ({"src": name, "i": i} for i in range(2)))
    return root


def test_config_discovery_picks_the_first_config_with_the_split(two_configs):
    assert {r["src"] for r in load_rows(hf(two_configs), task_id="t")} == {"en/test"}
    assert {r["src"] for r in load_rows(hf(two_configs, split="validation"), task_id="t")} == {"fr/validation"}
    assert {r["src"] for r in load_rows(hf(two_configs), task_id="t", default_split="train")} == {"en/train"}


def test_no_config_with_the_split_lists_the_configs(two_configs):
    with pytest.raises(DatasetError, match=r"task 't': dataset .* no config has a 'dev' split; set `name` to one of: en, fr"):
        load_rows(hf(two_configs, split="dev"), task_id="t")


def test_explicit_config_and_its_errors(two_configs):
    assert load_rows(hf(two_configs, name="fr", split="validation"), task_id="t")[0]["src"] == "fr/validation"
    with pytest.raises(DatasetError, match=r"config 'fr': split 'test' not found; available splits: validation"):
        load_rows(hf(two_configs, name="fr"), task_id="t")
    with pytest.raises(DatasetError, match=r"cannot load: .*'de'.*en.*fr"):
        load_rows(hf(two_configs, name="de"), task_id="t")


def test_a_config_named_default_is_preferred(tmp_path):
    root = tmp_path / "withdefault"
    root.mkdir()
    (root / "README.md").write_text(
        "---\nconfigs:\n"
        "- config_name: aaa\n  data_files:\n  - split: test\n    path: a.jsonl\n"
        "- config_name: default\n  data_files:\n  - split: test\n    path: d.jsonl\n"
        "---\n"
    )
    write_jsonl(root / "a.jsonl", [{"c": "aaa"}])
    write_jsonl(root / "d.jsonl", [{"c": "default"}])
    assert load_rows(hf(root), task_id="t") == [{"c": "default"}]


# --- save_to_disk folders


def test_save_to_disk_dataset_dict(tmp_path):
    datasets = pytest.importorskip("datasets")
    saved = tmp_path / "saved"
    datasets.DatasetDict({
        "test": datasets.Dataset.from_list([{"a": i} for i in range(10)]),
        "train": datasets.Dataset.from_list([{"a": -1}]),
    }).save_to_disk(str(saved))
    assert load_rows(hf(saved, max_rows=3), task_id="t") == [{"a": 0}, {"a": 1}, {"a": 2}]
    assert len(load_rows(hf(saved), task_id="t")) == 10
    assert load_rows(hf(saved), task_id="t", default_split="train") == [{"a": -1}]
    assert load_rows(hf(saved, max_rows=50), task_id="t", limit=2) == [{"a": 0}, {"a": 1}]
    with pytest.raises(DatasetError, match="split 'validation' not found; available splits: test, train"):
        load_rows(hf(saved, split="validation"), task_id="t")


def test_save_to_disk_single_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list([{"a": 1}, {"a": 2}]).save_to_disk(str(tmp_path / "one"))
    assert load_rows(hf(tmp_path / "one"), task_id="t", default_split="train") == [{"a": 1}, {"a": 2}]
    datasets.Dataset.from_dict({"a": [1]}, split="train").save_to_disk(str(tmp_path / "train_only"))
    assert load_rows(hf(tmp_path / "train_only", split="train"), task_id="t") == [{"a": 1}]
    with pytest.raises(DatasetError, match="split 'test' not found; available splits: train"):
        load_rows(hf(tmp_path / "train_only"), task_id="t")


# --- dataset_kwargs and path rules


def test_dataset_kwargs_pass_through_and_data_files_patterns(tmp_path):
    root = tmp_path / "files"
    write_jsonl(root / "a.jsonl", [{"f": "a"}])
    write_jsonl(root / "b.jsonl", [{"f": "b"}])
    rows = load_rows(hf(root, dataset_kwargs={"data_files": {"test": "b.jsonl"}, "trust_remote_code": True}), task_id="t")
    assert rows == [{"f": "b"}]
    assert load_rows(hf(root, data_files={"test": ["a.jsonl"]}), task_id="t") == [{"f": "a"}]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dataset_kwargs": {"token": "hf_x"}}, "dataset_kwargs.token is not allowed"),
        ({"dataset_kwargs": {"storage_options": {}}}, "dataset_kwargs.storage_options is not allowed"),
        ({"dataset_kwargs": {"cache_dir": "/tmp"}}, "dataset_kwargs.cache_dir is not allowed"),
        ({"dataset_kwargs": {"split": "train"}}, "set the dataset's own `split` field"),
        ({"dataset_kwargs": "x"}, "dataset_kwargs must be an object"),
        ({"data_files": {"test": "https://e.example/x.jsonl"}}, "URLs are only allowed with path 'json' or 'csv'"),
        ({"data_files": "../secret.jsonl"}, "must be a relative pattern"),
        ({"data_files": "/etc/passwd"}, "must be a relative pattern"),
        ({"dataset_kwargs": {"data_dir": "../.."}}, "dataset_kwargs.data_dir entry '../..'"),
        ({"data_files": "a.jsonl", "dataset_kwargs": {"data_files": "b.jsonl"}}, "disagree"),
    ],
)
def test_rejected_fields(folder, fields, message):
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_rows(hf(folder, **fields), task_id="t")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("./nope", "local dataset folder not found"),
        ("../nope", "local dataset folder not found"),
        ("/definitely/not/here", "local dataset folder not found"),
        ("https://e.example/data", "a URL is not a dataset path"),
        ("parquet", "builder 'parquet' is not supported"),
        ("", "needs a non-empty `path`"),
    ],
)
def test_bad_paths(tmp_path, path, message):
    with pytest.raises(DatasetError, match=message):
        load_rows(hf(path), base_dir=tmp_path, task_id="t")


def test_a_file_with_hugging_face_fields_is_refused(folder):
    with pytest.raises(DatasetError, match="task 't': 'ds/data/test.jsonl' is a local file, but split made"):
        load_rows({"path": "ds/data/test.jsonl", "split": "test"}, base_dir=folder.parent, task_id="t")
    with pytest.raises(DatasetError, match="but max_rows made the dataset a Hugging Face one; a local file "
                                           "takes only path, format and encoding"):
        load_rows({"path": "ds/data/test.jsonl", "split": "test", "max_rows": 3}, base_dir=folder.parent, task_id="t")


def test_missing_hub_dataset_is_a_dataset_error(tmp_path):
    datasets = pytest.importorskip("datasets")
    if not datasets.config.HF_HUB_OFFLINE:
        pytest.skip("the hub is not in offline mode; this test must not touch the network")
    with pytest.raises(DatasetError, match=r"task 't': dataset 'evalnb-tests/does-not-exist'.*cannot load"):
        load_rows(hf("evalnb-tests/does-not-exist"), base_dir=tmp_path, task_id="t")


def test_datasets_is_quiet_and_settings_are_restored(folder, home, capfd):
    from datasets.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    before = hf_logging.get_verbosity()
    load_rows(hf(folder), task_id="t")
    assert hf_logging.is_progress_bar_enabled()
    assert hf_logging.get_verbosity() == before
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert (home / "hf-cache").is_dir()


# --- builder mode over a real HTTP server on 127.0.0.1


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server API)
        server = self.server
        server.requests.append(self.path)
        if self.path in server.redirects:
            self.send_response(302)
            self.send_header("Location", server.redirects[self.path])
            self.end_headers()
            return
        file = server.root / self.path.lstrip("/")
        if not file.is_file():
            self.send_error(404)
            return
        body = file.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading early, as it should with max_rows

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.root, httpd.requests, httpd.redirects = root, [], {}
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_builder_json_split_mapping(server):
    write_jsonl(server.root / "val.jsonl", [{"q": "v", "date": "2020-01-01", "n": 1.0}])
    write_jsonl(server.root / "test.jsonl", [{"q": "t"}])
    spec = {"path": "json", "data_files": {"validation": f"{server.url}/val.jsonl", "test": f"{server.url}/test.jsonl"}}
    rows = load_rows({**spec, "split": "validation"}, task_id="t", allow_private_hosts=True)
    assert rows == [{"q": "v", "date": "2020-01-01", "n": 1.0}]  # values exactly as written (no date parsing)
    assert server.requests == ["/val.jsonl"]
    assert load_rows(spec, task_id="t", allow_private_hosts=True) == [{"q": "t"}]


def test_builder_urls_on_private_hosts_are_refused_by_default(server):
    write_jsonl(server.root / "val.jsonl", [{"q": "v"}])
    spec = {"path": "json", "data_files": {"validation": f"{server.url}/val.jsonl"}, "split": "validation"}
    with pytest.raises(DatasetError, match=r"task 't': dataset 'json': data_files: URL .* loopback"):
        load_rows(spec, task_id="t")
    assert server.requests == []


def test_every_split_url_is_checked_before_anything_is_fetched(server):
    write_jsonl(server.root / "test.jsonl", [{"q": "t"}])
    spec = {"path": "json", "data_files": {"test": f"{server.url}/test.jsonl", "train": "file:///etc/passwd"}}
    with pytest.raises(DatasetError, match="only http and https URLs are allowed"):
        load_rows(spec, task_id="t", allow_private_hosts=True)
    spec = {"path": "json", "data_files": {"test": "data/test.jsonl"}}
    with pytest.raises(DatasetError, match="only http and https URLs are allowed"):
        load_rows(spec, task_id="t", allow_private_hosts=True)
    assert server.requests == []


def test_builder_bare_url_serves_the_requested_split(server):
    write_jsonl(server.root / "all.jsonl", [{"a": 1}])
    for where in ({"data_files": f"{server.url}/all.jsonl"}, {"dataset_kwargs": {"data_files": [f"{server.url}/all.jsonl"]}}):
        assert load_rows({"path": "json", **where}, task_id="t", allow_private_hosts=True) == [{"a": 1}]
        assert load_rows({"path": "json", **where}, task_id="t", default_split="train", allow_private_hosts=True) == [{"a": 1}]


def test_builder_unknown_split_lists_available(server):
    spec = {"path": "json", "data_files": {"validation": f"{server.url}/v.jsonl"}}
    with pytest.raises(DatasetError, match="split 'test' not found; available splits: validation"):
        load_rows(spec, task_id="t", allow_private_hosts=True)
    assert server.requests == []


def test_builder_requires_data_files():
    with pytest.raises(DatasetError, match="data_files is required when path is 'csv'"):
        load_rows({"path": "csv", "split": "test"}, task_id="t")


def test_builder_stops_fetching_once_max_rows_are_read(server):
    write_jsonl(server.root / "a.jsonl", ({"i": i} for i in range(5)))
    write_jsonl(server.root / "b.jsonl", ({"i": i} for i in range(5, 8)))
    urls = [f"{server.url}/a.jsonl", f"{server.url}/b.jsonl"]
    rows = load_rows({"path": "json", "data_files": {"test": urls}, "max_rows": 3}, task_id="t", allow_private_hosts=True)
    assert [r["i"] for r in rows] == [0, 1, 2]
    assert server.requests == ["/a.jsonl"]
    rows = load_rows({"path": "json", "data_files": {"test": urls}, "max_rows": 6}, task_id="t", allow_private_hosts=True)
    assert [r["i"] for r in rows] == [0, 1, 2, 3, 4, 5]
    rows = load_rows({"path": "json", "data_files": {"test": urls}}, task_id="t", allow_private_hosts=True, limit=5)
    assert len(rows) == 5 and server.requests == ["/a.jsonl", "/a.jsonl", "/b.jsonl", "/a.jsonl"]


def test_builder_broken_line_after_max_rows_is_never_read(server):
    (server.root / "d.jsonl").write_text('{"i": 0}\n{"i": 1}\n{broken\n')
    spec = {"path": "json", "data_files": f"{server.url}/d.jsonl"}
    assert len(load_rows({**spec, "max_rows": 2}, task_id="t", allow_private_hosts=True)) == 2
    with pytest.raises(DatasetError, match=r"task 't': dataset 'json': http://127\.0\.0\.1:\d+/d\.jsonl line 3: invalid JSON"):
        load_rows(spec, task_id="t", allow_private_hosts=True)


def test_builder_csv_values_are_strings(server):
    (server.root / "d.csv").write_text("q;a\n1;x\n2;y\n")
    spec = {"path": "csv", "data_files": {"test": f"{server.url}/d.csv"}, "dataset_kwargs": {"sep": ";"}}
    assert load_rows(spec, task_id="t", allow_private_hosts=True) == [{"q": "1", "a": "x"}, {"q": "2", "a": "y"}]


def test_builder_json_array_field_and_gzip(server):
    (server.root / "arr.json").write_text(json.dumps([{"a": 1}, {"a": 2}]))
    (server.root / "obj.json").write_text(json.dumps({"version": 1, "data": [{"a": 3}]}))
    (server.root / "z.jsonl.gz").write_bytes(gzip.compress(b'{"a": 4}\n{"a": 5}\n'))
    get = lambda spec, **kw: load_rows(spec, task_id="t", allow_private_hosts=True, **kw)  # noqa: E731
    assert get({"path": "json", "data_files": f"{server.url}/arr.json"}, limit=1) == [{"a": 1}]
    assert get({"path": "json", "data_files": f"{server.url}/obj.json", "dataset_kwargs": {"field": "data"}}) == [{"a": 3}]
    assert get({"path": "json", "data_files": f"{server.url}/z.jsonl.gz"}) == [{"a": 4}, {"a": 5}]


def test_builder_reads_data_files_in_the_encoding_given(server):
    (server.root / "l1.csv").write_bytes("name,city\nJosé,Málaga\n".encode("latin-1"))
    spec = {"path": "csv", "data_files": f"{server.url}/l1.csv"}
    with pytest.raises(DatasetError, match="not valid UTF-8"):
        load_rows(spec, task_id="t", allow_private_hosts=True)
    spec["dataset_kwargs"] = {"encoding": "latin-1"}
    assert load_rows(spec, task_id="t", allow_private_hosts=True) == [{"name": "José", "city": "Málaga"}]


def test_builder_follows_checked_redirects_and_reports_http_errors(server):
    write_jsonl(server.root / "new.jsonl", [{"a": 1}])
    server.redirects["/old.jsonl"] = "/new.jsonl"
    assert load_rows({"path": "json", "data_files": f"{server.url}/old.jsonl"}, task_id="t", allow_private_hosts=True) == [{"a": 1}]
    assert server.requests == ["/old.jsonl", "/new.jsonl"]
    with pytest.raises(DatasetError, match="HTTP 404"):
        load_rows({"path": "json", "data_files": f"{server.url}/missing.jsonl"}, task_id="t", allow_private_hosts=True)


@pytest.mark.parametrize(
    ("builder", "kwargs", "message"),
    [
        ("json", {"sep": ";"}, "dataset_kwargs.sep is not supported for path 'json'"),
        ("csv", {"field": "x"}, "dataset_kwargs.field is not supported for path 'csv'"),
        ("csv", {"sep": ";;"}, "must be a single character"),
        ("json", {"encoding": "utf-16"}, "encoding 'utf-16': not supported for data_files URLs"),
        ("csv", {"encoding": "klingon"}, "encoding 'klingon': unknown encoding"),
    ],
)
def test_builder_unsupported_kwargs(server, builder, kwargs, message):
    spec = {"path": builder, "data_files": f"{server.url}/x", "dataset_kwargs": kwargs}
    with pytest.raises(DatasetError, match=message):
        load_rows(spec, task_id="t", allow_private_hosts=True)
