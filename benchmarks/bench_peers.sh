#!/usr/bin/env bash
# Side-by-side with the peers, in one run: evalnb, the bare aiohttp loop and lm-eval's leanest
# configuration against the shared bench's mock server (../shared/bench). Run by hand:
#
#   benchmarks/bench_peers.sh [LATENCY_MS ...]       (default: 0 50)
#
# Needs the bench's two venvs (see ../shared/bench/README.md):
#   python3 -m venv /tmp/anchors-venv && /tmp/anchors-venv/bin/pip install -r ../shared/bench/anchors/requirements.txt
#   python3 -m venv /tmp/mock-venv    && /tmp/mock-venv/bin/pip install -r ../shared/bench/requirements-mock.txt
# and evalnb installed in .venv (make venv). The shared folder is read-only, so it is copied
# to a scratch folder first; the table lands in benchmarks/out/RESULTS.md.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_BENCH:-$here/../shared/bench}
work=${BENCH_WORK:-/tmp/evalnb-bench}
rm -rf "$work" && mkdir -p "$work" && cp -r "$shared/." "$work/"
chmod -R u+w "$work"
rm -f "$work/results/runs.jsonl"
cd "$work"
# A pip-installed evalnb has its bytecode compiled; an editable one under PYTHONDONTWRITEBYTECODE=1
# (set on this machine) would recompile ~20 modules from source in every timed run (~40 ms).
"${EVALNB_VENV:-$here/.venv}/bin/python" -m compileall -q "$here/evalnb"
TOOLS=${TOOLS:-"evalnb raw lm_eval_lean"} EVALNB_VENV=${EVALNB_VENV:-$here/.venv} \
  REPEATS=${REPEATS:-3} ./run_anchors.sh "${@:-0 50}"
mkdir -p "$here/benchmarks/out"
cp RESULTS.md "$here/benchmarks/out/RESULTS.md"
cp results/runs.jsonl "$here/benchmarks/out/runs.jsonl"
sed -n '/table:start/,/table:end/p' RESULTS.md
