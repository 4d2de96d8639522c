"""Nothing persisted holds a key: not the store file (WAL and SHM included), no frame, no export.

Two ways a key comes back: a server that echoes the Authorization header in every answer
(candidate and judge), and a key that sits in the user's own data (a dataset row), which a
grader then copies into its judge record and its error message. Every stored field is
covered: prompts, rows, targets, outputs, extracted outputs, the output cache, judge, error,
run arguments and metadata.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import evalnb
from evalnb import Model
from evalnb.store import Store
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

KEY = "sk-proj-ECHOED0123456789abcdef"
JUDGE_KEY = "judge-token-7d1e8c0b5a2f"  # no sk- prefix: only the known-secret rule can catch it
HEADER_KEY = "hdr-Zq81mK02xT55"
FRAGMENTS = ("ECHOED0123456789", "7d1e8c0b5a2f", "Zq81mK02xT55")

GRADER = """
def grade(sample, item, ctx):
    reply = ctx.responses_create(input="JUDGE " + (sample["extracted_output"] or ""))
    leak = item["row"].get("leak", "")
    if item["sample_index"] == 2:
        raise ValueError("cannot grade: " + leak + " / " + reply["output_text"])
    return {"scores": {"ok": 1}, "judge": {"reply": reply["output_text"], "copied": leak}}
"""


def _responder(body):
    text = body.get("input") or body["messages"][-1]["content"]
    return "yes" if str(text).startswith("JUDGE ") else f"answer to {text}"


def _leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


def _home_bytes(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


def _exports(home: Path, result) -> dict[str, str]:
    """Every way a user takes results out: frames, CSV/JSON/parquet exports, the CLI."""
    out = {name: getattr(result, name).to_csv() for name in ("samples", "metrics", "scores")}
    out["samples.json"] = result.samples.to_json()
    out["runs"] = evalnb.runs().to_csv()
    out["run record"] = json.dumps(result.run, default=str)
    out["summary"] = result.summary()
    out["html"] = result._repr_html_()
    out["store samples"] = repr(Store().samples(result.run_id))
    for fmt in ("jsonl", "csv", "parquet"):
        target = home.parent / f"export.{fmt}"
        done = subprocess.run([sys.executable, "-m", "evalnb", "export", result.run_id, "--format", fmt,
                               "-o", str(target), "--home", str(home)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        out[f"export {fmt}"] = target.read_bytes().decode("latin-1")
    shown = subprocess.run([sys.executable, "-m", "evalnb", "show", result.run_id, "--samples", "--home", str(home)],
                           capture_output=True, text=True)
    out["evalnb show"] = shown.stdout + shown.stderr
    return out


def test_an_echoing_server_and_a_key_in_the_data_leave_no_trace(make_suite, model_server, evalnb_home,
                                                                 monkeypatch, capsys):
    monkeypatch.setenv("EVALNB_ECHO_JUDGE_KEY", JUDGE_KEY)
    data = rows(4)
    data[1]["leak"] = f"my key is {KEY}"  # the user's own data holds a key
    data[2]["leak"] = f"judge token {JUDGE_KEY}"
    data[3]["q"] += f" (X-Api-Key: {HEADER_KEY})"
    suite = make_suite({"t": data}, t={"prompt_template": "{{q}}", "target_template": "{{a}} {{leak}}",
                                       "grader": {"contract": "model_backed", "source": GRADER},
                                       "metrics": [{"id": "ok"}]})
    server = model_server(_responder, echo_headers=["authorization", "x-api-key"])
    judge_server = model_server(_responder, echo_headers=["authorization"])
    model = Model("m", base_url=server.base_url, api="chat", api_key=KEY, headers={"X-Api-Key": HEADER_KEY})
    judge = Model("judge", base_url=judge_server.base_url, api_key_env="EVALNB_ECHO_JUDGE_KEY")

    result = evalnb.run(suite, [model], judge_model=judge, progress="text",
                        metadata={"note": f"run by {KEY}"}, generation={"extra_body": {"tag": HEADER_KEY}})

    # the servers really echoed the keys, and the run really used every field
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {KEY}"}
    assert {r.headers["authorization"] for r in judge_server.requests} == {f"Bearer {JUDGE_KEY}"}
    s = result.samples.set_index("sample_index")
    assert list(s.status) == ["completed", "completed", "failed", "completed"]
    assert "[redacted]" in s.loc[0, "output_text"] and "authorization: Bearer [redacted]" in s.loc[0, "output_text"]
    assert "cannot grade" in s.loc[2, "error"] and "[redacted]" in s.loc[2, "error"]
    assert s.loc[1, "judge"] == {"reply": "yes\nauthorization: Bearer [redacted]", "copied": "my key is [redacted]"}
    assert "[redacted]" in s.loc[1, "target"] and "[redacted]" in s.loc[3, "prompt"]

    for name, blob in _home_bytes(evalnb_home).items():  # evalnb.sqlite, -wal, -shm, files/
        for fragment in FRAGMENTS:
            assert fragment.encode() not in blob, f"{fragment} in {name}"
    for where, text in {**_exports(evalnb_home, result), "console": "".join(capsys.readouterr())}.items():
        assert not _leaks(text), f"key in {where}"


def test_every_stored_field_is_masked_on_the_way_in(tmp_path):
    """The store alone: a sample and a cache entry with the key in every field."""
    with Store(tmp_path / "s.sqlite") as store:
        store.add_secrets(KEY)
        run = store.create_run("v1", models=[{"name": "m"}], metadata={"who": KEY}, manifest={"tasks": []})
        text = f"x {KEY} y"
        with store.writer(run) as writer:
            writer.add({"task_id": "t", "model": "m", "sample_index": 0, "status": "failed", "prompt": text,
                        "target": text, "dataset_row": {"q": text, "n": [text]}, "output_text": text,
                        "extracted_output": text, "response_id": text, "scores": {"s": 1},
                        "judge": {"raw": text}, "error": {"message": text}, "usage": {"note": text}})
            writer.put_outputs([{"request_key": "k" * 64, "output_text": text, "usage": {"u": text},
                                 "response_id": text}])
        (sample,) = store.samples(run)
        cached = store.lookup_outputs(["k" * 64])["k" * 64]
    for field in ("prompt", "target", "output_text", "extracted_output", "response_id"):
        assert sample[field] == "x [redacted] y", field
    assert sample["dataset_row"] == {"q": "x [redacted] y", "n": ["x [redacted] y"]}
    assert sample["judge"] == {"raw": "x [redacted] y"} and sample["error"] == {"message": "x [redacted] y"}
    assert cached["output_text"] == "x [redacted] y"
    for name, blob in _home_bytes(tmp_path).items():
        assert b"ECHOED0123456789" not in blob, name
