"""The wire format between the parent and a sandbox worker: length-prefixed JSON frames.

Every frame is a 4-byte big-endian length followed by that many bytes of JSON (ASCII, so
any string survives). Every message is a JSON array whose first element names it:

parent -> worker   ["run", job, start, calls]      run calls[k] as call number start+k
                   ["reply", request_id, ok, body]  answer to a model-bridge request
                   ["exit"]
worker -> parent   ["ready", pid, isolation]        once, after limits are in place
                   ["loaded"]                       the job's code is loaded (per "run")
                   ["res", i, [[1, value] | [0, error], ...]]   results of calls i, i+1, ... in order;
                                    an entry has a third element, a string, when the call
                                    printed something (the last few KB of it)
                   ["bridge", i, request_id, kind, request]   call i asks for a model call
                   ["fatal", error]                 the code could not be loaded
                   ["done", next_index]             end of the "run" frame

Results are batched (a few hundred per frame, or every 10 ms). So that a crash is still
pinned on the right call, the worker also writes (call index, start time) into a 16-byte
shared-memory slot before each call; the parent reads it when the worker dies or stalls.
The parent never unpickles anything the worker sends: worker output is untrusted JSON.
This module imports only the standard library because the worker loads it by file path.
"""

from __future__ import annotations

import json
import struct

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 256 * 1024 * 1024
"""Largest frame either side accepts; a worker that sends more is broken and gets killed."""

_encoder = json.JSONEncoder(separators=(",", ":"), allow_nan=True)


def _plain(value: object) -> object:
    """Fallback for parent-side data that is not JSON (dates, numpy scalars, sets, bytes)."""
    for method in ("isoformat", "tolist", "item"):
        convert = getattr(value, method, None)
        if callable(convert):
            return convert()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


_lenient_encoder = json.JSONEncoder(separators=(",", ":"), allow_nan=True, default=_plain)


class ProtocolError(Exception):
    """A peer sent bytes that are not a valid frame."""


def encode(message: object) -> bytes:
    """One frame: header + compact JSON. Raises TypeError/ValueError for non-JSON values."""
    payload = _encoder.encode(message).encode("ascii")
    return HEADER.pack(len(payload)) + payload


def dumps(value: object) -> bytes:
    """Compact JSON bytes of one value (strict), for building a frame from parts."""
    return _encoder.encode(value).encode("ascii")


def frame(payload: bytes) -> bytes:
    """Prefix an already encoded payload with its length header."""
    return HEADER.pack(len(payload)) + payload


def encode_lenient(message: object) -> bytes:
    """Like :func:`encode`, but converts non-JSON values (the parent's data) instead of failing."""
    payload = _lenient_encoder.encode(message).encode("ascii")
    return HEADER.pack(len(payload)) + payload


class FrameBuffer:
    """Accumulates bytes read from a pipe and yields complete frame payloads."""

    __slots__ = ("_buf", "_pos")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def next_payload(self) -> bytes | None:
        """The next complete payload, or None when more bytes are needed."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (size,) = HEADER.unpack_from(buf, pos)
        if size > MAX_FRAME_BYTES:
            raise ProtocolError(f"frame of {size} bytes exceeds the {MAX_FRAME_BYTES} byte limit")
        end = pos + 4 + size
        if len(buf) < end:
            return None
        payload = bytes(buf[pos + 4 : end])
        self._pos = end
        if end > 1 << 20:  # drop consumed bytes now and then so the buffer stays small
            del buf[:end]
            self._pos = 0
        return payload


def decode(payload: bytes) -> list:
    """Parse one payload into a message list; anything else is a ProtocolError."""
    try:
        message = json.loads(payload)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"frame is not valid JSON: {exc}") from None
    if not isinstance(message, list) or not message or not isinstance(message[0], str):
        raise ProtocolError("frame is not a message array")
    return message


SLOT_BYTES = 16
"""The progress slot: two native int64s, (index of the call in progress, its start in monotonic ns)."""
