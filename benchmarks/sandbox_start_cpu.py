"""What starting a sandbox worker costs in CPU, which a busy machine does not inflate much.

Run by hand: ``.venv/bin/python benchmarks/sandbox_start_cpu.py [N]`` (default 20 workers).
Each worker is started and closed in turn; the CPU of all its processes (the waiter and the
worker it forks, reaped one after the other) is read from ``RUSAGE_CHILDREN``. Wall-clock
start time is printed too, but on a shared machine it mostly measures the wait for a core.
To compare builds, run it with ``PYTHONPATH`` at each build's tree, interleaved.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from pathlib import Path

if __name__ == "__main__" and "evalnb" not in sys.modules:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree unless PYTHONPATH says otherwise

from evalnb.sandbox.process import WorkerProcess  # noqa: E402


def main(n: int) -> None:
    cpu, wall = [], []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        worker = WorkerProcess.start(memory_mb=2048, file_mb=1024)
        wall.append((time.perf_counter() - started) * 1000)
        worker.close()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
    print(f"worker start + exit, CPU of all its processes: median {statistics.median(cpu):.1f} ms, "
          f"min {min(cpu):.1f} ms; start wall-clock median {statistics.median(wall):.0f} ms, min {min(wall):.0f} ms "
          f"({n} workers)")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
