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
  client itself, so this route never bypasses a proxy httpx would use. That question uses
  httpx internals: `check_httpx_routing` probes them once and fails loudly if they changed
  (tests/providers/test_proxies.py passes with httpx 0.27.2, 0.28.1 and 0.29.0).

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

        check_httpx_routing()
        client = self.client(base_url)
        # httpx's own routing (mounts from the proxy variables, NO_PROXY): the default transport
        # (no proxy) or a proxy's; private names, checked by `check_httpx_routing`
        return client._transport_for_url(httpx.URL(base_url)) is client._transport

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


TESTED_HTTPX = ">=0.27,<0.30"  # pyproject.toml pins this range; `check_httpx_routing` guards any other
_routing_checked = False


def check_httpx_routing() -> None:
    """Make sure httpx still routes as the lean path assumes, else fail loudly (once a process).

    httpx has no public "which proxy would this URL use"; `ClientPool._direct` asks its client's
    private ``_transport_for_url`` and compares with ``_transport`` (the no-proxy transport).
    A future httpx that renamed them, or applied proxies inside its default transport, would
    make every plain-http call look direct and silently bypass the user's proxy; this probe (a
    client with a proxy and one bypassed host, nothing sent) catches both before any call.
    """
    global _routing_checked
    if _routing_checked:
        return
    import httpx

    problem = None
    try:
        probe = httpx.AsyncClient(proxy="http://127.0.0.1:9", mounts={"all://direct.invalid": None})
        pick, direct = probe._transport_for_url, probe._transport
        if pick(httpx.URL("http://proxied.invalid/v1")) is direct:
            problem = "a URL with a proxy configured is routed to the no-proxy transport"
        elif pick(httpx.URL("http://direct.invalid/v1")) is not direct:
            problem = "a URL with no proxy is not routed to the no-proxy transport"
    except (AttributeError, TypeError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        from evalnb.errors import EvalnbError

        raise EvalnbError(
            f"httpx {httpx.__version__} routes requests differently from the versions evalnb is tested with "
            f"(httpx{TESTED_HTTPX}): {problem}. With a proxy variable set, evalnb cannot tell which calls go "
            f"through the proxy; install a tested version (pip install 'httpx{TESTED_HTTPX}') or upgrade evalnb")
    _routing_checked = True


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")  # the ones httpx uses, any case


def _proxies_possible() -> bool:
    """False only when httpx is sure to find no proxy: on Linux, none of ``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY`` (any case) has a value (``urllib.request.getproxies``, which
    httpx reads, looks only at the environment there). Otherwise httpx's client decides."""
    if sys.platform in ("darwin", "win32"):  # system proxy settings: let httpx read them
        return True
    return any(value and name.lower() in _PROXY_VARIABLES for name, value in os.environ.items())
