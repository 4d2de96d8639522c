"""Fault injection for LocalModelServer: which requests misbehave, and how.

A `Fault` is a plain description (what to match, how often, what to do); the server keeps the
counters in a `FaultSchedule`, so one `Fault` list can be reused by several servers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

Latency = Union[float, tuple[float, float]]
Matcher = Union[str, Callable[[dict], bool], None]


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour of the server.

    Which requests: ``match`` (a substring of the prompt, or a predicate on the request JSON),
    ``path`` (e.g. ``"/v1/embeddings"``; default every path); then, among matching requests,
    ``times`` (only the first N), ``every`` (the Nth, 2Nth, ...), ``probability`` (seeded by
    ``seed``, so reruns misbehave identically). Unset filters let every request through.

    What happens (first one set wins): ``drop`` closes the connection without a reply;
    ``malformed`` sends a 200 whose body is not valid JSON; ``status`` sends that HTTP status
    with ``body`` (default an OpenAI-style ``{"error": {...}}``) and ``Retry-After:
    retry_after`` when given; ``body`` alone is sent as a 200 reply; ``empty`` sends a normal
    reply whose text is ``""``. ``latency`` (seconds, or a ``(low, high)`` range) delays the
    reply first; a fault with only ``latency`` slows matching requests and answers them
    normally. ``headers`` are added to the reply.

    >>> Fault(status=429, retry_after=1, match="Q3", times=2)  # first two Q3 calls rate-limited
    Fault(match='Q3', times=2, status=429, retry_after=1)
    """

    match: Matcher = None
    path: str | None = None
    times: int | None = None
    every: int | None = None
    probability: float | None = None
    seed: int | None = None
    status: int | None = None
    retry_after: float | str | None = None
    drop: bool = False
    malformed: bool = False
    empty: bool = False
    latency: Latency | None = None
    body: dict | str | None = None
    headers: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.times is not None and self.times < 0:
            raise ValueError(f"Fault.times must be >= 0, got {self.times}")
        if self.every is not None and self.every < 1:
            raise ValueError(f"Fault.every must be >= 1, got {self.every}")
        if self.probability is not None and not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"Fault.probability must be within [0, 1], got {self.probability}")
        if self.status is not None and not 100 <= self.status <= 599:
            raise ValueError(f"Fault.status must be an HTTP status (100-599), got {self.status}")
        check_latency(self.latency, "Fault.latency")

    def __repr__(self) -> str:  # only the fields that were set: reads like the call that made it
        defaults = Fault.__dataclass_fields__
        parts = [
            f"{name}={getattr(self, name)!r}"
            for name, f in defaults.items()
            if getattr(self, name) != f.default
        ]
        return f"Fault({', '.join(parts)})"


def check_latency(latency: Latency | None, where: str) -> None:
    """Reject negative or inverted latencies early, at construction, not mid-test."""
    if latency is None:
        return
    if isinstance(latency, tuple):
        if len(latency) != 2 or not 0 <= latency[0] <= latency[1]:
            raise ValueError(f"{where} range must be (low, high) with 0 <= low <= high, got {latency}")
    elif not isinstance(latency, (int, float)) or latency < 0:
        raise ValueError(f"{where} must be seconds >= 0 or a (low, high) tuple, got {latency!r}")


def pick_latency(latency: Latency | None, rng: random.Random) -> float:
    """Seconds to wait for one request (a range draws uniformly from it)."""
    if latency is None:
        return 0.0
    if isinstance(latency, tuple):
        return rng.uniform(latency[0], latency[1])
    return float(latency)


class FaultSchedule:
    """Decides, request by request, which fault (if any) fires; holds the per-fault counters."""

    def __init__(self, faults: Sequence[Fault] | Callable[[dict, str], Fault | None] | None):
        if faults is not None and not callable(faults):
            faults = list(faults)
            for f in faults:
                if not isinstance(f, Fault):
                    raise TypeError(f"faults must be Fault objects, got {type(f).__name__}")
        self._faults = faults
        self.reset()

    def reset(self) -> None:
        """Forget how many requests each fault has seen (restart `times` and `every`)."""
        faults = self._faults if isinstance(self._faults, list) else []
        self._seen = [0] * len(faults)
        self._rngs = [random.Random(f.seed) for f in faults]

    def pick(self, body: Any, path: str, prompt: str) -> Fault | None:
        """The first fault that fires for this request, counting it against each matcher."""
        if self._faults is None:
            return None
        if not isinstance(self._faults, list):
            return self._faults(body, path)
        for i, f in enumerate(self._faults):
            if not _matches(f, body, path, prompt):
                continue
            self._seen[i] += 1
            n = self._seen[i]
            if f.times is not None and n > f.times:
                continue
            if f.every is not None and n % f.every:
                continue
            if f.probability is not None and self._rngs[i].random() >= f.probability:
                continue
            return f
        return None


def _matches(f: Fault, body: Any, path: str, prompt: str) -> bool:
    if f.path is not None and f.path != path:
        return False
    if f.match is None:
        return True
    if isinstance(f.match, str):
        return f.match in prompt
    return bool(f.match(body if isinstance(body, dict) else {}))
