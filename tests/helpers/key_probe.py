"""A grader that tries every route an attacker would take to a key, and the callers it attacks.

``PROBE`` is grader source (stdlib only, it runs in the sandbox). Given the key fragments to
look for and the pids of the processes holding the keys, it reads its own environment, the
``environ``, ``cmdline`` and memory (``/proc/<pid>/mem`` through ``maps``) of every process
it can see plus the ones it was told about, tries ``pidfd_open`` + ``pidfd_getfd`` on them,
``process_vm_readv`` and ``ptrace``, reads every file it has open, and connects to the model
server. It reports what it found and, per route, how far it got. A canary in its own memory
shows the memory scanner works: a route that finds nothing has really looked.

The fragments reach the probe reversed: the probe reverses them itself, so the forward
strings exist in its own memory; its own process is scanned for the canary only.
"""

from __future__ import annotations

PROBE = r'''
import ctypes, errno, os, socket, stat

CANARY = "canary-" + "7f3a9c1e5b"
MAX_SCAN = 384 * 1024 * 1024


def _errname(code):
    return errno.errorcode.get(code, str(code))


def _scan_memory(pid, needles, budget):
    """(regions read, bytes read, needles found) in the readable mappings of `pid`."""
    regions, total, found = 0, 0, set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            parts = line.split()
            if "r" not in parts[1] or (len(parts) > 5 and parts[5] in ("[vvar]", "[vsyscall]")):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            size = min(hi - lo, budget - total)
            if size <= 0:
                break
            try:
                mem.seek(lo)
                data = mem.read(size)
            except (OSError, OverflowError, ValueError):
                continue
            regions += 1
            total += len(data)
            found.update(n for n in needles if n in data)
    return regions, total, found


def grade(sample, item):
    needles = [f[::-1].encode() for f in item["reversed_fragments"]]
    me = str(os.getpid())
    found, routes = [], {}

    def check(route, data):
        for n in needles:
            if n in data:
                found.append(f"{route}: {n.decode()}")

    check("os.environ", repr(dict(os.environ)).encode())
    visible = sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int)
    routes["visible_pids"] = len(visible)
    targets = sorted(set(visible) | {str(p) for p in item["target_pids"]} | {str(os.getppid())} - {"0"}, key=int)
    opened = {}
    for pid in targets:
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as f:
                    data = f.read()
                opened[name] = opened.get(name, 0) + 1
                check(f"/proc/{pid}/{name}", data)
            except OSError as exc:
                routes.setdefault(f"{name}_errors", []).append(_errname(exc.errno))
        try:
            if pid == me:
                regions, total, hit = _scan_memory(pid, [CANARY.encode()], MAX_SCAN)
                routes["own_memory"] = {"regions": regions, "bytes": total, "canary": bool(hit)}
            else:
                regions, total, hit = _scan_memory(pid, needles, MAX_SCAN)
                routes[f"memory_{pid}"] = {"regions": regions, "bytes": total}
                found.extend(f"/proc/{pid}/mem: {n.decode()}" for n in hit)
        except OSError as exc:
            routes.setdefault("memory_errors", []).append(_errname(exc.errno))
    routes["proc_files_read"] = opened

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    pidfd_results = []
    for pid in targets:
        if pid == me:
            continue
        pidfd = libc.syscall(434, int(pid), 0)  # pidfd_open
        if pidfd < 0:
            pidfd_results.append(_errname(ctypes.get_errno()))
            continue
        pidfd_results.append("opened")
        for target in range(64):
            fd = libc.syscall(438, pidfd, target, 0)  # pidfd_getfd
            if fd < 0:
                continue
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):  # a pipe or socket would block
                    check(f"pidfd_getfd {pid}:{target}", os.pread(fd, 1 << 20, 0))
            except OSError:
                pass
            finally:
                os.close(fd)
        os.close(pidfd)
    routes["pidfd_open"] = sorted(set(pidfd_results)) or ["no other process to try"]

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    buf = ctypes.create_string_buffer(64)
    local, remote = IoVec(ctypes.addressof(buf), 64), IoVec(0x400000, 64)
    vm, trace = [], []
    for pid in item["target_pids"]:
        r = libc.syscall(310, int(pid), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)  # process_vm_readv
        vm.append("read" if r >= 0 else _errname(ctypes.get_errno()))
        r = libc.syscall(101, 0x4206, int(pid), 0, 0)  # ptrace(PTRACE_SEIZE): attach without stopping
        if r == 0:
            trace.append("attached")
            libc.syscall(101, 17, int(pid), 0, 0)  # PTRACE_DETACH
        else:
            trace.append(_errname(ctypes.get_errno()))
    routes["process_vm_readv"], routes["ptrace"] = sorted(set(vm)), sorted(set(trace))

    own_files = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        own_files.append(path)
        if os.path.isfile(path):
            try:
                with open(path, "rb") as f:
                    check(f"own fd {fd} ({path})", f.read(1 << 20))
            except OSError:
                pass
    routes["own_fds"] = len(own_files)

    try:
        with socket.create_connection(("127.0.0.1", item["port"]), timeout=2):
            routes["network"] = "connected"
    except OSError as exc:
        routes["network"] = type(exc).__name__
    return {"scores": {"leaks": len(found)}, "judge": {"found": found, "routes": routes}}
'''

