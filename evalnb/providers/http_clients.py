"""`ClientPool`: a run's HTTP connections to its model servers, shared by every model on one.

Two routes, and httpx decides which one a server gets:

- **httpx's own client** (``httpx.AsyncClient`` with its default transport, ``trust_env``) for
  every ``https://`` server and every server httpx would reach through a proxy. Proxies
  (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, lower-case too), CA bundles
  (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) and keep-alive are httpx's, unchanged.
- **the lean keep-alive path** (`wire.ConnectionPool`, pre-encoded requests) for a plain
  ``http://`` server that httpx itself would connect to directly — a local vLLM or test
  server. httpx's transport spends milliseconds of CPU per call with 25 in flight, which caps
  a local server at a few hundred calls a second; the measured ratio is in
  ``benchmarks/README.md`` ("One HTTP stack"). Whether a proxy applies is asked of the httpx
  client itself, so this route never bypasses a proxy httpx would use.

With no proxy variable set (Linux; elsewhere the system settings are read), a run against
local servers never imports httpx (~35 ms) or loads CA certificates.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from evalnb.providers.wire import ConnectionPool

if TYPE_CHECKING:
    import httpx


class ClientPool:
    """Per-server HTTP clients keyed by origin (scheme, host, port); close with `aclose`.

    At most `max_connections` connections per server on each route. A pool belongs to one
    event loop (its connections do); used from a new loop (a second ``asyncio.run``) it starts
    fresh clients rather than reuse sockets of a dead loop.
    """

    def __init__(self, *, max_connections: int = 32, keepalive_expiry: float = 30.0):
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._wires: dict[str, ConnectionPool] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def _this_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._clients, self._wires = {}, {}  # sockets of another (finished) loop cannot be reused
            self._loop = loop

    def client(self, base_url: str) -> httpx.AsyncClient:
        """httpx's own client for `base_url`'s server (made on first use): proxies, CA
        bundles and keep-alive exactly as a plain ``httpx.AsyncClient`` has them."""
        self._this_loop()
        origin = _origin(base_url)
        client = self._clients.get(origin)
        if client is None:
            import httpx

            limits = httpx.Limits(max_connections=self.max_connections,
                                  max_keepalive_connections=self.max_connections,
                                  keepalive_expiry=self.keepalive_expiry)
            client = self._clients[origin] = httpx.AsyncClient(limits=limits, follow_redirects=False)
        return client

    def raw_route(self, base_url: str) -> tuple[ConnectionPool, str, int, str] | None:
        """(connections, host, port, base path) when `base_url` may take the lean path, else None.

        Only for ``http://`` servers httpx would reach without a proxy; `ModelClient` then sends
        pre-encoded requests on these connections. None: use `client`.
        """
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname or not self._direct(base_url):
            return None
        self._this_loop()
        origin = _origin(base_url)
        wire = self._wires.get(origin)
        if wire is None:
            wire = self._wires[origin] = ConnectionPool(
                max_connections=self.max_connections, keepalive_expiry=self.keepalive_expiry)
        return wire, parts.hostname, parts.port or 80, parts.path.rstrip("/")

    def _direct(self, base_url: str) -> bool:
        """Would httpx send a request for `base_url` straight to the server (no proxy)?"""
        if not _proxies_possible():
            return True
        import httpx

        client = self.client(base_url)
        pick = getattr(client, "_transport_for_url", None)  # httpx's own routing (mounts, NO_PROXY)
        if pick is None:  # pragma: no cover - a future httpx: let it route every request itself
            return False
        return pick(httpx.URL(base_url)) is getattr(client, "_transport", None)

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
        servers = len(set(self._wires) | set(self._clients))
        return f"ClientPool(max_connections={self.max_connections}, servers={servers})"


def _origin(base_url: str) -> str:
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}".lower()


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")  # the ones httpx uses, any case


def _proxies_possible() -> bool:
    """False only when httpx is sure to find no proxy: on Linux, none of ``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY`` (any case) has a value (``urllib.request.getproxies``, which
    httpx reads, looks only at the environment there). Otherwise httpx's client decides."""
    if sys.platform in ("darwin", "win32"):  # system proxy settings: let httpx read them
        return True
    return any(value and name.lower() in _PROXY_VARIABLES for name, value in os.environ.items())
