"""Proxies, CA bundles and keep-alive behave as in httpx, through a real forward proxy.

The proxy (tests/helpers/forward_proxy.py) runs on 127.0.0.1 and is the only way to reach
``model.internal.test``: it maps that name to a LocalModelServer's port. Nothing here
resolves the name by DNS (each test that uses it sets a proxy for it).
"""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest
import trustme

import evalnb
from evalnb.errors import ProviderError
from evalnb.providers import ClientPool, Model, ModelClient
from evalnb.testing import LocalModelServer
from helpers.forward_proxy import ForwardProxy
from helpers.runner_kit import rows

NAME = "model.internal.test"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture
def env(monkeypatch):
    """Proxy variables cleared (both cases); returns monkeypatch to set the ones a test wants."""
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def complete_all(base_url: str, prompts: list[str], *, concurrency: int = 1) -> list[str]:
    async def main():
        pool = ClientPool(max_connections=concurrency)
        async with ModelClient(Model("good", base_url=base_url, api="chat"), pool=pool) as client:
            sem = asyncio.Semaphore(concurrency)

            async def one(p):
                async with sem:
                    return (await client.complete(p, {"max_retries": 0})).text

            out = await asyncio.gather(*(one(p) for p in prompts))
        await pool.aclose()
        return out

    return asyncio.run(main())


def mounts(client: httpx.AsyncClient) -> dict[str, str | None]:
    """pattern -> proxy URL (None: no proxy) of an httpx client's routes."""
    out = {}
    for pattern, transport in client._mounts.items():
        proxy = getattr(getattr(transport, "_pool", None), "_proxy_url", None)
        out[pattern.pattern] = None if transport is None else str(proxy)
    return out


@pytest.mark.parametrize("settings, proxied", [
    ({}, set()),
    ({"HTTPS_PROXY": "http://127.0.0.1:3128"}, {"https://"}),
    ({"HTTP_PROXY": "http://127.0.0.1:3128", "HTTPS_PROXY": "http://127.0.0.1:3129",
      "NO_PROXY": "localhost,.corp,10.0.0.1"}, {"http://", "https://"}),
    ({"http_proxy": "127.0.0.1:3128", "no_proxy": "model.internal.test"}, {"http://"}),
    ({"all_proxy": "http://127.0.0.1:3128", "NO_PROXY": "*"}, set()),
    ({"ALL_PROXY": "http://127.0.0.1:3130", "https_proxy": "http://127.0.0.1:3131"}, {"all://", "https://"}),
])
def test_the_clients_routes_are_a_plain_httpx_clients(env, settings, proxied):
    for name, value in settings.items():
        env.setenv(name, value)

    async def main():
        pool = ClientPool(max_connections=4)
        ours = pool.client("https://api.example.test/v1")
        plain = httpx.AsyncClient()
        try:
            return mounts(ours), mounts(plain), type(ours._transport)
        finally:
            await pool.aclose()
            await plain.aclose()

    ours, plain, transport = asyncio.run(main())
    assert ours == plain
    assert {pattern for pattern, proxy in ours.items() if proxy is not None} == proxied
    assert transport is httpx.AsyncHTTPTransport


@pytest.mark.usefixtures("evalnb_home")
def test_a_run_reaches_a_model_only_the_proxy_can_route(env, make_suite):
    with LocalModelServer(_answer) as server, ForwardProxy({NAME: server.port}) as proxy:
        env.setenv("HTTP_PROXY", proxy.url)
        model = Model("good", base_url=f"http://{NAME}:{server.port}/v1", api="chat")
        suite = make_suite({"t": rows(12)})
        result = evalnb.run(suite, [model], concurrency=3, progress=False)
        assert result.status == "completed"
        assert sorted(result.samples["output_text"], key=int) == [str(i) for i in range(12)]
        chat = f"POST http://{NAME}:{server.port}/v1/chat/completions"
        assert proxy.seen == [chat] * 12
        assert server.request_count == 12
        # keep-alive through the proxy: at most one connection per call in flight
        assert proxy.connections <= 3


