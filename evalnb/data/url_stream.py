"""Stream a public URL as byte lines: checked address, pinned connection, bounded sizes.

Redirects are followed by hand because an automatic redirect is the classic way around an
SSRF check (a public URL answering ``302 Location: http://127.0.0.1/``). Each hop's host is
resolved once (``public_addresses``) and the connection goes to that checked address: the
request is sent to the IP with the original ``Host`` header and, for https, the original
name for SNI and certificate checks, so a DNS answer that changes between the check and the
connect (rebinding) cannot send it elsewhere. Lines are yielded as they arrive, so a reader
that needs only ``max_rows`` rows stops early; the download, the decompressed body and a
single line each have a size cap.
"""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evalnb.data.url_safety import Resolver, public_addresses
from evalnb.errors import DatasetError

MAX_REDIRECTS = 5
MAX_BYTES = 2 * 1024**3  # a data file larger than this is almost certainly a mistake
MAX_DECOMPRESSED_BYTES = 8 * 1024**3  # a .gz that inflates past this is a bomb, not a dataset
MAX_LINE_BYTES = 64 * 1024**2  # one JSONL/CSV line; anything longer would sit in memory whole
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
_INFLATE_STEP = 1 << 20  # inflate at most this much output per step


def iter_url_lines(url: str, *, allow_private: bool = False, transport: Any = None,
                   resolver: Resolver | None = None, verify: Any = True,
                   allow: Callable[[Any], bool] | None = None) -> Iterator[bytes]:
    """Yield the body of ``url`` line by line (``.gz`` files are decompressed).

    ``transport`` (an ``httpx`` transport), ``resolver`` (``(host, port, url) -> addresses``),
    ``allow`` (which addresses count as public) and ``verify`` (an ``ssl.SSLContext``) let
    tests stand in for remote servers and DNS without leaving this machine.
    """
    import httpx

    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    current = url
    with httpx.Client(follow_redirects=False, timeout=timeout, transport=transport, verify=verify) as client:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                # Check the URL as httpx itself reads it too, in case the two parsers disagree.
                check = {"allow_private": allow_private, "resolver": resolver, "allow": allow}
                public_addresses(str(httpx.URL(current)), **check)
                host, port, addresses = public_addresses(current, **check)
            except (DatasetError, httpx.InvalidURL) as exc:
                if current == url:
                    raise DatasetError(str(exc)) from None
                raise DatasetError(f"URL {url!r} redirects to a refused URL: {exc}") from None
            pinned, headers, extensions = _pin(current, host, port, addresses[0])
            try:
                with client.stream("GET", pinned, headers=headers, extensions=extensions) as response:
                    if response.is_redirect and "location" in response.headers:
                        current = str(httpx.URL(current).join(response.headers["location"]))
                        continue
                    if response.status_code != 200:
                        raise DatasetError(f"URL {url!r}: HTTP {response.status_code} from {current}")
                    chunks = _capped(response.iter_bytes(), url, MAX_BYTES, "larger than")
                    if urlsplit(current).path.lower().endswith(".gz"):
                        chunks = _capped(_gunzip(chunks, url), url, MAX_DECOMPRESSED_BYTES, "decompresses to more than")
                    yield from _lines(chunks, url)
                    return
            except httpx.HTTPError as exc:
                raise DatasetError(f"URL {url!r}: download failed: {type(exc).__name__}: {exc}") from None
    raise DatasetError(f"URL {url!r}: more than {MAX_REDIRECTS} redirects")


def _pin(url: str, host: str, port: int | None, address: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The request for ``url`` sent to ``address``: IP in the URL, the name in Host and SNI."""
    parts = urlsplit(url)
    ip = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
    netloc = f"{ip}:{port}" if port is not None else ip
    name = f"[{host}]" if ":" in host else host
    headers = {"Host": f"{name}:{port}" if port is not None else name}
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, "")), headers, extensions


def _lines(chunks: Iterable[bytes], url: str) -> Iterator[bytes]:
    """Re-split chunks into lines that keep their b"\\n" (as iterating a binary file does)."""
    parts: list[bytes] = []
    pending = 0  # bytes of the line being built
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if pending + end + 1 - start > MAX_LINE_BYTES:
                raise DatasetError(f"URL {url!r}: a line is longer than {MAX_LINE_BYTES} bytes")
            parts.append(chunk[start : end + 1])
            yield b"".join(parts)
            parts.clear()
            pending = 0
            start = end + 1
        if start < len(chunk):
            parts.append(chunk[start:])
            pending += len(chunk) - start
            if pending > MAX_LINE_BYTES:
                raise DatasetError(f"URL {url!r}: a line is longer than {MAX_LINE_BYTES} bytes")
    if parts:
        yield b"".join(parts)


def _capped(chunks: Iterable[bytes], url: str, limit: int, what: str) -> Iterator[bytes]:
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise DatasetError(f"URL {url!r}: {what} {limit} bytes")
        yield chunk


def _gunzip(chunks: Iterable[bytes], url: str) -> Iterator[bytes]:
    """Inflate in bounded steps: a small compressed chunk never becomes one huge buffer."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        for chunk in chunks:
            data = chunk
            while data:
                out = inflater.decompress(data, _INFLATE_STEP)
                if out:
                    yield out
                data = inflater.unconsumed_tail
        tail = inflater.flush()  # all input is consumed by now: only a small remainder
        if tail:
            yield tail
    except zlib.error as exc:
        raise DatasetError(f"URL {url!r}: not a valid gzip file ({exc})") from None
