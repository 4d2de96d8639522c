"""URL safety: every spelling of a non-public address is refused; public hosts pass.

No network: literals need no lookup, and host names resolve through a patched
``socket.getaddrinfo`` (the OS resolver is the boundary, not our code).
"""

from __future__ import annotations

import ipaddress
import socket

import httpx
import pytest

from evalnb.data import check_public_url
from evalnb.data.url_stream import iter_url_lines
from evalnb.data.url_safety import is_public_address
from evalnb.errors import DatasetError

FAKE_DNS = {
    "public.example": ["93.184.216.34"],
    "public6.example": ["2606:2800:220:1:248:1893:25c8:1946"],
    "evil.example": ["10.0.0.1"],
    "mixed.example": ["93.184.216.34", "127.0.0.1"],
    "mapped.example": ["::ffff:192.168.1.1"],
    "linklocal6.example": ["fe80::1%2"],
    "metadata.example": ["169.254.169.254"],
}


@pytest.fixture(autouse=True)
def fake_dns(monkeypatch):
    """Resolve only FAKE_DNS names; anything else fails as an unknown name would."""
    calls: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        calls.append(host)
        if host not in FAKE_DNS:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        out = []
        for address in FAKE_DNS[host]:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sockaddr = (address, port, 0, 0) if family == socket.AF_INET6 else (address, port)
            out.append((family, socket.SOCK_STREAM, 6, "", sockaddr))
        return out

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return calls


REFUSED = {
    # loopback in every IPv4 spelling
    "dotted": "http://127.0.0.1/data.jsonl",
    "decimal": "http://2130706433/",
    "octal": "http://0177.0.0.1/",
    "octal-full": "http://0177.0000.0000.0001/",
    "hex-short": "http://0x7f.1/",
    "hex-whole": "http://0x7f000001/",
    "hex-dotted": "http://0x7f.0x0.0x0.0x1/",
    "short-two": "http://127.1/",
    "short-three": "http://127.0.1/",
    "trailing-dot-ip": "http://127.0.0.1./",
    "with-port": "http://127.0.0.1:8080/x",
    "loopback-other": "http://127.255.255.254/",
    # IPv6 and IPv4-in-IPv6
    "v6-loopback": "http://[::1]/",
    "v6-loopback-long": "http://[0:0:0:0:0:0:0:1]/",
    "v6-unspecified": "http://[::]/",
    "v4-mapped-dotted": "http://[::ffff:127.0.0.1]/",
    "v4-mapped-hex": "http://[::ffff:7f00:1]/",
    "v4-mapped-private": "http://[::ffff:10.0.0.1]/",
    "v4-compatible": "http://[::127.0.0.1]/",
    "v4-translated": "http://[::ffff:0:127.0.0.1]/",
    "6to4-loopback": "http://[2002:7f00:1::]/",
    "6to4-private": "http://[2002:c0a8:101::1]/",
    "nat64-private": "http://[64:ff9b::10.0.0.1]/",
    "teredo": "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
    "v6-unique-local": "http://[fd00::1]/",
    "v6-link-local": "http://[fe80::1]/",
    "v6-zone-id": "http://[fe80::1%25eth0]/",
    "v6-site-local": "http://[fec0::1]/",
    "v6-multicast": "http://[ff02::1]/",
    "v6-documentation": "http://[2001:db8::1]/",
    "v6-unbracketed": "http://::1/",
    "v6-malformed": "http://[::ffff:0177.0.0.1]/",
    # other non-public IPv4 ranges
    "zero": "http://0.0.0.0/",
    "zero-short": "http://0/",
    "private-10": "http://10.1.2.3/",
    "private-172": "http://172.16.0.1/",
    "private-192": "http://192.168.0.1/",
    "link-local-metadata": "http://169.254.169.254/latest/meta-data/",
    "shared-cgnat": "http://100.64.0.1/",
    "multicast": "http://224.0.0.1/",
    "reserved": "http://240.0.0.1/",
    "broadcast": "http://255.255.255.255/",
    "benchmarking": "http://198.18.0.1/",
    "documentation": "http://192.0.2.1/",
    # localhost names
    "localhost": "http://localhost/",
    "localhost-port": "http://localhost:8000/x.jsonl",
    "localhost-upper": "http://LOCALHOST/",
    "localhost-trailing-dot": "http://localhost./",
    "sub-localhost": "http://api.localhost/",
    "localhost-localdomain": "http://localhost.localdomain/",
    # parser tricks
    "userinfo": "http://evil@127.0.0.1/",
    "userinfo-public-name": "http://public.example@127.0.0.1/",
    "userinfo-password": "http://user:pw@public.example/",
    "fragment-at": "http://127.0.0.1#@public.example/",
    "query-at": "http://127.0.0.1?@public.example/",
    "percent-host": "http://%31%32%37.0.0.1/",
    "percent-name": "http://local%68ost/",
    "ideographic-dots": "http://127\u30020\u30020\u30021/",
    "fullwidth-digits": "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/",
    "fullwidth-dot": "http://127\uff0e0\uff0e0\uff0e1/",
    "backslash": "http://public.example\\@127.0.0.1/",
    "backslash-slashes": "http:\\\\127.0.0.1\\",
    "uppercase-scheme": "HTTP://127.0.0.1/",
    "mixed-case-scheme": "hTtPs://localhost/",
    "whitespace": "http://127.0.0.1 /",
    "leading-space": " http://public.example/",
    "tab-in-host": "http://pub\tlic.example/",
    "newline": "http://public.example/\n",
    "too-many-parts": "http://1.2.3.4.5/",
    "octet-overflow": "http://127.0.0.256/",
    "bad-octal": "http://08.0.0.1/",
    "numeric-last-label": "http://public.example.123/",
    "empty-label": "http://public..example/",
    "bad-port": "http://public.example:99999/",
    "non-digit-port": "http://public.example:80a/",
    # missing host
    "no-host": "http:///etc/passwd",
    "no-slashes": "http:127.0.0.1",
    "empty-host-port": "http://:80/",
    "empty": "",
    # non-http schemes and relative paths
    "file": "file:///etc/passwd",
    "file-host": "file://localhost/etc/passwd",
    "ftp": "ftp://public.example/data.jsonl",
    "gopher": "gopher://public.example:70/",
    "data": "data:text/plain,hello",
    "javascript": "javascript:alert(1)",
    "hf-scheme": "hf://datasets/x/y",
    "relative": "data/train.jsonl",
    "absolute-path": "/etc/passwd",
    "protocol-relative": "//public.example/x",
    # resolved host names (patched resolver)
    "resolves-private": "https://evil.example/data.jsonl",
    "any-resolved-private": "https://mixed.example/data.jsonl",
    "resolves-mapped-private": "https://mapped.example/",
    "resolves-link-local-v6": "https://linklocal6.example/",
    "resolves-metadata": "https://metadata.example/",
    "unresolvable": "https://nxdomain.example/data.jsonl",
}


