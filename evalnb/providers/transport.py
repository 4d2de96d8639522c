"""A lean HTTP/1.1 keep-alive transport for plain-``http://`` model servers, under httpx.

Why: httpx's default transport (httpcore on anyio) spends most of a local call's time in its
connection pool — about 0.8 ms of CPU per request, and worse with 25 calls in flight (encode/httpx
#3215) — which caps a local vLLM or test server at a few hundred calls a second. This transport
keeps httpx's client (URLs, headers, timeouts, exceptions, decoding) and replaces only the wire
part for ``http://`` with asyncio streams: one write per request, a list of idle connections per
server. ``https://`` (and anything else) goes to httpx's own transport, so TLS, certificates and
proxies behave exactly as in httpx; remote APIs are latency-bound anyway.

A request is never re-sent by the transport: a connection that dies before the reply raises
``httpx.RemoteProtocolError`` and the retry policy above decides (so no call is silently doubled).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx

_SKIP_HEADERS = frozenset({b"content-length", b"transfer-encoding", b"connection"})
_HEAD_LIMIT = 1 << 16


class _RawRequest:
    """The little of a request that reply parsing and error messages need (`send_raw`)."""

    __slots__ = ("method",)

    def __init__(self, method: str):
        self.method = method


class _Conn:
    __slots__ = ("reader", "writer", "last_used")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.last_used = 0.0

    def usable(self, now: float, expiry: float) -> bool:
        return (not self.reader.at_eof() and not self.writer.transport.is_closing()
                and now - self.last_used < expiry)

    def close(self) -> None:
        self.writer.close()


class Http11Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio streams for ``http://``; other schemes go to `fallback`."""

    def __init__(self, *, max_connections: int = 32, keepalive_expiry: float = 30.0,
                 fallback: httpx.AsyncBaseTransport | None = None):
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        # httpx's own transport (TLS, proxies) is built on first use: creating it loads the
        # system's CA certificates, which a run against local http:// servers never needs.
        self._fallback = fallback
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._slots: asyncio.Semaphore | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            return await self._https().handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        body = await request.aread()
        wire = _encode(request, body)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_connections)
        async with self._slot(timeouts.get("pool"), request):
            key = (request.url.host, request.url.port or 80)
            conn = self._checkout(key) or await self._connect(key, timeouts.get("connect"), request)
            try:
                status, reason, headers, data, keep = await self._exchange(
                    conn, wire, request, timeouts.get("write"), timeouts.get("read"))
            except BaseException:
                conn.close()
                raise
            if keep:
                conn.last_used = asyncio.get_running_loop().time()
                self._idle.setdefault(key, []).append(conn)
            else:
                conn.close()
        return httpx.Response(status, headers=headers, stream=httpx.ByteStream(data),
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason})

    async def send_raw(self, host: str, port: int, wire: bytes, *, method: str = "POST",
                       timeout: float | None = None) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
        """Send a ready-made ``http://`` request (`wire`: request line, headers, body) and
        return (status, reason, headers, body) — the same wire work as
        `handle_async_request`, without building httpx Request/Response objects.

        It is the runner's hot path to local servers: at thousands of calls a second those
        objects cost more than the exchange itself. Errors are the same httpx exceptions.
        """
        request = _RawRequest(method)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_connections)
        key = (host, port)
        # One deadline for the whole exchange (slot, connect, write, read): a single timer per
        # call instead of one per step — this is the hot path.
        async with asyncio.timeout(timeout):
            await self._slots.acquire()
            try:
                conn = self._checkout(key) or await self._connect(key, None, request)  # type: ignore[arg-type]
                try:
                    status, reason, headers, data, keep = await self._exchange(
                        conn, wire, request, None, None)  # type: ignore[arg-type]
                except BaseException:
                    conn.close()
                    raise
            finally:
                self._slots.release()
        if keep:
            conn.last_used = asyncio.get_running_loop().time()
            self._idle.setdefault(key, []).append(conn)
        else:
            conn.close()
        return status, reason, headers, data

    @contextlib.asynccontextmanager
    async def _slot(self, timeout: float | None, request: httpx.Request) -> AsyncIterator[None]:
        assert self._slots is not None
        try:
            async with asyncio.timeout(timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout("no free connection in time", request=request) from None
        try:
            yield
        finally:
            self._slots.release()

    def _checkout(self, key: tuple[str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        now = asyncio.get_running_loop().time()
        while idle:
            conn = idle.pop()
            if conn.usable(now, self.keepalive_expiry):
                return conn
            conn.close()
        return None

    async def _connect(self, key: tuple[str, int], timeout: float | None,
                       request: httpx.Request) -> _Conn:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(key[0], key[1], limit=_HEAD_LIMIT)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {key[0]}:{key[1]} timed out",
                                       request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {key[0]}:{key[1]}: {exc}",
                                     request=request) from None
        return _Conn(reader, writer)

    async def _exchange(self, conn: _Conn, wire: bytes, request: httpx.Request,
                        write_timeout: float | None, read_timeout: float | None
                        ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]:
        try:
            conn.writer.write(wire)
            if conn.writer.transport.get_write_buffer_size() > _HEAD_LIMIT:
                async with asyncio.timeout(write_timeout):
                    await conn.writer.drain()
        except TimeoutError:
            raise httpx.WriteTimeout("sending the request timed out", request=request) from None
        except OSError as exc:
            raise httpx.WriteError(f"sending the request failed: {exc}", request=request) from None
        try:
            async with asyncio.timeout(read_timeout):
                return await _read_response(conn.reader, request)
        except TimeoutError:
            raise httpx.ReadTimeout("waiting for the reply timed out", request=request) from None
        except asyncio.IncompleteReadError as exc:
            msg = ("Server disconnected without sending a response." if not exc.partial
                   else "Server disconnected in the middle of the response.")
            raise httpx.RemoteProtocolError(msg, request=request) from None
        except asyncio.LimitOverrunError:
            raise httpx.RemoteProtocolError("reply head or chunk line too long",
                                            request=request) from None
        except OSError as exc:
            raise httpx.ReadError(f"reading the reply failed: {exc}", request=request) from None

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()

    def _https(self) -> httpx.AsyncBaseTransport:
        if self._fallback is None:
            self._fallback = httpx.AsyncHTTPTransport(
                limits=httpx.Limits(max_connections=self.max_connections,
                                    max_keepalive_connections=self.max_connections,
                                    keepalive_expiry=self.keepalive_expiry),
                http2=False)
        return self._fallback


def _encode(request: httpx.Request, body: bytes) -> bytes:
    """Request line, headers and body as one buffer (one write, one packet for small calls)."""
    parts = [request.method.encode(), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:
        if name.lower() not in _SKIP_HEADERS:
            parts += [name, b": ", value, b"\r\n"]
    if body or request.method in ("POST", "PUT", "PATCH"):
        parts.append(b"Content-Length: %d\r\n" % len(body))
    parts += [b"\r\n", body]
    return b"".join(parts)


async def _read_response(reader: asyncio.StreamReader, request: httpx.Request
                         ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]:
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head[:-4].split(b"\r\n")
        try:
            version, code, *rest = lines[0].split(b" ", 2)
            status = int(code)
        except ValueError:
            raise httpx.RemoteProtocolError(f"bad status line {lines[0][:80]!r}",
                                            request=request) from None
        if status >= 200 or status == 101:
            break  # 100 Continue and other interim replies are skipped
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
                raise httpx.RemoteProtocolError("bad Content-Length", request=request) from None
        elif lower == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif lower == b"connection":
            conn_header = value.lower()
        headers.append((name, value))
    keep = conn_header != b"close" if version == b"HTTP/1.1" else conn_header == b"keep-alive"
    if request.method == "HEAD" or status in (204, 304):
        data = b""
    elif chunked:
        data = await _read_chunked(reader)
    elif length is not None:
        data = await reader.readexactly(length)
    else:
        data, keep = await reader.read(), False  # body runs to the end of the connection
    return status, reason, headers, data, keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise httpx.RemoteProtocolError(f"bad chunk size {line[:40]!r}") from None
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
