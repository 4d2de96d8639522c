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


# ---- catastrophic backtracking: the search leaves the loop, and a timeout is the sample's error

BACKTRACKING = r"Answer:\s*((?:\w|\w\w)+)+\s*$"  # fine on "Answer: 42", exponential on "Answer: aaaa…a!"
HOSTILE = "Answer: " + "a" * 40 + "!"
N_NORMAL, EVERY = 500, 21  # one hostile reply in 21: 25 among 500 normal ones


def _hostile_or_normal(body: dict) -> str:
    n = item_number(body["messages"][-1]["content"])
    return HOSTILE if n % EVERY == EVERY - 1 else f"Answer: {n}"


@pytest.mark.timeout(240)
def test_hostile_replies_neither_stall_the_calls_nor_score_silently(make_suite):
    n_items = N_NORMAL + 25
    suite = make_suite({"t": rows(n_items)}, t={"output_extraction": {"type": "regex", "pattern": BACKTRACKING}})
    with LocalModelServer(_hostile_or_normal) as server:
        result = evalnb.run(suite, [Model("m", base_url=server.base_url, api="chat")], concurrency=25,
                            progress=False, reuse=False)
        prompts = [r.body["messages"][-1]["content"] for r in server.requests]
        arrivals = server.arrival_times

    assert result.status == "completed" and len(result.samples) == n_items
    samples = result.samples.set_index("sample_index")
    hostile = [i for i in range(n_items) if i % EVERY == EVERY - 1]
    assert len(hostile) == 25
    for i in hostile:  # each says why it has no answer: not a silent None
        assert samples.loc[i, "status"] == "failed"
        error = samples.loc[i, "error"]  # the frame shows the message
        assert "output_extraction regex timed out" in error and repr(BACKTRACKING) in error, error
    normal = samples.drop(index=hostile)
    assert (normal["status"] == "completed").all() and len(normal) == N_NORMAL
    assert (normal["extracted_output"] == normal.index.astype(str)).all()
    # the server saw the normal calls arrive with no pause: each hostile search took 0.25 s of
    # CPU on the loop before (25 of them: seconds of stall); now only QUICK_S of it does
    normal_arrivals = sorted(t for t, p in zip(arrivals, prompts) if item_number(p) not in hostile)
    gaps = [b - a for a, b in zip(normal_arrivals, normal_arrivals[1:])]
    assert max(gaps) < 0.100, f"normal calls paused for {max(gaps) * 1000:.0f} ms"


def test_a_strict_extractor_raises_and_the_public_one_returns_none():
    from evalnb.scoring.extraction import ExtractionTimeout, make_extractor
    from evalnb.scoring.off_loop import LATER, LoopExtractor

    spec = {"type": "regex", "pattern": BACKTRACKING}
    assert evalnb.extract_output(HOSTILE, spec) is None  # documented: past the bound, no match
    with pytest.raises(ExtractionTimeout, match="timed out"):
        make_extractor(spec, strict=True)(HOSTILE)
    loop_extractor = LoopExtractor(spec)
    assert loop_extractor.now("Answer: 42") == "42"
    assert loop_extractor.now(HOSTILE) is LATER  # too long for the loop's thread: goes to the pool
    assert LoopExtractor({"type": "number"}).now("the answer is 7") == "7"  # linear types stay inline