@pytest.mark.parametrize("url", list(REFUSED.values()), ids=list(REFUSED))
def test_refused(url):
    with pytest.raises(DatasetError) as info:
        check_public_url(url)
    assert repr(url) in str(info.value)


PUBLIC = {
    "name-https": "https://public.example/data/test.jsonl",
    "name-http-port": "http://public.example:8080/x.csv?raw=1#frag",
    "name-trailing-dot": "https://public.example./x",
    "name-upper": "https://PUBLIC.Example/x",
    "upper-scheme": "HTTPS://public.example/x",
    "ipv6-name": "https://public6.example/x",
    "ipv4-literal": "https://93.184.216.34/x.jsonl",
    "ipv4-literal-decimal": "http://1572395042/",
    "ipv6-literal": "https://[2606:4700:4700::1111]:443/x",
    "v4-mapped-public": "http://[::ffff:93.184.216.34]/",
    "6to4-public": "http://[2002:5db8:d822::1]/",
}


@pytest.mark.parametrize("url", list(PUBLIC.values()), ids=list(PUBLIC))
def test_public_accepted(url):
    assert check_public_url(url) is None


def test_literal_needs_no_lookup_and_names_are_resolved(fake_dns):
    check_public_url("https://93.184.216.34/x")
    check_public_url("https://[2606:4700:4700::1111]/x")
    assert fake_dns == []
    check_public_url("https://public.example/x")
    assert fake_dns == ["public.example"]


def test_unresolvable_says_cannot_resolve():
    with pytest.raises(DatasetError, match="cannot resolve host 'nxdomain.example'"):
        check_public_url("https://nxdomain.example/x")


