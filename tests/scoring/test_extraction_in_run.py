"""Runaway outputs do not stall a run: the other calls keep flowing while they are extracted.

Extraction runs on the runner's event loop, so a slow one stops every call, the panel and the
heartbeat. Two of the items below answer with what used to take ~20-35 s (the 20 KB repetition
loop) and minutes (a megabyte of ``####`` lines) to extract as a ``number``; the server's
reply times must show no pause anywhere near that long.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest

import evalnb
from evalnb.providers import Model
from evalnb.testing import LocalModelServer
from helpers.runner_kit import item_number, rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

LOOP = "The answer is 5. " + "answer is " * 2000
HASHES = "####\n" * 200_000
ITEMS = 40


def answer(body: dict) -> str:
    n = item_number(body["messages"][-1]["content"])
    return {3: LOOP, 7: HASHES, 21: LOOP}.get(n, f"so the answer is {n}")


@pytest.mark.timeout(180)
def test_runaway_outputs_do_not_pause_the_other_calls(make_suite):
    suite = make_suite({"t": rows(ITEMS)}, t={"output_extraction": {"type": "number"}})
    with LocalModelServer(answer, latency=0.02) as server:
        started = time.monotonic()
        result = evalnb.run(suite, [Model("m", base_url=server.base_url, api="chat")],
                            concurrency=4, progress=False)
        wall = time.monotonic() - started
        replies = sorted(t for t in server.answer_times if t is not None)

    assert result.status == "completed" and len(result.samples) == ITEMS
    extracted = dict(zip(result.samples["sample_index"], result.samples["extracted_output"]))
    assert extracted[3] == extracted[21] == "5"
    assert pd.isna(extracted[7])  # no number anywhere in its first 100,000 characters
    assert all(extracted[i] == str(i) for i in range(ITEMS) if i not in (3, 7, 21))
    assert len(replies) == ITEMS
    # The old extraction paused the loop for ~20 s per loop output (and minutes for the
    # hashes); these bounds are far above what a loaded 2-core machine needs (~1-3 s in all).
    gaps = [b - a for a, b in zip(replies, replies[1:])]
    assert max(gaps) < 5.0, f"calls paused for {max(gaps):.1f} s"
    assert wall < 60.0
