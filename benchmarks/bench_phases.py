"""Where one bench process's time goes: wall / CPU seconds per phase of the shared bench's evalnb run.

Run by hand against the shared bench's mock (../shared/bench/mock_openai.py):
``python benchmarks/bench_phases.py http://127.0.0.1:PORT/v1 [path/to/qa_2000.jsonl]``; one line
on stderr, ``PH phase:wall/cpu ...`` (CPU is the whole process's, the preload thread included).
The engine's phases are marked by wrapping its methods: a probe, not evalnb's API.
"""
import time, sys, atexit
W0 = time.perf_counter()
marks = []
def mark(n): marks.append((n, time.perf_counter() - W0, time.process_time()))
import evalnb
mark("import")
from evalnb.runner import engine as E
def wrap(cls, name):
    f = getattr(cls, name)
    if asyncio_iscoro(f):
        async def g(self, *a, **k):
            mark(name + "<"); r = await f(self, *a, **k); mark(name + ">"); return r
    else:
        def g(self, *a, **k):
            mark(name + "<"); r = f(self, *a, **k); mark(name + ">"); return r
    setattr(cls, name, g)
import inspect
asyncio_iscoro = inspect.iscoroutinefunction
for n in ("_open_run", "_prepare_tasks", "_run_all", "_shutdown"):
    wrap(E.RunEngine, n)
from evalnb.runner.run_context import RunContext
_first = []
orig_call = RunContext.call
async def call(self, unit):
    if not _first: _first.append(1); mark("first_call")
    return await orig_call(self, unit)
RunContext.call = call
from pathlib import Path
DATA = Path(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).resolve().parents[2] / "shared/bench/data/qa_2000.jsonl")
GRADER = "def grade(sample, item):\n    return 1.0 if sample['extracted_output'] == item['target'] else 0.0\n"
suite = evalnb.Suite.from_dict({"tasks": [{
    "id": "qa_2000", "type": "qa", "dataset": {"path": str(DATA), "format": "jsonl"},
    "prompt_template": "Question: {{question}}\nAnswer:", "target_template": "{{answer}}",
    "output_extraction": {"type": "none"}, "metrics": [{"id": "exact_match"}],
    "grader": {"type": "python", "contract": "sample", "metric_id": "exact_match", "source": GRADER},
}]})
mark("suite")
model = evalnb.Model("mock-model", base_url=sys.argv[1], api="chat", api_key="mock")
result = evalnb.run(suite, models=[model], concurrency=25, progress=False,
                    generation={"temperature": 0, "max_gen_toks": 16, "until": ["\n"]})
mark("run")
m = result.metrics
n = len(result.samples)
mark("results")
def last():
    mark("atexit")
    prev = (0.0, 0.0)
    out = []
    for name, w, c in marks:
        out.append(f"{name}:{w - prev[0]:.3f}/{c - prev[1]:.3f}")
        prev = (w, c)
    sys.stderr.write("PH " + " ".join(out) + "\n")
atexit.register(last)
