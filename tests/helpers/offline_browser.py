"""Headless Chromium with the network off: a page may load file: and loopback URLs, nothing else.

What a report looks like to someone who opens it from disk or a mail attachment with no internet:
every other request is refused and recorded, so a test can also check nothing tried a CDN.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator
from urllib.parse import urlparse

from helpers.jupyterlab import CHROMIUM, CHROMIUM_FLAGS

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


@contextmanager
def offline_page(width: int = 1200, height: int = 1300) -> Iterator[tuple]:
    """Yields (page, refused URLs); the browser closes afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            refused: list[str] = []

            def only_local(route):
                url = route.request.url
                parsed = urlparse(url)
                if parsed.scheme in ("file", "data", "blob", "about") or parsed.hostname in LOOPBACK:
                    route.continue_()
                else:
                    refused.append(url)
                    route.abort()

            page.route("**/*", only_local)
            yield page, refused
        finally:
            browser.close()
