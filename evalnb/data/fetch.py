"""Stream a public URL as byte lines, re-checking the address at every redirect hop.

Redirects are followed by hand because an automatic redirect is the classic way around an
SSRF check (a public URL answering ``302 Location: http://127.0.0.1/``). Lines are yielded
as they arrive, so a reader that needs only ``max_rows`` rows stops the download early.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from evalnb.data.urls import check_public_url
from evalnb.errors import DatasetError

MAX_REDIRECTS = 5
MAX_BYTES = 2 * 1024**3  # a data file larger than this is almost certainly a mistake
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0


def iter_url_lines(url: str, *, allow_private: bool = False, transport: Any = None) -> Iterator[bytes]:
    """Yield the body of ``url`` line by line (``.gz`` files are decompressed).

    ``transport`` (an ``httpx`` transport) lets tests stand in for remote servers.
    """
    import httpx

    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    current = url
    with httpx.Client(follow_redirects=False, timeout=timeout, transport=transport) as client:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                check_public_url(current, allow_private=allow_private)
                # Check the URL as httpx itself reads it too, in case the two parsers disagree.
                check_public_url(str(httpx.URL(current)), allow_private=allow_private)
            except (DatasetError, httpx.InvalidURL) as exc:
                if current == url:
                    raise DatasetError(str(exc)) from None
                raise DatasetError(f"URL {url!r} redirects to a refused URL: {exc}") from None
            try:
                with client.stream("GET", current) as response:
                    if response.is_redirect and "location" in response.headers:
                        current = str(response.url.join(response.headers["location"]))
                        continue
                    if response.status_code != 200:
                        raise DatasetError(f"URL {url!r}: HTTP {response.status_code} from {current}")
                    chunks = _capped(response.iter_bytes(), url)
                    if urlsplit(current).path.lower().endswith(".gz"):
                        chunks = _gunzip(chunks, url)
                    yield from _lines(chunks)
                    return
            except httpx.HTTPError as exc:
                raise DatasetError(f"URL {url!r}: download failed: {type(exc).__name__}: {exc}") from None
    raise DatasetError(f"URL {url!r}: more than {MAX_REDIRECTS} redirects")


def _lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Re-split chunks into lines that keep their b"\\n" (as iterating a binary file does)."""
    parts: list[bytes] = []
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            parts.append(chunk[start : end + 1])
            yield b"".join(parts)
            parts.clear()
            start = end + 1
        if start < len(chunk):
            parts.append(chunk[start:])
    if parts:
        yield b"".join(parts)


def _capped(chunks: Iterable[bytes], url: str) -> Iterator[bytes]:
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > MAX_BYTES:
            raise DatasetError(f"URL {url!r}: larger than {MAX_BYTES} bytes")
        yield chunk


def _gunzip(chunks: Iterable[bytes], url: str) -> Iterator[bytes]:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        for chunk in chunks:
            yield inflater.decompress(chunk)
        yield inflater.flush()
    except zlib.error as exc:
        raise DatasetError(f"URL {url!r}: not a valid gzip file ({exc})") from None
