"""Downloads connect to the address that was checked, and stay bounded in size.

A resolver the test controls answers first with 127.0.0.1 (the address the test treats as
"public") and then with 127.0.0.2, where a second server holds other data: a DNS-rebinding
attack. Only 127.0.0.x addresses are ever used; no traffic leaves this machine.
"""

from __future__ import annotations

import gzip
import ipaddress
import shutil
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from evalnb.data import url_stream
from evalnb.data.url_stream import iter_url_lines
from evalnb.errors import DatasetError

GOOD, EVIL = ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("127.0.0.2")


class _Server:
    """A tiny HTTP(S) server on one address that serves `body` and records each request."""

    def __init__(self, address: str, body: bytes, *, port: int = 0, tls: ssl.SSLContext | None = None):
        self.requests: list[dict] = []
        self.sni: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                outer.requests.append({"path": self.path, "host": self.headers.get("Host")})
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer((address, port), Handler)
        if tls is not None:
            tls.sni_callback = lambda sock, name, ctx: self.sni.append(name)
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Rebinding:
    """Answers GOOD for the first `honest` lookups, then EVIL, and counts lookups."""

    def __init__(self, honest: int):
        self.honest, self.calls = honest, 0

    def __call__(self, host, port, url):
        self.calls += 1
        return [GOOD if self.calls <= self.honest else EVIL]


def _only_good(address) -> bool:
    return address == GOOD


@pytest.fixture
def servers():
    good = _Server("127.0.0.1", b'{"row": "good"}\n')
    try:
        evil = _Server("127.0.0.2", b'{"row": "evil"}\n', port=good.port)
    except OSError:
        good.close()
        pytest.skip("127.0.0.2 is not usable on this machine's loopback")
    yield good, evil
    good.close()
    evil.close()


@pytest.mark.parametrize("honest", [1, 2, 3])
def test_a_name_that_rebinds_after_the_check_never_reaches_the_other_address(servers, honest):
    good, evil = servers
    resolver = Rebinding(honest)
    url = f"http://data.example:{good.port}/rows.jsonl"
    try:
        lines = list(iter_url_lines(url, resolver=resolver, allow=_only_good))
    except DatasetError as exc:  # the rebinding showed up within the check itself: refused
        assert "127.0.0.2" in str(exc)
    else:
        assert lines == [b'{"row": "good"}\n']
        assert good.requests == [{"path": "/rows.jsonl", "host": f"data.example:{good.port}"}]
    assert evil.requests == []  # whatever the resolver says later, the connection went where it was checked
    assert resolver.calls <= 2  # the lookups of the check; the connection makes none of its own


def test_every_answer_of_the_lookup_is_checked(servers):
    good, evil = servers
    url = f"http://data.example:{good.port}/rows.jsonl"
    with pytest.raises(DatasetError, match="resolves to .*127.0.0.2"):
        list(iter_url_lines(url, resolver=lambda h, p, u: [GOOD, EVIL], allow=_only_good))
    assert good.requests == [] and evil.requests == []


def _self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}"],
                   check=True, capture_output=True)  # fmt: skip
    return key, cert


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command for a test certificate")
def test_https_is_pinned_to_the_checked_address_and_still_verifies_the_name(tmp_path):
    """The request goes to the IP, but SNI and the certificate check use the host name."""
    key, cert = _self_signed(tmp_path, "data.test")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    server = _Server("127.0.0.1", b'{"a": 1}\n{"a": 2}\n', tls=server_ctx)
    trust = ssl.create_default_context(cafile=str(cert))
    try:
        url = f"https://data.test:{server.port}/rows.jsonl"
        lines = list(iter_url_lines(url, resolver=lambda h, p, u: [GOOD], allow=_only_good, verify=trust))
        assert lines == [b'{"a": 1}\n', b'{"a": 2}\n']
        assert server.sni == ["data.test"] and server.requests[0]["host"] == f"data.test:{server.port}"
        # a certificate for another name is refused, though the address is the checked one
        with pytest.raises(DatasetError, match="download failed"):
            list(iter_url_lines(f"https://other.test:{server.port}/rows.jsonl",
                                resolver=lambda h, p, u: [GOOD], allow=_only_good, verify=trust))
    finally:
        server.close()


def test_a_gzip_bomb_stops_at_the_decompressed_cap(monkeypatch):
    monkeypatch.setattr(url_stream, "MAX_DECOMPRESSED_BYTES", 1_000_000)
    bomb = gzip.compress(b'{"x": 0}\n' * 2_000_000)  # ~18 MB inflated, ~20 kB on the wire
    server = _Server("127.0.0.1", bomb)
    try:
        url = f"http://data.example:{server.port}/big.jsonl.gz"
        lines = iter_url_lines(url, resolver=lambda h, p, u: [GOOD], allow=_only_good)
        with pytest.raises(DatasetError, match="decompresses to more than 1000000 bytes"):
            for _ in lines:
                pass
    finally:
        server.close()


def test_a_line_without_end_stops_at_the_line_cap(monkeypatch):
    monkeypatch.setattr(url_stream, "MAX_LINE_BYTES", 100_000)
    server = _Server("127.0.0.1", b'{"ok": 1}\n' + b"x" * 500_000)
    try:
        lines = iter_url_lines(f"http://data.example:{server.port}/x.jsonl", resolver=lambda h, p, u: [GOOD],
                               allow=_only_good)
        assert next(lines) == b'{"ok": 1}\n'
        with pytest.raises(DatasetError, match="a line is longer than 100000 bytes"):
            next(lines)
    finally:
        server.close()


def test_lines_split_across_chunks_come_out_whole():
    chunks = [b'{"a"', b': 1}\n{"b": 2}\n{"c"', b": 3}"]
    assert list(url_stream._lines(chunks, "u")) == [b'{"a": 1}\n', b'{"b": 2}\n', b'{"c": 3}']
