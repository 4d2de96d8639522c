"""`ClientPool`: one pooled ``httpx.AsyncClient`` per server, shared by every model on it.

Connections are the expensive part of a model call on a local server: reusing them (keep-alive)
is what lets thousands of short calls a second through. The runner makes one pool per run,
sized to its concurrency, and closes it at the end. ``http://`` servers are spoken to by the
lean `Http11Transport`; ``https://`` by httpx's own transport (TLS, proxies), HTTP/1.1 only.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx

from evalnb.providers.transport import Http11Transport


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
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self, base_url: str) -> httpx.AsyncClient:
        """The shared client for `base_url`'s server (made on first use)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._clients = {}  # sockets of another (finished) loop cannot be reused
            self._loop = loop
        origin = _origin(base_url)
        client = self._clients.get(origin)
        if client is None:
            transport = Http11Transport(
                max_connections=self.max_connections,
                keepalive_expiry=self.keepalive_expiry,
            )
            client = httpx.AsyncClient(transport=transport, follow_redirects=False)
            self._clients[origin] = client
        return client

    def raw_route(self, base_url: str) -> tuple[Http11Transport, str, int, str] | None:
        """(transport, host, port, base path) for a plain-``http://`` server, else None.

        Lets `ModelClient` send pre-encoded requests through the same pooled connections.
        """
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            return None
        transport = self.client(base_url)._transport
        if not isinstance(transport, Http11Transport):
            return None
        return transport, parts.hostname, parts.port or 80, parts.path.rstrip("/")

    async def aclose(self) -> None:
        """Close every client (and its connections)."""
        clients, self._clients = list(self._clients.values()), {}
        if self._loop is not asyncio.get_running_loop():
            return  # made in another (finished) loop: they cannot be closed from this one
        for client in clients:
            await client.aclose()

    async def __aenter__(self) -> ClientPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"ClientPool(max_connections={self.max_connections}, servers={len(self._clients)})"


def _origin(base_url: str) -> str:
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}".lower()
