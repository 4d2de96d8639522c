"""Ctrl-C, for real: a child process running evalnb gets SIGINT while a run is in flight.

The model server (a LocalModelServer in this process, answering after 50 ms) counts the
requests, so the test sends the signal once a run is well under way. What must hold:

- a script that loops over two runs stops at the first Ctrl-C: the second run never starts,
  the first is stored as ``cancelled`` with its finished samples, and the process exits as
  interrupted (killed by SIGINT, as an uncaught KeyboardInterrupt makes Python do) with the
  run id and "resume with `evalnb.resume(...)`" on stderr;
- ``evalnb run`` exits 130 and prints the partial metrics.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.runner_kit import manifest, rows

ROOT = Path(__file__).resolve().parents[2]
TOTAL = 40

LOOP = textwrap.dedent('''
    import sys
    import evalnb
    suite = evalnb.Suite.from_file(sys.argv[1])
    model = evalnb.Model("meh", base_url=sys.argv[2])
    for attempt in ("first", "second"):
        print("STARTING", attempt, flush=True)
        result = evalnb.run(suite, [model], concurrency=2, reuse=False, progress=False)
        print("FINISHED", attempt, result.status, flush=True)
    print("LOOP DONE", flush=True)
''')


@pytest.fixture
def setup(tmp_path, model_server):
    data = tmp_path / "data"
    suite_file = data / "suite.json"  # beside its t.jsonl: dataset paths resolve from the manifest's folder
    suite_file.write_text(json.dumps(manifest(data, {"t": rows(TOTAL)})))
    server = model_server(latency=0.05)
    env = {**os.environ, "EVALNB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    return suite_file, server, env, tmp_path / "home" / "evalnb.sqlite"


def _interrupt_when(proc: subprocess.Popen, server, requests: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while server.request_count < requests:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)


def _stored(db: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT r.run_id, r.status, (SELECT count(*) FROM samples s WHERE s.run_id = r.run_id) FROM runs r"
        ).fetchall()


def test_a_script_looping_over_runs_stops_at_the_first_ctrl_c(setup):
    suite_file, server, env, db = setup
    proc = subprocess.Popen([sys.executable, "-c", LOOP, str(suite_file), server.base_url], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _interrupt_when(proc, server, 10)
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == -signal.SIGINT, (proc.returncode, out, err)  # exited as interrupted
    assert "STARTING first" in out and "FINISHED" not in out and "STARTING second" not in out
    ((run_id, status, n),) = _stored(db)  # one run: the loop did not go on to the second
    assert status == "cancelled" and 5 <= n < TOTAL
    assert f"KeyboardInterrupt: run {run_id} interrupted: {n} finished sample(s) saved" in err
    assert f"resume with `evalnb.resume('{run_id}')`" in err
    assert server.request_count < TOTAL + 4


def test_the_cli_exits_130_and_prints_what_finished(setup):
    suite_file, server, env, db = setup
    proc = subprocess.Popen([sys.executable, "-m", "evalnb", "run", str(suite_file), "--model",
                             f"meh@{server.base_url}", "--concurrency", "2", "--no-progress"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _interrupt_when(proc, server, 10)
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 130, (out, err)
    ((run_id, status, n),) = _stored(db)
    assert status == "cancelled" and 5 <= n < TOTAL
    assert f"run_id: {run_id}  status: cancelled" in out and out.splitlines()[0].split()[:3] == ["task", "model", "metric"]
    assert f"evalnb: interrupted: run {run_id} interrupted" in err
    assert f"`evalnb resume {run_id}` (or the same `evalnb run`) continues it" in err