def test_any_private_address_refuses_the_name_and_says_which():
    with pytest.raises(DatasetError, match=r"resolves to the loopback address 127\.0\.0\.1"):
        check_public_url("https://mixed.example/x")


def test_error_names_the_kind_of_address():
    with pytest.raises(DatasetError, match="only http and https URLs are allowed \\(found scheme 'file'\\)"):
        check_public_url("file:///etc/passwd")
    with pytest.raises(DatasetError, match="shared"):
        check_public_url("http://100.64.0.1/")
    with pytest.raises(DatasetError, match="embeds the loopback address 127.0.0.1"):
        check_public_url("http://[::ffff:127.0.0.1]/")


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/x.jsonl", "http://localhost/x", "http://[::1]/", "http://10.0.0.1/", "http://evil.example/"]
)
def test_allow_private_skips_the_address_check(url):
    assert check_public_url(url, allow_private=True) is None


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://127.0.0.1/", "http://u@127.0.0.1/", "http:///x", "http://%31.0.0.1/"]
)
def test_allow_private_still_enforces_scheme_and_syntax(url):
    with pytest.raises(DatasetError):
        check_public_url(url, allow_private=True)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("93.184.216.34", True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),
        ("127.0.0.1", False),
        ("100.127.255.255", False),
        ("100.128.0.0", True),
        ("172.15.255.255", True),
        ("172.16.0.0", False),
        ("172.31.255.255", False),
        ("172.32.0.0", True),
        ("224.0.0.1", False),
        ("::", False),
        ("::1", False),
        ("::2", False),
        ("fec0::1", False),
        ("2002:7f00:1::", False),
        ("2002:808:808::", True),
        ("64:ff9b::808:808", True),
        ("64:ff9b::a9fe:a9fe", False),
    ],
)
def test_is_public_address_edges(address, public):
    assert is_public_address(ipaddress.ip_address(address)) is public


# --- redirects: every hop is re-checked (httpx MockTransport stands in for the remote server)


def _transport(routes: dict[str, httpx.Response], seen: list[str], connected: list[str] | None = None
               ) -> httpx.MockTransport:
    """Routes by the URL as named (Host header): the request itself goes to the checked IP."""
    def handler(request: httpx.Request) -> httpx.Response:
        named = f"{request.url.scheme}://{request.headers['host']}{request.url.raw_path.decode()}"
        seen.append(named)
        if connected is not None:
            connected.append(request.url.host)
        return routes[named]

    return httpx.MockTransport(handler)


def test_redirect_to_private_host_is_refused_before_it_is_requested():
    seen: list[str] = []
    routes = {
        "https://public.example/data.jsonl": httpx.Response(302, headers={"Location": "http://127.0.0.1:9/secret"}),
        "http://127.0.0.1:9/secret": httpx.Response(200, content=b'{"secret": 1}\n'),
    }
    with pytest.raises(DatasetError, match="redirects to a refused URL.*loopback"):
        list(iter_url_lines("https://public.example/data.jsonl", transport=_transport(routes, seen)))
    assert seen == ["https://public.example/data.jsonl"]


def test_redirect_between_public_hosts_is_followed():
    seen: list[str] = []
    routes = {
        "https://public.example/a": httpx.Response(301, headers={"Location": "/b"}),
        "https://public.example/b": httpx.Response(302, headers={"Location": "https://public6.example/c"}),
        "https://public6.example/c": httpx.Response(200, content=b'{"x": 1}\n{"x": 2}'),
    }
    lines = list(iter_url_lines("https://public.example/a", transport=_transport(routes, seen)))
    assert lines == [b'{"x": 1}\n', b'{"x": 2}']
    assert seen == ["https://public.example/a", "https://public.example/b", "https://public6.example/c"]


def test_redirect_loop_is_bounded():
    seen: list[str] = []
    routes = {"https://public.example/a": httpx.Response(302, headers={"Location": "https://public.example/a"})}
    with pytest.raises(DatasetError, match="more than 5 redirects"):
        list(iter_url_lines("https://public.example/a", transport=_transport(routes, seen)))
    assert len(seen) == 6


def test_http_error_status_is_reported():
    seen: list[str] = []
    routes = {"https://public.example/missing.jsonl": httpx.Response(404)}
    with pytest.raises(DatasetError, match="HTTP 404"):
        list(iter_url_lines("https://public.example/missing.jsonl", transport=_transport(routes, seen)))
