"""HTTP/1.1 keep-alive connections over asyncio protocols, for direct plain-``http://`` servers.

The lean route of `http_clients.ClientPool` (which decides when it applies: never when httpx
would use a proxy, never for ``https://``): `ModelClient` sends pre-encoded requests through a
`ConnectionPool` (`send_raw`) and gets (status, reason, headers, body) back, without httpx's
Request/Response objects or its connection pool, whose CPU cost per call is what caps a local
server (numbers in ``benchmarks/README.md``). httpx loads only when something fails: the
errors raised here are httpx's own exception types, so callers see one set of exceptions.

A request is never re-sent here: a connection that dies before the reply raises
``httpx.RemoteProtocolError`` and the retry policy above decides (so no call is silently doubled).
"""

from __future__ import annotations

import asyncio
from typing import Any

_HEAD_LIMIT = 1 << 16


def http_error(kind: str, message: str, request: Any = None) -> Exception:
    """An ``httpx.<kind>`` exception (httpx loads on the first error, not on every run)."""
    import httpx

    return getattr(httpx, kind)(message, request=request)


class _RemoteProtocolError(Exception):
    """Raised inside reply parsing; becomes ``httpx.RemoteProtocolError`` in `_Conn`."""

    def __init__(self, message: str, request: Any = None):
        super().__init__(message)
        self.request = request


class _RawRequest:
    """The little of a request that reply parsing and error messages need (`send_raw`)."""

    __slots__ = ("method",)

    def __init__(self, method: str):
        self.method = method


