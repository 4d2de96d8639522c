"""A Ray run leaves its process alive: evalnb starts Ray itself in a fresh process (no
`ray_runtime` fixture), and the process, with a second Ray run in it, stays healthy for 90 s.

Ray's GCS and raylet get a parent-death signal bound to the *thread* that called ``ray.init()``
(Linux's PR_SET_PDEATHSIG); started from a short-lived thread, they died with it and the driver
exited 60 s later ("Failed to connect to GCS within 60 seconds"). Also: a request no node of the
cluster can hold fails within seconds, with what Ray has, instead of waiting at 0/N.
Marked slow (real Ray, 90 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import asyncio, json, os, sys, time
    sys.path.insert(0, {tests!r})
    import evalnb
    from evalnb import Model
    from evalnb.suite import Suite
    from evalnb.testing import LocalModelServer
    from helpers.runner_kit import manifest, rows, responder

    data = {data!r}
    suite = Suite.from_dict(manifest(__import__("pathlib").Path(data), {{"qa": rows(40)}}), base_dir=data)
    with LocalModelServer(responder) as server:
        model = Model("m", base_url=server.base_url, api="chat")

        async def in_a_notebook():  # a running loop: evalnb.run moves to its own thread, as in Jupyter
            return evalnb.run(suite, [model], progress=False, reuse=False,
                              executor=evalnb.RayExecutor(num_workers=1))

        first = asyncio.run(in_a_notebook())
        print("first", first.status, len(first.samples), flush=True)
        import ray
        started = time.monotonic()
        while time.monotonic() - started < {hold}:
            time.sleep(5)
            assert ray.is_initialized()
            print("alive", round(time.monotonic() - started), flush=True)
            if time.monotonic() - started > 40 and "second" not in globals():
                second = evalnb.run(suite, [model], progress=False, reuse=False,  # the README's example
                                    executor=evalnb.RayExecutor(num_workers=2, concurrency_per_worker=16,
                                                                resources={{"num_cpus": 1}}))
                print("second", second.status, len(second.samples), flush=True)
        print("nodes", sum(n["Alive"] for n in ray.nodes()), flush=True)
        print("done", flush=True)
""")


def _child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env.update(EVALNB_HOME=str(home), PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    return env


def test_a_ray_run_leaves_its_process_alive_for_90_seconds(tmp_path):
    script = CHILD.format(tests=str(ROOT / "tests"), data=str(tmp_path / "data"), hold=90)
    (tmp_path / "home").mkdir()
    proc = subprocess.run([sys.executable, "-c", script], env=_child_env(tmp_path / "home"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=420)
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out[-2000:]}\n{proc.stderr[-3000:]}"
    assert "first completed 40" in out and "second completed 40" in out, out
    assert "nodes 1" in out and out.rstrip().endswith("done"), out
    assert "Failed to connect to GCS" not in proc.stderr


INFEASIBLE = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    import evalnb
    from evalnb import Model
    from evalnb.suite import Suite
    from evalnb.testing import LocalModelServer
    from helpers.runner_kit import manifest, rows, responder

    suite = Suite.from_dict(manifest(__import__("pathlib").Path({data!r}), {{"qa": rows(20)}}), base_dir={data!r})
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    with LocalModelServer(responder) as server:
        model = Model("m", base_url=server.base_url, api="chat")
        for executor in ({options}):
            started = time.monotonic()
            try:
                evalnb.run(suite, [model], progress=False, reuse=False, executor=executor)
            except Exception as exc:
                print("ERROR", round(time.monotonic() - started, 1), type(exc).__name__, str(exc).replace("\\n", " "))
            else:
                print("RAN")
""")


def test_a_request_ray_cannot_place_fails_within_seconds_saying_why(tmp_path):
    options = ('evalnb.RayExecutor(num_workers=8, concurrency_per_worker=16, resources={"num_cpus": 2}), '
               'evalnb.RayExecutor(num_workers=1, resources={"num_gpus": 1}), '
               'evalnb.RayExecutor(resources={"num_cpus": 2})')
    script = INFEASIBLE.format(tests=str(ROOT / "tests"), data=str(tmp_path / "data"), options=options)
    (tmp_path / "home").mkdir()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], env=_child_env(tmp_path / "home"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 3, proc.stdout
    eight, gpu, default = lines
    # 8 workers x 2 CPUs on a 2-CPU Ray: what was asked, what the cluster has
    assert eight.startswith("ERROR") and "EvalnbError" in eight, eight
    assert "8 workers" in eight and "'CPU': 2" in eight and "16" in eight, eight
    assert float(eight.split()[1]) < 10, eight
    assert gpu.startswith("ERROR") and "GPU" in gpu and "no node" in gpu, gpu
    assert default == "RAN"  # the default number of workers fits the cluster (1 worker of 2 CPUs)
    assert time.monotonic() - started < 240
