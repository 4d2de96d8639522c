#!/usr/bin/env python3
"""Serve `evalnb.testing.LocalModelServer` in its own process, for benchmarks (run by hand).

In-process, the server would share the benchmarked process's GIL; here it has a core of its
own, like a real model server. Prints ``ready <base_url>`` once listening and serves until
killed (SIGTERM/SIGINT) or until ``--seconds`` have passed.

    .venv/bin/python benchmarks/serve_local.py --port 18090 --latency-ms 0 &
    .venv/bin/python benchmarks/serve_local.py --port 18091 --latency-ms 50 --max-concurrency 16 &
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def answer(body: dict) -> str:
    """The sum asked for in "What is A + B?" (the benchmarks' questions), else "0"."""
    import re

    text = str(body.get("input") or "")
    if not text:
        messages = body.get("messages") or []
        text = str(messages[-1].get("content") if messages else "")
    found = re.search(r"What is (\d+) \+ (\d+)\?", text)
    return str(int(found[1]) + int(found[2])) if found else "0"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--max-concurrency", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=4 * 3600, help="stop by itself after this long")
    args = ap.parse_args()
    from evalnb.testing import LocalModelServer

    server = LocalModelServer(answer, latency=args.latency_ms / 1000, port=args.port, record=False,
                              max_concurrency=args.max_concurrency)
    server.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"ready {server.base_url}", flush=True)
    stop.wait(args.seconds)
    served = server.request_count
    server.stop()
    print(f"served {served}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
