"""A lean HTTP/1.1 keep-alive transport for plain-``http://`` model servers, under httpx.

Why: httpx's default transport (httpcore on anyio) spends most of a local call's time in its
connection pool — about 0.8 ms of CPU per request, and worse with 25 calls in flight (encode/httpx
#3215) — which caps a local vLLM or test server at a few hundred calls a second. This transport
keeps httpx's client (URLs, headers, timeouts, exceptions, decoding) and replaces only the wire
part for ``http://`` with an asyncio protocol that parses replies as their bytes arrive: one
write and one wake-up per request, a list of idle connections per server. ``https://`` (and anything else) goes to httpx's own transport, so TLS, certificates and
proxies behave exactly as in httpx; remote APIs are latency-bound anyway.

The connections themselves live in `wire.ConnectionPool` (no httpx needed), which the runner
also uses directly for pre-encoded requests (`ClientPool.raw_route`).
"""

from __future__ import annotations

import httpx

from evalnb.providers.wire import ConnectionPool

_SKIP_HEADERS = frozenset({b"content-length", b"transfer-encoding", b"connection"})


class Http11Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio protocols for ``http://``; other schemes go to `fallback`.

    `pool` holds the connections (made here if not given); `send_raw` is its fast path.
    """

    def __init__(self, *, max_connections: int = 32, keepalive_expiry: float = 30.0,
                 fallback: httpx.AsyncBaseTransport | None = None, pool: ConnectionPool | None = None):
        self.pool = pool or ConnectionPool(max_connections=max_connections, keepalive_expiry=keepalive_expiry)
        self.max_connections = self.pool.max_connections
        self.keepalive_expiry = self.pool.keepalive_expiry
        # httpx's own transport (TLS, proxies) is built on first use: creating it loads the
        # system's CA certificates, which a run against local http:// servers never needs.
        self._fallback = fallback

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            return await self._https().handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        body = await request.aread()
        wire = _encode(request, body)
        pool = self.pool
        async with pool.slot(timeouts.get("pool"), request):
            key = (request.url.host, request.url.port or 80)
            conn = pool.checkout(key) or await pool.connect(key, timeouts.get("connect"), request)
            status, reason, headers, data = await pool.exchange(key, conn, wire, request, timeouts.get("read"))
        return httpx.Response(status, headers=headers, stream=httpx.ByteStream(data),
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason})

    async def send_raw(self, host: str, port: int, wire: bytes, *, method: str = "POST",
                       timeout: float | None = None) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
        """`ConnectionPool.send_raw` on this transport's connections."""
        return await self.pool.send_raw(host, port, wire, method=method, timeout=timeout)

    async def aclose(self) -> None:
        self.pool.close()
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