class _Conn(asyncio.Protocol):
    """One keep-alive connection as a protocol: the reply is parsed as its bytes arrive.

    Why not asyncio streams: a StreamReader costs several wake-ups and buffer copies per
    reply (``readuntil``, then ``readexactly``); here the bytes are parsed in
    `data_received` and the caller wakes once, when the whole reply is in. One exchange at a
    time: `exchange` writes a request and returns the future of its reply.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.last_used = 0.0
        self._buf = bytearray()
        self._waiter: asyncio.Future | None = None
        self._request: Any = None
        self._head: tuple | None = None  # (status, reason, headers, length, chunked, keep, body_start)
        self._lost = False

    # ---- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self._lost = True  # bytes nobody asked for: this connection cannot be trusted again
            self.close()
            return
        self._buf += data
        try:
            self._parse()
        except _RemoteProtocolError as exc:
            self._fail(http_error("RemoteProtocolError", str(exc), exc.request))

    def eof_received(self) -> bool:
        self._lost = True
        self._finish_at_eof()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if exc is not None and self._waiter is not None and not self._waiter.done():
            self._fail(http_error("ReadError", f"reading the reply failed: {exc}", self._request))
        self._finish_at_eof()

    # ---- use --------------------------------------------------------------------------------
    def usable(self, now: float, expiry: float) -> bool:
        t = self.transport
        return (not self._lost and t is not None and not t.is_closing()
                and now - self.last_used < expiry)

    def exchange(self, wire: bytes, request: Any) -> asyncio.Future:
        """Send one request; the future gives (status, reason, headers, body, keep-alive)."""
        assert self.transport is not None
        self._buf.clear()
        self._head = None
        self._request = request
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            self.transport.write(wire)
        except (OSError, RuntimeError) as exc:
            self._fail(http_error("WriteError", f"sending the request failed: {exc}", request))
        return self._waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # ---- parsing ----------------------------------------------------------------------------
    def _fail(self, exc: Exception) -> None:
        self._lost = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.close()

    def _done(self, data: bytes, keep: bool) -> None:
        status, reason, headers = self._head[:3]  # type: ignore[index]
        self._head = None
        self._buf.clear()
        if not keep:
            self._lost = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((status, reason, headers, data, keep))

    def _finish_at_eof(self) -> None:
        if self._waiter is None or self._waiter.done():
            return
        if self._head is not None and self._head[3] is None and not self._head[4]:
            self._done(bytes(self._buf[self._head[6]:]), False)  # the body ran to the end
            return
        msg = ("Server disconnected without sending a response." if not self._buf
               else "Server disconnected in the middle of the response.")
        self._fail(http_error("RemoteProtocolError", msg, self._request))

    def _parse(self) -> None:
        buf = self._buf
        while self._head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _HEAD_LIMIT:
                    raise _RemoteProtocolError("reply head too long", self._request)
                return
            head = _parse_head(bytes(buf[:end]), self._request)
            if head is None:  # 100 Continue and other interim replies are skipped
                del buf[:end + 4]
                continue
            self._head = (*head, end + 4)
        status, _, _, length, chunked, keep, start = self._head
        if getattr(self._request, "method", "POST") == "HEAD" or status in (204, 304):
            self._done(b"", keep and len(buf) == start)
        elif chunked:
            found = _parse_chunked(buf, start, self._request)
            if found is not None:
                data, stop = found
                self._done(data, keep and stop == len(buf))
        elif length is not None:
            if len(buf) - start >= length:
                self._done(bytes(buf[start:start + length]), keep and len(buf) - start == length)


class ConnectionPool:
    """Idle keep-alive connections per (host, port), at most `max_connections` busy at once.

    One per server origin and event loop (`ClientPool` keeps them).
    """

    def __init__(self, *, max_connections: int = 32, keepalive_expiry: float = 30.0):
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._slots: asyncio.Semaphore | None = None
        self.closed = False

    @property
    def slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_connections)
        return self._slots

    async def send_raw(self, host: str, port: int, wire: bytes, *, method: str = "POST",
                       timeout: float | None = None) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
        """Send a ready-made ``http://`` request (`wire`: request line, headers, body) and
        return (status, reason, headers, body).

        It is the runner's hot path to local servers: at thousands of calls a second httpx's
        objects and pool cost more than the exchange itself. Errors are httpx's exception
        types; `timeout` bounds the whole call and raises ``TimeoutError``.
        """
        request = _RawRequest(method)
        slots = self.slots
        key = (host, port)
        # One deadline for the whole exchange (slot, connect, write, read): a single timer per
        # call instead of one per step — this is the hot path.
        async with asyncio.timeout(timeout):
            await slots.acquire()
            try:
                conn = self._checkout(key) or await self._connect(key, request)
                return await self._exchange(key, conn, wire, request)
            finally:
                slots.release()

    def _checkout(self, key: tuple[str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle:
            conn = idle.pop()
            if conn.usable(now, self.keepalive_expiry):
                return conn
            conn.close()
        return None

    async def _connect(self, key: tuple[str, int], request: Any) -> _Conn:
        try:
            _, conn = await asyncio.get_running_loop().create_connection(_Conn, key[0], key[1])
        except OSError as exc:
            raise http_error("ConnectError", f"cannot connect to {key[0]}:{key[1]}: {exc}", request) from None
        return conn

    async def _exchange(self, key: tuple[str, int], conn: _Conn, wire: bytes,
                        request: Any) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
        """Send on `conn`, wait for the reply, and put the connection back if it stays open."""
        try:
            status, reason, headers, data, keep = await conn.exchange(wire, request)
        except BaseException:
            conn.close()  # cancelled or failed mid-exchange: the connection's state is unknown
            raise
        if keep:
            conn.last_used = asyncio.get_running_loop().time()
            self._idle.setdefault(key, []).append(conn)
        else:
            conn.close()
        return status, reason, headers, data

    def close(self) -> None:
        """Close the idle connections; the pool stays usable (a later call connects again)."""
        self.closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


def _parse_head(head: bytes, request: Any) -> tuple | None:
    """(status, reason, headers, content length, chunked, keep-alive) of a reply head, or
    None for an interim (1xx) reply."""
    lines = head.split(b"\r\n")
    try:
        version, code, *rest = lines[0].split(b" ", 2)
        status = int(code)
    except ValueError:
        raise _RemoteProtocolError(f"bad status line {lines[0][:80]!r}", request) from None
    if status < 200 and status != 101:
        return None
    reason = rest[0] if rest else b""
    headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    chunked = False
    conn_header = b""
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip(), value.strip()
        lower = name.lower()
        if lower == b"content-length":
            try:
                length = int(value)
                if length < 0:
                    raise ValueError(length)
            except ValueError:
                raise _RemoteProtocolError("bad Content-Length", request) from None
        elif lower == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif lower == b"connection":
            conn_header = value.lower()
        headers.append((name, value))
    keep = conn_header != b"close" if version == b"HTTP/1.1" else conn_header == b"keep-alive"
    if length is None and not chunked:
        keep = False  # the body runs to the end of the connection
    return status, reason, headers, length, chunked, keep


def _parse_chunked(buf: bytearray, pos: int, request: Any) -> tuple[bytes, int] | None:
    """A chunked body starting at `pos`: (body, end position) once it is all in, else None."""
    parts = []
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            if len(buf) - pos > _HEAD_LIMIT:
                raise _RemoteProtocolError("reply head or chunk line too long", request)
            return None
        line = bytes(buf[pos:eol])
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size < 0:
                raise ValueError(size)
        except ValueError:
            raise _RemoteProtocolError(f"bad chunk size {line[:40]!r}", request) from None
        pos = eol + 2
        if size == 0:
            while True:  # trailers, if any, up to an empty line
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                if eol == pos:
                    return b"".join(parts), eol + 2
                pos = eol + 2
        if len(buf) < pos + size + 2:
            return None
        parts.append(bytes(buf[pos:pos + size]))
        pos += size + 2
