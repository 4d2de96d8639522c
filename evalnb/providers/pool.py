"""`ClientPool`: one pooled ``httpx.AsyncClient`` per server, shared by every model on it.

Connections are the expensive part of a model call on a local server: reusing them (keep-alive)
is what lets thousands of short calls a second through. The runner makes one pool per run,
sized to its concurrency, and closes it at the end. ``http://`` servers are spoken to by the
lean `Http11Transport`; ``https://`` by httpx's own transport (TLS, proxies), HTTP/1.1 only.

Each server's connections are a `wire.ConnectionPool`; its httpx client is made on first use
of `client`. The runner's calls to ``http://`` servers go through `raw_route` (pre-encoded
requests on the same connections), so a run against local servers never imports httpx.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from evalnb.providers.wire import ConnectionPool

if TYPE_CHECKING:
    import httpx


class ClientPool:
    """Pooled HTTP/1.1 clients keyed by origin (scheme, host, port); close with `aclose`.

    A pool belongs to one event loop (its connections do); used from a new loop (a second
    ``asyncio.run``) it starts fresh clients rather than reuse sockets of a dead loop.
    """

    def __init__(self, *, max_connections: int = 32, keepalive_expiry: float = 30.0):
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._wires: dict[str, ConnectionPool] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def _wire(self, origin: str) -> ConnectionPool:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._clients, self._wires = {}, {}  # sockets of another (finished) loop cannot be reused
            self._loop = loop
        wire = self._wires.get(origin)
        if wire is None:
            wire = self._wires[origin] = ConnectionPool(
                max_connections=self.max_connections, keepalive_expiry=self.keepalive_expiry)
        return wire

    def client(self, base_url: str) -> httpx.AsyncClient:
        """The shared client for `base_url`'s server (made on first use)."""
        origin = _origin(base_url)
        wire = self._wire(origin)
        client = self._clients.get(origin)
        if client is None:
            import httpx

            from evalnb.providers.transport import Http11Transport

            transport = Http11Transport(pool=wire)
            client = httpx.AsyncClient(transport=transport, follow_redirects=False)
            self._clients[origin] = client
        return client

    def raw_route(self, base_url: str) -> tuple[ConnectionPool, str, int, str] | None:
        """(connections, host, port, base path) for a plain-``http://`` server, else None.

        Lets `ModelClient` send pre-encoded requests through the same pooled connections.
        """
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            return None
        return self._wire(_origin(base_url)), parts.hostname, parts.port or 80, parts.path.rstrip("/")

    async def aclose(self) -> None:
        """Close every client (and its connections)."""
        clients, self._clients = list(self._clients.values()), {}
        wires, self._wires = list(self._wires.values()), {}
        if self._loop is not asyncio.get_running_loop():
            return  # made in another (finished) loop: they cannot be closed from this one
        for wire in wires:
            wire.close()
        for client in clients:
            await client.aclose()

    async def __aenter__(self) -> ClientPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"ClientPool(max_connections={self.max_connections}, servers={len(self._wires)})"


def _origin(base_url: str) -> str:
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}".lower()
