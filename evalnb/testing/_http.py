"""Just enough HTTP/1.1 for a local test server: keep-alive, Content-Length and chunked bodies.

Hand-written on asyncio streams because the server must start in a thread without extra
dependencies, and because parsing only what we need keeps it fast (thousands of requests a
second on one core).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from http import HTTPStatus
from typing import NamedTuple

MAX_BODY_BYTES = 64 * 1024 * 1024


class HttpRequest(NamedTuple):
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    keep_alive: bool


class BadRequest(Exception):
    """The bytes on the wire are not a request we can read; answered, then the connection closed."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> HttpRequest | None:
    """Read one request; None when the client closed the connection between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise BadRequest(400, "connection closed inside the request head") from None
    except asyncio.LimitOverrunError:
        raise BadRequest(431, "request head too large") from None
    lines = head[:-4].decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        raise BadRequest(400, f"bad request line {lines[0][:80]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest(400, f"bad header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await _read_body(reader, headers)
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    return HttpRequest(method, target.split("?", 1)[0], headers, body, keep_alive)


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    length = headers.get("content-length")
    if length is not None:
        try:
            n = int(length)
        except ValueError:
            raise BadRequest(400, f"bad Content-Length {length!r}") from None
        if n < 0 or n > MAX_BODY_BYTES:
            raise BadRequest(413, f"body of {n} bytes is over the {MAX_BODY_BYTES} byte limit")
        return await reader.readexactly(n) if n else b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts, total = [], 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BadRequest(400, "bad chunk size") from None
            if size == 0:
                await reader.readuntil(b"\r\n")  # trailers are not supported: expect none
                return b"".join(parts)
            total += size
            if total > MAX_BODY_BYTES:
                raise BadRequest(413, f"body is over the {MAX_BODY_BYTES} byte limit")
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    return b""


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


_STATUS_LINES = {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n".encode() for s in HTTPStatus}


def response_bytes(
    status: int,
    body: bytes,
    *,
    content_type: str = "application/json",
    headers: Mapping[str, str] | None = None,
    keep_alive: bool = True,
) -> bytes:
    """Status line, headers and body of one reply, ready to write."""
    line = _STATUS_LINES.get(status) or f"HTTP/1.1 {status} {_reason(status)}\r\n".encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()) if headers else ""
    conn = "" if keep_alive else "Connection: close\r\n"
    head = f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{conn}{extra}\r\n"
    return line + head.encode("latin-1") + body


def multipart_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a ``multipart/form-data`` body: name -> (filename or None, bytes).

    Enough for file uploads as HTTP clients send them (one boundary, no nested parts); a body
    that is not such a form is a `BadRequest` naming what is wrong.
    """
    kind, _, params = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        raise BadRequest(400, f"expected a multipart/form-data body, got content type {kind.strip()!r}")
    boundary = _param(params, "boundary")
    if not boundary:
        raise BadRequest(400, "multipart/form-data body without a boundary")
    delim = b"--" + boundary.encode("latin-1")
    fields: dict[str, tuple[str | None, bytes]] = {}
    chunks = body.split(delim)
    if len(chunks) < 3:
        raise BadRequest(400, "multipart body has no parts")
    for chunk in chunks[1:]:
        if chunk.startswith(b"--"):  # the closing delimiter
            break
        if chunk.startswith(b"\r\n"):
            chunk = chunk[2:]
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise BadRequest(400, "multipart part without headers")
        if content.endswith(b"\r\n"):
            content = content[:-2]
        disposition = ""
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-disposition":
                disposition = value
        field = _param(disposition, "name")
        if field is None:
            raise BadRequest(400, "multipart part without a field name")
        fields[field] = (_param(disposition, "filename"), content)
    return fields


def _param(header: str, name: str) -> str | None:
    """A ``name=value`` or ``name="value"`` parameter of a header value (None: absent)."""
    for piece in header.split(";"):
        key, sep, value = piece.strip().partition("=")
        if sep and key.strip().lower() == name:
            value = value.strip()
            return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    return None