def test_lower_case_http_proxy_and_all_proxy_are_honoured(env):
    with LocalModelServer(_answer) as server, ForwardProxy({NAME: server.port}) as proxy:
        base = f"http://{NAME}:{server.port}/v1"
        env.setenv("http_proxy", proxy.url)
        assert complete_all(base, ["ITEM-1", "ITEM-2"]) == ["1", "2"]
        env.delenv("http_proxy")
        env.setenv("all_proxy", proxy.url)
        assert complete_all(base, ["ITEM-3"]) == ["3"]
        assert len(proxy.seen) == 3 and all(s.startswith(f"POST http://{NAME}:") for s in proxy.seen)


def test_a_proxy_also_applies_to_a_local_address_unless_no_proxy_says_so(env):
    with LocalModelServer(_answer) as server, ForwardProxy({"127.0.0.1": server.port}) as proxy:
        env.setenv("HTTP_PROXY", proxy.url)
        assert complete_all(server.base_url, ["ITEM-5"]) == ["5"]  # as httpx: proxied
        assert proxy.seen == [f"POST {server.base_url}/chat/completions"]

        for bypass in ("127.0.0.1", "localhost,127.0.0.1", "*"):
            env.setenv("NO_PROXY", bypass)
            seen = len(proxy.seen)
            assert complete_all(server.base_url, ["ITEM-6"]) == ["6"]
            assert len(proxy.seen) == seen  # the proxy saw nothing: straight to the server
        assert server.request_count == 4


def test_no_proxy_bypass_takes_the_direct_keep_alive_path(env):
    async def routes(url):
        pool = ClientPool()
        try:
            return pool.raw_route(url) is not None
        finally:
            await pool.aclose()

    env.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    assert asyncio.run(routes("http://127.0.0.1:8000/v1")) is False  # proxied: httpx's client
    env.setenv("no_proxy", "127.0.0.1")
    assert asyncio.run(routes("http://127.0.0.1:8000/v1")) is True
    assert asyncio.run(routes("http://10.1.2.3:8000/v1")) is False  # not in NO_PROXY
    env.delenv("HTTP_PROXY")
    env.delenv("no_proxy")
    assert asyncio.run(routes("http://10.1.2.3:8000/v1")) is True
    assert asyncio.run(routes("https://127.0.0.1:8000/v1")) is False  # TLS: always httpx's


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """A CA bundle file and a server context whose certificate names model.internal.test."""
    ca = trustme.CA()
    cert = ca.issue_cert(NAME)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    bundle = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    return str(bundle), server_ctx


