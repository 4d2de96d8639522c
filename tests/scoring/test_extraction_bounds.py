"""Extraction is bounded: linear work on at most MAX_INPUT_CHARS characters, for every type.

Before, ``number`` searched the rest of the text once per marker: the 20 KB repetition loop
below took ~20-35 s and a megabyte of ``####`` lines did not finish, on the runner's event loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from evalnb.scoring import extraction
from evalnb.scoring.extraction import MAX_INPUT_CHARS, clean_output, extract_output

LOOP = "The answer is 5. " + "answer is " * 2000  # 20 KB: a repetition loop at max tokens
HASHES = "####\n" * 200_000  # 1 MB of markers with no number after any of them

SPECS = {
    "none": {"type": "none"},
    "take_first": {"type": "take_first", "lines": 3},
    "regex": {"type": "regex", "pattern": r"(\d+)\s*$"},
    "regex_last": {"type": "regex_last", "pattern": r"-?\d+"},
    "label_set": {"type": "label_set", "labels": ["A", "B", "answer is"]},
    "number": {"type": "number"},
}

# 1 MB inputs that hurt a scan-per-marker or a backtracking reader
HOSTILE = {
    "hashes": HASHES,
    "answer_is": "answer is " * 100_000,
    "boxed": "\\boxed{" * 150_000,
    "digits": "1" * 1_000_000,
    "commas": "1,234" * 200_000,
    "fractions": "1/" * 500_000,
    "frac_open": "\\frac{ " * 150_000,
    "think": "<think>" * 150_000,
    "fences": "```\n" * 250_000,
    "loop_then_tail": LOOP * 50,
}

CHILD = r"""
import json, sys, time
from evalnb.scoring.extraction import make_extractor
specs, hostile = json.loads(sys.argv[1]), json.loads(sys.argv[2])
texts = {name: eval(expr) for name, expr in hostile.items()}
out = {}
for kind, spec in specs.items():
    ex = make_extractor(spec)
    ex("warm up 1")
    for name, text in texts.items():
        t = time.perf_counter()
        ex(text)
        out[f"{kind}/{name}"] = time.perf_counter() - t
print(json.dumps(out))
"""

EXPRS = {
    "hashes": '"####\\n" * 200_000',
    "answer_is": '"answer is " * 100_000',
    "boxed": '"\\\\boxed{" * 150_000',
    "digits": '"1" * 1_000_000',
    "commas": '"1,234" * 200_000',
    "fractions": '"1/" * 500_000',
    "frac_open": '"\\\\frac{ " * 150_000',
    "think": '"<think>" * 150_000',
    "fences": '"```\\n" * 250_000',
    "loop_then_tail": '("The answer is 5. " + "answer is " * 2000) * 50',
}


def test_every_type_on_hostile_megabyte_inputs_finishes_in_bounded_time():
    # In a child process so a regression cannot hang the suite: the whole grid (6 types x 10
    # inputs of ~1 MB) must finish within the timeout, and no single call may take 5 s
    # (each takes milliseconds; the old `number` took minutes on the first input).
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(SPECS), json.dumps(EXPRS)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(extraction.__file__).parents[2])})
    assert done.returncode == 0, done.stderr
    times = json.loads(done.stdout)
    assert len(times) == len(SPECS) * len(EXPRS)
    slow = {case: round(t, 2) for case, t in times.items() if t > 5.0}
    assert not slow


def test_the_hostile_inputs_are_the_ones_named():
    for name, expr in EXPRS.items():
        assert eval(expr) == HOSTILE[name]


def test_the_repetition_loop_and_the_hashes_give_the_old_answers():
    assert extract_output(LOOP, {"type": "number"}) == "5"
    assert extract_output(HASHES, {"type": "number"}) is None
    assert extract_output(HASHES + "#### 7", {"type": "number"}) is None  # past the input cap
    assert extract_output(HASHES[:5000] + "#### 7", {"type": "number"}) == "7"


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_every_type_reads_only_the_first_max_input_chars(kind):
    first = "The answer is 12. Label A.\n"
    head = first + " " * (MAX_INPUT_CHARS - len(first))  # the cap falls right after it
    tail = "\n#### 99 B <think>" + "x" * 50
    capped = extract_output(head + tail, SPECS[kind])
    assert capped == extract_output((head + tail)[:MAX_INPUT_CHARS], SPECS[kind])
    assert "99" not in (capped or "")


# --- the bounded `number` against the old scan-per-marker, on small random texts ------------------


def old_number(text: str) -> str | None:
    """The previous implementation: for each marker from the last, search the rest of the text."""
    text = extraction._FRAC.sub(r"\1/\2", clean_output(text).replace("{,}", ",").replace("\u2212", "-"))
    for marker in reversed(list(extraction._MARKER.finditer(text))):
        match = extraction._NUMBER.search(text, marker.end())
        if match is not None:
            return extraction._canonical(match)
    last = None
    for last in extraction._NUMBER.finditer(text):
        pass
    return None if last is None else extraction._canonical(last)


PIECES = ["####", "#", "\\boxed{", "\\boxed {", "}", "answer is", "Answer  IS", "answeris", "is",
          "-", "1", "23", "4,567", "1,2", ".5", "3.50", "1e3", "2/4", "/", ",", ".", " ", "\n",
          "x", "a", "(", ")", "]", "\\frac{1}{2}", "{,}", "\u2212", "<think>", "</think>", "e"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_number_matches_the_old_scan_on_random_texts(pieces):
    text = "".join(pieces)
    assert extract_output(text, {"type": "number"}) == old_number(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="#answeri 0123456789-.,/\\boxed{}e\n", max_size=60))
def test_number_matches_the_old_scan_on_random_characters(text):
    assert extract_output(text, {"type": "number"}) == old_number(text)


def test_the_fast_path_lookaheads_change_no_match():
    # the patterns without their leading lookahead find exactly the same spans
    number_src = extraction._NUMBER._source.replace("(?=[-.0-9])", "", 1)
    marker_src = extraction._MARKER._source.replace("(?=[#\\\\a])", "", 1)
    assert number_src != extraction._NUMBER._source and marker_src != extraction._MARKER._source
    plain_number = regex.compile(number_src, regex.VERBOSE)
    plain_marker = regex.compile(marker_src, regex.IGNORECASE)
    text = "".join(PIECES * 3) + " word 12 and -3.5, 1,234 e5 1/2 #### ANSWER is 4 \\boxed{9}"
    assert [m.span() for m in extraction._NUMBER.finditer(text)] == [m.span() for m in plain_number.finditer(text)]
    assert [m.span() for m in extraction._MARKER.finditer(text)] == [m.span() for m in plain_marker.finditer(text)]
