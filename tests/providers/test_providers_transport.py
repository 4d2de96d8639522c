"""Http11Transport: the wire details httpx users rely on, against scripted raw-socket servers."""

from __future__ import annotations

import asyncio
import gzip
import json

import httpx
import pytest

from evalnb.providers.transport import Http11Transport
from evalnb.testing import LocalModelServer


def run(coro):
    return asyncio.run(coro)


class Scripted:
    """A raw server in the test's own loop: reads one request, sends the next canned reply."""

    def __init__(self, replies: list[bytes | None], *, close_after: bool = False):
        self.replies = list(replies)
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _handle(self, reader, writer):
        self.connections += 1
        try:
            while self.replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                self.requests.append(head + await reader.readexactly(length))
                reply = self.replies.pop(0)
                if reply is None:  # hang: never answer
                    await asyncio.sleep(10)
                await self._send(writer, reply)
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _send(self, writer, reply: bytes) -> None:
        writer.write(reply)
        await writer.drain()


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def post(url: str, transport: Http11Transport, **kwargs) -> httpx.Response:
    async with httpx.AsyncClient(transport=transport) as client:
        return await client.post(url, json={"q": 1}, **kwargs)


def test_request_is_one_buffer_with_content_length_and_headers():
    async def main():
        async with Scripted([ok(b'{"a": 1}')]) as srv:
            r = await post(srv.url + "/v1/x?y=1", Http11Transport(), headers={"Authorization": "Bearer k"})
            return r, srv.requests[0]

    r, raw = run(main())
    assert r.status_code == 200 and r.json() == {"a": 1} and r.http_version == "HTTP/1.1"
    assert raw.startswith(b"POST /v1/x?y=1 HTTP/1.1\r\n")
    assert b"Content-Length: 7\r\n" in raw and b"Authorization: Bearer k\r\n" in raw
    assert raw.endswith(b'\r\n\r\n{"q":1}') or raw.endswith(b'\r\n\r\n{"q": 1}')


def test_chunked_reply_with_trailers():
    body = b'{"text": "chunked works"}'
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"5\r\n" + body[:5] + b"\r\n"
               + b"%x;ext=1\r\n" % (len(body) - 5) + body[5:] + b"\r\n0\r\nX-Trailer: y\r\n\r\n")

    async def main():
        async with Scripted([chunked, ok(b"{}")]) as srv:
            transport = Http11Transport()
            async with httpx.AsyncClient(transport=transport) as client:
                first = await client.post(srv.url, json={})
                second = await client.post(srv.url, json={})  # same connection afterwards
            return first, second, srv.connections

    first, second, conns = run(main())
    assert first.json() == {"text": "chunked works"} and second.json() == {}
    assert conns == 1


class Trickle(Scripted):
    """Sends each reply a few bytes at a time, so it is parsed across many reads."""

    async def _send(self, writer, reply: bytes) -> None:
        for i in range(0, len(reply), 3):
            writer.write(reply[i:i + 3])
            await writer.drain()
            await asyncio.sleep(0)


@pytest.mark.parametrize("use_raw", [False, True])
def test_replies_arriving_a_few_bytes_at_a_time(use_raw):
    body = b'{"text": "' + "é".encode() * 40 + b'"}'
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"7\r\n" + body[:7] + b"\r\n" + b"%x\r\n" % (len(body) - 7) + body[7:] + b"\r\n0\r\n\r\n")

    async def main():
        async with Trickle([b"HTTP/1.1 100 Continue\r\n\r\n" + ok(body), chunked, ok(b"{}")]) as srv:
            transport = Http11Transport()
            if use_raw:
                port = int(srv.url.rsplit(":", 1)[1])
                wire = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
                out = [(await transport.send_raw("127.0.0.1", port, wire, timeout=5))[3] for _ in range(3)]
            else:
                async with httpx.AsyncClient(transport=transport) as client:
                    out = [(await client.post(srv.url, json={})).content for _ in range(3)]
            await transport.aclose()
            return out, srv.connections

    out, conns = run(main())
    assert out == [body, body, b"{}"]
    assert conns == 1  # both replies ended exactly where they should: the connection was kept


def test_bytes_after_the_reply_make_the_connection_unusable():
    async def main():
        async with Scripted([ok(b"{}") + b"GARBAGE", ok(b"[]")]) as srv:
            async with httpx.AsyncClient(transport=Http11Transport()) as client:
                first = await client.post(srv.url, json={})
                second = await client.post(srv.url, json={})
            return first.content, second.content, srv.connections

    first, second, conns = run(main())
    assert (first, second) == (b"{}", b"[]")
    assert conns == 2


def test_a_cancelled_exchange_closes_its_connection():
    async def main():
        async with Scripted([None, ok(b"{}")]) as srv:
            transport = Http11Transport()
            port = int(srv.url.rsplit(":", 1)[1])
            wire = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
            with pytest.raises(TimeoutError):
                await transport.send_raw("127.0.0.1", port, wire, timeout=0.1)
            assert not any(transport.pool._idle.values())  # the hung connection was not put back
            await transport.aclose()
        return True

    assert run(main())