def test_https_through_a_connect_tunnel_with_a_ca_bundle_from_ssl_cert_file(env, tls):
    bundle, server_ctx = tls
    with LocalModelServer(_answer, ssl=server_ctx) as server, ForwardProxy({NAME: server.port}) as proxy:
        assert server.url.startswith("https://")
        base = f"https://{NAME}:{server.port}/v1"
        env.setenv("HTTPS_PROXY", proxy.url)
        env.setenv("SSL_CERT_FILE", bundle)
        assert complete_all(base, [f"ITEM-{i}" for i in range(6)]) == [str(i) for i in range(6)]
        assert proxy.seen == [f"CONNECT {NAME}:{server.port}"]  # one tunnel, kept alive
        assert server.connections == 1 and server.request_count == 6

        # without the bundle the test CA is unknown: the certificate check fails, as in httpx
        env.delenv("SSL_CERT_FILE")
        env.delenv("SSL_CERT_DIR", raising=False)
        with pytest.raises(ProviderError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            complete_all(base, ["ITEM-1"])


def test_a_ca_directory_from_ssl_cert_dir(env, tls, tmp_path):
    import shutil
    import subprocess

    bundle, server_ctx = tls
    openssl = shutil.which("openssl")
    assert openssl, "the openssl command names CA files by subject hash for SSL_CERT_DIR"
    digest = subprocess.run([openssl, "x509", "-hash", "-noout", "-in", bundle],
                            capture_output=True, text=True, check=True).stdout.strip()
    shutil.copy(bundle, tmp_path / f"{digest}.0")
    with LocalModelServer(_answer, ssl=server_ctx) as server, ForwardProxy({NAME: server.port}) as proxy:
        env.setenv("https_proxy", proxy.url)
        env.delenv("SSL_CERT_FILE", raising=False)  # it would win over the directory, as in httpx
        env.setenv("SSL_CERT_DIR", str(tmp_path))
        assert complete_all(f"https://{NAME}:{server.port}/v1", ["ITEM-4"]) == ["4"]
        assert proxy.seen == [f"CONNECT {NAME}:{server.port}"]


def test_keep_alive_on_the_direct_path_reuses_connections(env):
    with LocalModelServer(_answer) as server:
        out = complete_all(server.base_url, [f"ITEM-{i}" for i in range(60)], concurrency=4)
        assert out == [str(i) for i in range(60)]
        assert server.request_count == 60 and server.connections <= 4


def _answer(body: dict) -> str:
    from helpers.runner_kit import responder

    return responder({**body, "model": "good"})


@pytest.mark.parametrize("settings, httpx_loaded", [
    ({"NO_PROXY": "localhost", "ftp_proxy": "http://127.0.0.1:9"}, False),  # none httpx would use
    ({"HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}, True),  # httpx's client decides
])
def test_httpx_loads_only_when_a_proxy_setting_could_apply(env, tmp_path, settings, httpx_loaded):
    import os
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from evalnb.providers import Model, ModelClient\n"
        "from evalnb.testing import LocalModelServer\n"
        "async def main(url):\n"
        "    async with ModelClient(Model('m', base_url=url, api='chat')) as c:\n"
        "        out = (await c.complete('q')).text\n"
        "        return out, 'httpx' in sys.modules, c.pool.raw_route(url) is not None\n"
        "with LocalModelServer() as s:\n"
        "    print(*asyncio.run(main(s.base_url)))\n"
    )
    child_env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**child_env, **settings, "EVALNB_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", str(httpx_loaded), "True"]  # direct either way


# ---- httpx as a dependency: the tested range, and a loud failure if its routing changes -------

def _routing_state(monkeypatch):
    from evalnb.providers import http_clients

    monkeypatch.setattr(http_clients, "_routing_checked", False)
    return http_clients


def test_the_installed_httpx_is_in_the_pinned_range_and_routes_as_expected(monkeypatch):
    import tomllib
    from pathlib import Path

    from packaging.specifiers import SpecifierSet

    http_clients = _routing_state(monkeypatch)
    pyproject = tomllib.loads((Path(http_clients.__file__).parents[2] / "pyproject.toml").read_text())
    pin = next(d for d in pyproject["project"]["dependencies"] if d.startswith("httpx"))
    assert SpecifierSet(pin[len("httpx"):]) == SpecifierSet(http_clients.TESTED_HTTPX)
    assert httpx.__version__ in SpecifierSet(http_clients.TESTED_HTTPX)
    http_clients.check_httpx_routing()  # no error


@pytest.mark.parametrize("change", ["proxies inside the default transport", "renamed internals"])
def test_an_httpx_that_routes_otherwise_fails_loudly_instead_of_bypassing_the_proxy(env, monkeypatch, change):
    """As a future httpx might: the check refuses before any call, nothing goes around the proxy."""
    _routing_state(monkeypatch)
    if change == "renamed internals":
        monkeypatch.delattr(httpx.AsyncClient, "_transport_for_url")
    else:  # every URL gets the default transport, which would then apply the proxy itself
        monkeypatch.setattr(httpx.AsyncClient, "_transport_for_url", lambda self, url: self._transport)
    with LocalModelServer(_answer) as server, ForwardProxy({"127.0.0.1": server.port}) as proxy:
        env.setenv("HTTP_PROXY", proxy.url)
        with pytest.raises(evalnb.errors.EvalnbError, match=r"httpx .* routes requests differently.*httpx>=0\.27,<0\.30"):
            complete_all(server.base_url, ["ITEM-1"])
        assert server.request_count == 0 and proxy.seen == []
        env.delenv("HTTP_PROXY")  # no proxy variable: nothing to route, the check is not needed
        assert complete_all(server.base_url, ["ITEM-2"]) == ["2"]
