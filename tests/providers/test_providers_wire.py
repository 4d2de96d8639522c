"""wire.ConnectionPool: the wire details the lean keep-alive path relies on, against scripted
raw-socket servers (and one LocalModelServer)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from evalnb.providers.wire import ConnectionPool
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


WIRE = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


async def send(srv: Scripted, pool: ConnectionPool, *, timeout: float | None = 5,
               wire: bytes = WIRE, method: str = "POST") -> tuple:
    """(status, reason, headers, body) of one request to a scripted server."""
    port = int(srv.url.rsplit(":", 1)[1])
    return await pool.send_raw("127.0.0.1", port, wire, method=method, timeout=timeout)


def test_the_request_goes_out_as_given_and_the_reply_comes_back_parsed():
    wire = b"POST /v1/x?y=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Length: 8\r\n\r\n{\"q\": 1}"

    async def main():
        async with Scripted([ok(b'{"a": 1}', b"X-Req: 7\r\n")]) as srv:
            pool = ConnectionPool()
            out = await send(srv, pool, wire=wire)
            pool.close()
            return out, srv.requests[0]

    (status, reason, headers, body), raw = run(main())
    assert (status, reason, body) == (200, b"OK", b'{"a": 1}')
    assert (b"X-Req", b"7") in headers
    assert raw == wire


def test_chunked_reply_with_trailers():
    body = b'{"text": "chunked works"}'
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"5\r\n" + body[:5] + b"\r\n"
               + b"%x;ext=1\r\n" % (len(body) - 5) + body[5:] + b"\r\n0\r\nX-Trailer: y\r\n\r\n")

    async def main():
        async with Scripted([chunked, ok(b"{}")]) as srv:
            pool = ConnectionPool()
            first = await send(srv, pool)
            second = await send(srv, pool)  # same connection afterwards
            pool.close()
            return first[3], second[3], srv.connections

    first, second, conns = run(main())
    assert first == body and second == b"{}"
    assert conns == 1


class Trickle(Scripted):
    """Sends each reply a few bytes at a time, so it is parsed across many reads."""

    async def _send(self, writer, reply: bytes) -> None:
        for i in range(0, len(reply), 3):
            writer.write(reply[i:i + 3])
            await writer.drain()
            await asyncio.sleep(0)


def test_replies_arriving_a_few_bytes_at_a_time():
    body = b'{"text": "' + "é".encode() * 40 + b'"}'
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"7\r\n" + body[:7] + b"\r\n" + b"%x\r\n" % (len(body) - 7) + body[7:] + b"\r\n0\r\n\r\n")

    async def main():
        async with Trickle([b"HTTP/1.1 100 Continue\r\n\r\n" + ok(body), chunked, ok(b"{}")]) as srv:
            pool = ConnectionPool()
            out = [(await send(srv, pool))[3] for _ in range(3)]
            pool.close()
            return out, srv.connections

    out, conns = run(main())
    assert out == [body, body, b"{}"]
    assert conns == 1  # both replies ended exactly where they should: the connection was kept


def test_bytes_after_the_reply_make_the_connection_unusable():
    async def main():
        async with Scripted([ok(b"{}") + b"GARBAGE", ok(b"[]")]) as srv:
            pool = ConnectionPool()
            first, second = await send(srv, pool), await send(srv, pool)
            pool.close()
            return first[3], second[3], srv.connections

    first, second, conns = run(main())
    assert (first, second) == (b"{}", b"[]")
    assert conns == 2


def test_a_cancelled_exchange_closes_its_connection():
    async def main():
        async with Scripted([None, ok(b"{}")]) as srv:
            pool = ConnectionPool()
            with pytest.raises(TimeoutError):
                await send(srv, pool, timeout=0.1)
            assert not any(pool._idle.values())  # the hung connection was not put back
            assert (await send(srv, pool))[3] == b"{}"  # a new connection for the next call
            pool.close()
            assert srv.connections == 2
        return True

    assert run(main())


def test_body_until_close_and_connection_close_header():
    async def main():
        async with Scripted([b"HTTP/1.1 200 OK\r\n\r\n{\"eof\": true}", ok(b"{}")],
                            close_after=True) as srv:
            pool = ConnectionPool()
            a, b = await send(srv, pool), await send(srv, pool)
            pool.close()
            return a[3], b[3], srv.connections

    a, b, conns = run(main())
    assert a == b'{"eof": true}' and b == b"{}"
    assert conns == 2  # the first connection could not be reused


def test_keep_alive_reuses_connections_sequentially():
    async def main():
        async with Scripted([ok(b"{}")] * 5) as srv:
            pool = ConnectionPool()
            for _ in range(5):
                assert (await send(srv, pool))[0] == 200
            pool.close()
            return srv.connections

    assert run(main()) == 1


def test_server_closing_idle_connection_is_not_an_error():
    async def main():
        async with Scripted([ok(b"{}", b"Connection: keep-alive\r\n")] * 2, close_after=True) as srv:
            pool = ConnectionPool()
            await send(srv, pool)
            await asyncio.sleep(0.05)  # the server's FIN arrives while the connection idles
            r = await send(srv, pool)
            pool.close()
            return r, srv.connections

    r, conns = run(main())
    assert r[0] == 200 and conns == 2


def test_interim_100_continue_is_skipped():
    reply = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b'{"after": "continue"}')

    async def main():
        async with Scripted([reply]) as srv:
            pool = ConnectionPool()
            out = await send(srv, pool)
            pool.close()
            return out

    status, _, _, body = run(main())
    assert status == 200 and body == b'{"after": "continue"}'


def test_status_reason_and_no_body_statuses():
    async def main():
        async with Scripted([b"HTTP/1.1 204 No Content\r\n\r\n",
                             b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 2\r\n\r\n{}"]) as srv:
            pool = ConnectionPool()
            a, b = await send(srv, pool), await send(srv, pool)
            pool.close()
            return a, b

    a, b = run(main())
    assert a[0] == 204 and a[3] == b""
    assert b[0] == 429 and b[1] == b"Too Many Requests"
    assert (b"Retry-After", b"3") in b[2]


def test_errors_map_to_httpx_exceptions():
    async def main():
        pool = ConnectionPool()
        async with Scripted([b"NONSENSE\r\n\r\n"]) as srv:
            with pytest.raises(httpx.RemoteProtocolError, match="bad status line"):
                await send(srv, pool)
        async with Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"],
                            close_after=True) as srv:
            with pytest.raises(httpx.RemoteProtocolError, match="middle of the response"):
                await send(srv, pool)
        async with Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n"]) as srv:
            with pytest.raises(httpx.RemoteProtocolError, match="Content-Length"):
                await send(srv, pool)
        async with Scripted([None]) as srv:
            with pytest.raises(TimeoutError):
                await send(srv, pool, timeout=0.1)
        with pytest.raises(httpx.ConnectError):
            s = LocalModelServer().start()
            port = s.port
            s.stop()
            await pool.send_raw("127.0.0.1", port, WIRE, timeout=5)
        pool.close()
        return True

    assert run(main())


def test_at_most_max_connections_in_flight_the_rest_wait():
    async def main():
        async with Scripted([None, ok(b"{}")]) as srv:
            pool = ConnectionPool(max_connections=1)
            hung = asyncio.ensure_future(send(srv, pool, timeout=5))
            await asyncio.sleep(0.05)
            with pytest.raises(TimeoutError):  # waits for the one connection, which never frees
                await send(srv, pool, timeout=0.1)
            hung.cancel()
            out = await send(srv, pool)  # the slot is free again once the hung call is gone
            pool.close()
            return out[3], srv.connections

    assert run(main()) == (b"{}", 2)


def test_against_local_model_server_many_concurrent_calls():
    import json

    async def main(port):
        pool = ConnectionPool(max_connections=8)

        async def one(i):
            body = json.dumps({"model": "m", "input": f"q{i}"}).encode()
            wire = (b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            return json.loads((await pool.send_raw("127.0.0.1", port, wire, timeout=10))[3])

        rs = await asyncio.gather(*(one(i) for i in range(200)))
        pool.close()
        return [r["output_text"] for r in rs]

    with LocalModelServer(lambda body: body["input"].upper()) as s:
        out = run(main(s.port))
        assert s.max_in_flight <= 8 and s.request_count == 200
    assert out == [f"Q{i}" for i in range(200)]
