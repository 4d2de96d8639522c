"""What a crash can lose: at most the answers of the last moments before it (README: "Crashes").

A child process runs a fast suite (concurrency 8) against a LocalModelServer in this process,
which records when each reply went out. The test SIGKILLs the child at a random point, then
resumes the run: every prompt asked again is an answer the crash lost. None may be older
than LOSS_BOUND_S at the kill; the store commits what it is handed every 50 ms, and the
bound leaves room for a loaded 2-core machine. The same holds with ``reuse=False``: a
resumed run takes back its own answers from the output cache.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import evalnb
from evalnb.store import Store
from helpers.runner_kit import manifest, rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

N_ITEMS = 500
LOSS_BOUND_S = 0.25  # the README states this bound
CHILD = """
import sys
import evalnb
from evalnb import Model

suite = evalnb.Suite.from_file(sys.argv[1])
evalnb.run(suite, [Model("m", base_url=sys.argv[2], api="chat")], concurrency=8, reuse=sys.argv[3] == "reuse",
           progress=False)
"""


def _prompt(request) -> str:
    return request.body["messages"][-1]["content"]


def _kill_and_resume(tmp_path: Path, server, reuse: bool, kill_after: int) -> dict:
    folder = tmp_path / f"data-{kill_after}"
    suite_path = folder / "suite.json"
    suite_path.parent.mkdir(parents=True)
    suite_path.write_text(json.dumps(manifest(folder, {"t": rows(N_ITEMS, tag=f"-{kill_after}")})))
    store = Store()
    first = server.request_count
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(suite_path), server.base_url,
                              "reuse" if reuse else "fresh"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while server.request_count - first < kill_after and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.001)
    killed_at = time.monotonic()
    os.kill(child.pid, signal.SIGKILL)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, out.decode(errors="replace")
    answered = {}  # prompt -> when its first reply went out
    for request, at in zip(server.requests[first:], server.answer_times[first:]):
        if at is not None and at <= killed_at:
            answered.setdefault(_prompt(request), at)
    run_id = store.list_runs().run_id[0]
    store.close()

    before = server.request_count
    result = evalnb.resume(run_id, progress=False)
    assert result.status == "completed" and len(result.samples) == N_ITEMS
    asked_again = {_prompt(r) for r in server.requests[before:]}
    lost = {p: killed_at - answered[p] for p in asked_again if p in answered}
    return {"answered": len(answered), "lost": lost}


@pytest.mark.parametrize("reuse", [True, False], ids=["reuse", "reuse_false"])
def test_a_crash_loses_only_the_answers_of_its_last_moments(tmp_path, model_server, reuse):
    server = model_server(latency=0.005)
    rng = random.Random(1234 + reuse)
    for kill_after in sorted(rng.sample(range(40, N_ITEMS - 60), 3)):
        outcome = _kill_and_resume(tmp_path, server, reuse, kill_after)
        assert outcome["answered"] >= kill_after - 8  # the kill came mid-run, after real answers
        too_old = {p: round(age, 3) for p, age in outcome["lost"].items() if age > LOSS_BOUND_S}
        assert not too_old, f"answers older than {LOSS_BOUND_S}s at the kill were asked again: {too_old}"