CALLER = r'''
"""The attacked caller: keys in its initial environment, in a file it holds open, and one
set from Python. argv: mode (run | pool), fragments file, output file; env: the keys."""
import json, os, sys

mode, fragments_path, out_path = sys.argv[1:4]
fragments = json.load(open(fragments_path))
held = open(os.environ["PROBE_KEY_FILE"])                  # an open file holding a key
os.environ["PROBE_LATE_KEY"] = "sk-late-" + fragments[2]   # set later: only in memory
in_memory = "sk-memory-" + fragments[3]                    # a key in a Python variable
target_pids = [os.getpid(), os.getppid()]
sys.path.insert(0, os.environ["PROBE_HELPERS"])
from key_probe import PROBE

row = {"reversed_fragments": [f[::-1] for f in fragments], "target_pids": target_pids}
if mode == "run":
    import evalnb
    from evalnb.suite import Suite
    from evalnb.testing import LocalModelServer

    data = os.path.join(os.environ["PROBE_WORK"], "rows.jsonl")
    with LocalModelServer(lambda body: "ok") as server:
        row["port"] = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        with open(data, "w") as f:
            f.write(json.dumps({**row, "q": "hello"}) + "\n")
        suite = Suite.from_dict({"tasks": [{
            "id": "probe", "type": "qa", "dataset": {"path": data}, "prompt_template": "{{q}}",
            "grader": {"source": PROBE}, "metrics": [{"id": "leaks"}]}]})
        model = evalnb.Model("m", base_url=server.base_url, api="chat", api_key_env="OPENAI_API_KEY")
        allow = json.loads(os.environ.get("PROBE_ALLOW_NETWORK", "false"))
        result = evalnb.run(suite, [model], progress=False, allow_network=allow)
        samples = result.samples
        out = {"status": list(samples.status), "errors": [e for e in samples.error if e],
               "judge": [j for j in samples.judge], "leaks": [float(x) for x in samples["leaks"]]}
else:  # the sandbox pool alone (stdlib only: runs with a plain interpreter as another user)
    from evalnb.sandbox import Job, SandboxPool, UserCode

    row["port"] = 9  # nothing listens there; the route is still tried
    unconfined = os.environ.get("PROBE_UNCONFINED") == "1"  # the control: protections off
    with SandboxPool(1, namespaces=False, seccomp=False, filesystem=False) if unconfined else SandboxPool(1) as pool:
        job = Job(UserCode(source=PROBE, filename="probe.py"), names=("grade",), nargs=2)
        (res,) = pool.run_sync(job, [[{}, row]])
        out = {"ok": res.ok, "error": res.error, "value": res.value, "isolation": pool.isolation}
json.dump(out, open(out_path, "w"))
held.close()
'''

LAUNCHER = r'''
"""Stands in for `jupyter lab`: started with the keys exported, it starts the caller (the kernel)."""
import subprocess, sys
sys.exit(subprocess.run([sys.executable, *sys.argv[1:]]).returncode)
'''
