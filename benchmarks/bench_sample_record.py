"""What one sample record costs on the run's hot path: build it, fill it, encode it for the store.

Compares the untyped dict the engine used before issue 20, the slotted dataclass
`evalnb.sample.Sample`, and (if installed) a `msgspec.Struct` with the same fields. Run by
hand: ``python benchmarks/bench_sample_record.py``; numbers in benchmarks/README.md.
"""

from __future__ import annotations

import operator
import timeit
from typing import Any

from evalnb.sample import STORED_FIELDS, Sample
from evalnb.store._codec import SampleEncoder  # noqa: PLC2701 - a benchmark of the private encoder

ROW = {"q": "ITEM-1: what number is this?", "a": "1"}
N = 50_000


def as_dict() -> dict[str, Any]:
    s = {"task_id": "t", "model": "m", "sample_index": 1, "epoch": 0, "prompt": "p", "prompt_text": "p",
         "target": "1", "dataset_row": ROW, "output_text": None, "extracted_output": None, "response_id": None,
         "usage": None, "latency_s": None, "scores": {}, "judge": None, "error": None, "log": None,
         "status": "scoring", "cost_usd": None, "cached": False}
    s.update(output_text="1", response_id="r", usage={"input_tokens": 5, "output_tokens": 1}, latency_s=0.01,
             request_key="k" * 32, cost_usd=None)
    s["extracted_output"] = "1"
    s["scores"] = {"score": 1.0}
    s["status"] = "completed"
    return s


def as_sample(cls: Any = Sample) -> Any:
    s = cls("t", "m", 1, 0, "p", "p", "1", ROW)
    s.request_key = "k" * 32
    s.output_text, s.response_id, s.latency_s = "1", "r", 0.01
    s.usage = {"input_tokens": 5, "output_tokens": 1}
    s.extracted_output = "1"
    s.scores = {"score": 1.0}
    s.status = "completed"
    return s


def main() -> None:
    read = operator.attrgetter(*STORED_FIELDS)
    cases = {"dict": (as_dict, lambda s: [s[k] for k in s]), "dataclass(slots) Sample": (as_sample, read)}
    try:
        import msgspec

        planned = [(n, Any) for n in Sample.__slots__[:8]]
        later = [(n, Any, 0 if n == "missing_field" else {} if n == "scores" else "scoring" if n == "status"
                  else False if n == "cached" else None) for n in Sample.__slots__[8:]]
        Struct = msgspec.defstruct("Struct", planned + later)

        def as_struct() -> Any:
            return as_sample(Struct)

        cases["msgspec.Struct"] = (as_struct, read)
    except ImportError:
        print("(msgspec not installed: skipped)")
    for name, (build, fields_of) in cases.items():
        t = min(timeit.repeat(lambda: fields_of(build()), number=N, repeat=5)) / N
        print(f"build + fill + read fields  {name:24s} {t * 1e6:6.2f} us")
    for name, build in (("dict", as_dict), ("dataclass(slots) Sample", as_sample)):
        enc = SampleEncoder()
        samples = [build() for _ in range(N)]
        t = min(timeit.repeat(lambda: [enc.encode(s, "run", 0) for s in samples], number=1, repeat=5)) / N
        print(f"store encode                {name:24s} {t * 1e6:6.2f} us")


if __name__ == "__main__":
    main()
