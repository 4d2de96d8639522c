"""Property tests: no input, however odd, makes manifest validation fail with anything but
ManifestError, and whatever validates has a stable canonical form."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalnb.errors import ManifestError
from evalnb.suite.generation import Generation
from evalnb.suite import Suite

FULL = json.loads((Path(__file__).parents[1] / "fixtures" / "manifests" / "full_suite.json").read_text())

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "json", "csv", "regex", "model_backed", "data/x.jsonl", "org/ds", "(", "https://example.com/x"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
# Values that sit on or just past a limit, or look like the right type but are not.
interesting = st.sampled_from(
    [0, 1, -1, 100, 101, 600, 601, 500, 501, 1_000_000, 1_000_001, True, "", "x" * 513, [], {}, None, "1", 1.5, [None]]
)


def paths_of(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key/index path inside a JSON value."""
    found = []
    if isinstance(value, dict):
        for key, child in value.items():
            found.append(prefix + (key,))
            found += paths_of(child, prefix + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found.append(prefix + (i,))
            found += paths_of(child, prefix + (i,))
    return found


PATHS = paths_of(FULL)


def mutate(manifest: Any, path: tuple, op: str, value: Any) -> None:
    node = manifest
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    last = path[-1]
    if isinstance(node, dict) and isinstance(last, str):
        if op == "drop":
            node.pop(last, None)
        elif op == "rename" and last in node:
            node[last + "x"] = node.pop(last)
        else:
            node[last] = value
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        if op == "drop":
            del node[last]
        else:
            node[last] = value


def check(manifest: Any) -> None:
    try:
        suite = Suite.from_dict(manifest)
    except ManifestError as exc:
        assert exc.errors
        for error in exc.errors:
            assert isinstance(error["loc"], str) and isinstance(error["msg"], str) and error["msg"]
        return
    canonical = suite.to_dict()
    again = Suite.from_dict(json.loads(json.dumps(canonical)))
    assert again == suite and again.version == suite.version


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_arbitrary_json_gives_only_manifest_errors(value):
    check(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["schema_version", "tasks", "metadata", "task"]), json_values, max_size=3))
def test_arbitrary_top_level_objects(value):
    check(value)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(sorted({p[2] for p in PATHS if len(p) > 2 and p[0] == "tasks"})), json_values, max_size=8), min_size=1, max_size=3))
def test_arbitrary_tasks(tasks):
    check({"tasks": tasks})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(PATHS), st.sampled_from(["drop", "replace", "rename", "edge"]), json_values, interesting),
        min_size=1,
        max_size=4,
    )
)
def test_mutated_full_manifest(mutations):
    manifest = copy.deepcopy(FULL)
    for path, op, value, edge in mutations:
        mutate(manifest, path, op, edge if op == "edge" else value)
    check(manifest)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        json_values,
        st.dictionaries(
            st.sampled_from(sorted(set(Generation.model_fields) | {"bogus"})), st.one_of(json_values, interesting), max_size=6
        ),
    )
)
def test_generation_gives_only_manifest_errors(value):
    try:
        gen = Generation.from_value(value)
    except ManifestError as exc:
        assert all(e["loc"].startswith("generation") for e in exc.errors)
        return
    assert Generation.from_value(gen.canonical()).canonical() == gen.canonical()
