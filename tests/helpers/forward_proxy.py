"""A real HTTP forward proxy on 127.0.0.1, in a thread of its own, for the proxy tests.

It speaks what clients behind a corporate proxy send: absolute-form requests
(``POST http://host:port/path HTTP/1.1``) for ``http://`` URLs, forwarded in origin-form, and
``CONNECT host:port`` tunnels for ``https://``. Host names are routed only through `routes`
(name -> local port), so a name like ``model.internal.test`` is reachable only via the proxy;
an unknown name gets a 502. It records what it saw (`seen`) and counts accepted connections.
"""

from __future__ import annotations

import asyncio
import threading


class ForwardProxy:
    """``with ForwardProxy({"model.internal.test": 8123}) as proxy: proxy.url ...``"""

    def __init__(self, routes: dict[str, int]):
        self.routes = dict(routes)
        self.seen: list[str] = []  # "POST http://host:port/path" or "CONNECT host:port"
        self.connections = 0
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ForwardProxy:
        ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main(ready)), daemon=True)
        self._thread.start()
        assert ready.wait(10), "proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    async def _main(self, ready: threading.Event) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        tasks: set[asyncio.Task] = set()

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            task = asyncio.get_running_loop().create_task(self._client(reader, writer))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        await self._stop.wait()
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _route(self, authority: str) -> int | None:
        host, _, _ = authority.rpartition(":")
        return self.routes.get(host.lower())

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        pump: asyncio.Task | None = None
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, version = lines[0].split(" ", 2)
                if method == "CONNECT":
                    self.seen.append(f"CONNECT {target}")
                    port = self._route(target)
                    if port is None:
                        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                        return
                    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
                    return
                assert target.startswith("http://"), f"not an absolute-form request: {lines[0]}"
                self.seen.append(f"{method} {target}")
                authority, _, path = target[len("http://"):].partition("/")
                port = self._route(authority if ":" in authority else f"{authority}:80")
                headers = [h for h in lines[1:] if h and not h.lower().startswith("proxy-")]
                length = next((int(h.split(":", 1)[1]) for h in headers
                               if h.lower().startswith("content-length:")), 0)
                body = await reader.readexactly(length)
                if port is None:
                    writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                    continue
                if upstream is None:  # one upstream connection per client connection, kept alive
                    upstream = await asyncio.open_connection("127.0.0.1", port)
                    pump = asyncio.ensure_future(_pipe(upstream[0], writer))
                request = "\r\n".join([f"{method} /{path} {version}", *headers]) + "\r\n\r\n"
                upstream[1].write(request.encode("latin-1") + body)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if pump is not None:
                pump.cancel()
            if upstream is not None:
                upstream[1].close()
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()
