"""Run one page's blocks in order, in this interpreter, as a reader pasting them would.

    python doc_page_runner.py < blocks.json      (cwd: the page's own folder)

``blocks.json`` is a list of ``{"where", "lang", "code", "file"}``. Python blocks share one
namespace and show their last expression as a notebook cell would (its ``repr`` is printed, so
a repr that raises fails the block); a block may ``await`` at top level. Bash blocks run with
``bash -eo pipefail``; ``console`` blocks compare each ``$ command``'s output with the page.
Only 127.0.0.1 may be reached: any other address is refused (the docs run offline).
Exit status 1 and the failing block's place on the first failure.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import ipaddress
import json
import re
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path


def _loopback_only() -> None:
    connect = socket.socket.connect

    def guarded(self, address):  # type: ignore[no-untyped-def]
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]
            try:
                loopback = ipaddress.ip_address(host).is_loopback
            except ValueError:
                loopback = host == "localhost"
            if not loopback:
                raise OSError(f"docs examples run offline: refused a connection to {address!r}")
        return connect(self, address)

    socket.socket.connect = guarded  # type: ignore[method-assign]


def run_python(code: str, namespace: dict, loop: asyncio.AbstractEventLoop) -> None:
    tree = ast.parse(code, mode="exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    for node, mode in ((tree, "exec"), (last, "eval")):
        if node is None:
            continue
        compiled = compile(node, "<block>", mode, flags=flags)
        value = eval(compiled, namespace)
        if asyncio.iscoroutine(value):
            value = loop.run_until_complete(value)
        if mode == "eval" and value is not None:
            print(repr(value))


def run_console(code: str) -> None:
    """``$ cmd`` lines and the output shown under each; the output must match line for line."""
    steps: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    # one shell for the whole block, so `echo $?` sees the previous command's status
    script = "".join(f"{command} 2>&1; __status=$?; echo '<<<{i}>>>'; (exit $__status)\n"
                     for i, (command, _) in enumerate(steps))
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    outputs = re.split(r"^<<<\d+>>>\n", done.stdout, flags=re.M)
    for (command, shown), printed in zip(steps, outputs):
        got = printed.splitlines()
        if got != shown:
            raise AssertionError(f"`{command}` printed\n" + "\n".join(got) + "\nbut the page shows\n" + "\n".join(shown))


def main() -> int:
    _loopback_only()
    blocks = json.load(sys.stdin)
    namespace: dict = {"__name__": "__main__"}
    loop = asyncio.new_event_loop()
    for block in blocks:
        start = time.monotonic()
        print(f"--- {block['where']} ({block['lang']})", flush=True)
        try:
            if block.get("file"):
                Path(block["file"]).write_text(block["code"], encoding="utf-8")
            elif block["lang"] == "python":
                run_python(block["code"], namespace, loop)
            elif block["lang"] == "bash":
                sys.stdout.flush()
                subprocess.run(["bash", "-eo", "pipefail", "-c", block["code"]], check=True)
            elif block["lang"] == "console":
                run_console(block["code"])
        except BaseException:  # noqa: BLE001 - report any failure with the block's place
            sys.stdout.flush()
            print(f"FAILED: the block at {block['where']}", file=sys.stderr)
            traceback.print_exc()
            return 1
        print(f"    ({time.monotonic() - start:.1f}s)", flush=True)
    with contextlib.suppress(Exception):
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