def test_body_until_close_and_connection_close_header():
    async def main():
        async with Scripted([b"HTTP/1.1 200 OK\r\n\r\n{\"eof\": true}", ok(b"{}")],
                            close_after=True) as srv:
            async with httpx.AsyncClient(transport=Http11Transport()) as client:
                a = await client.post(srv.url, json={})
                b = await client.post(srv.url, json={})
            return a, b, srv.connections

    a, b, conns = run(main())
    assert a.json() == {"eof": True} and b.json() == {}
    assert conns == 2  # the first connection could not be reused


def test_keep_alive_reuses_connections_sequentially():
    async def main():
        async with Scripted([ok(b"{}")] * 5) as srv:
            async with httpx.AsyncClient(transport=Http11Transport()) as client:
                for _ in range(5):
                    assert (await client.post(srv.url, json={})).status_code == 200
            return srv.connections

    assert run(main()) == 1


def test_server_closing_idle_connection_is_not_an_error():
    async def main():
        async with Scripted([ok(b"{}", b"Connection: keep-alive\r\n")] * 2, close_after=True) as srv:
            async with httpx.AsyncClient(transport=Http11Transport()) as client:
                await client.post(srv.url, json={})
                await asyncio.sleep(0.05)  # the server's FIN arrives while the connection idles
                r = await client.post(srv.url, json={})
            return r, srv.connections

    r, conns = run(main())
    assert r.status_code == 200 and conns == 2


def test_interim_100_continue_is_skipped_and_gzip_is_decoded():
    payload = gzip.compress(json.dumps({"zipped": True}).encode())
    reply = (b"HTTP/1.1 100 Continue\r\n\r\n"
             + ok(payload, b"Content-Encoding: gzip\r\nContent-Type: application/json\r\n"))

    async def main():
        async with Scripted([reply]) as srv:
            return await post(srv.url, Http11Transport())

    r = run(main())
    assert r.status_code == 200 and r.json() == {"zipped": True}


def test_status_reason_and_no_body_statuses():
    async def main():
        async with Scripted([b"HTTP/1.1 204 No Content\r\n\r\n",
                             b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 2\r\n\r\n{}"]) as srv:
            async with httpx.AsyncClient(transport=Http11Transport()) as client:
                a = await client.post(srv.url, json={})
                b = await client.post(srv.url, json={})
            return a, b

    a, b = run(main())
    assert a.status_code == 204 and a.content == b""
    assert b.status_code == 429 and b.reason_phrase == "Too Many Requests"
    assert b.headers["retry-after"] == "3"


def test_errors_map_to_httpx_exceptions():
    async def main():
        async with Scripted([b"NONSENSE\r\n\r\n"]) as srv:
            with pytest.raises(httpx.RemoteProtocolError, match="bad status line"):
                await post(srv.url, Http11Transport())
        async with Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"],
                            close_after=True) as srv:
            with pytest.raises(httpx.RemoteProtocolError, match="middle of the response"):
                await post(srv.url, Http11Transport())
        async with Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n"]) as srv:
            with pytest.raises(httpx.RemoteProtocolError, match="Content-Length"):
                await post(srv.url, Http11Transport())
        async with Scripted([None]) as srv:
            with pytest.raises(httpx.ReadTimeout):
                await post(srv.url, Http11Transport(), timeout=httpx.Timeout(0.1))
        with pytest.raises(httpx.ConnectError):
            s = LocalModelServer().start()
            url = s.base_url
            s.stop()
            await post(url, Http11Transport())
        return True

    assert run(main())


def test_pool_timeout_when_all_connections_are_busy():
    async def main():
        async with Scripted([None, ok(b"{}")]) as srv:
            transport = Http11Transport(max_connections=1)
            async with httpx.AsyncClient(transport=transport) as client:
                hung = asyncio.ensure_future(client.post(srv.url, json={}, timeout=5))
                await asyncio.sleep(0.05)
                with pytest.raises(httpx.PoolTimeout):
                    await client.post(srv.url, json={}, timeout=httpx.Timeout(5, pool=0.1))
                hung.cancel()
        return True

    assert run(main())


def test_against_local_model_server_many_concurrent_calls():
    async def main(url):
        async with httpx.AsyncClient(transport=Http11Transport(max_connections=8)) as client:
            rs = await asyncio.gather(*(client.post(url, json={"model": "m", "input": f"q{i}"})
                                        for i in range(200)))
        return [r.json()["output_text"] for r in rs]

    with LocalModelServer(lambda body: body["input"].upper()) as s:
        out = run(main(f"{s.base_url}/responses"))
        assert s.max_in_flight <= 8 and s.request_count == 200
    assert out == [f"Q{i}" for i in range(200)]
