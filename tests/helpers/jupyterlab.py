"""A JupyterLab server on 127.0.0.1 and the headless-Chromium settings the browser tests share.

Facts from ../shared/NOTEBOOK_TESTING.md: `--allow-root`, a known token, temporary config /
runtime / workspace / settings folders, no news pop-up or update check, poll `/api/status`,
stop the server by its own PID (its kernels go with it). Windowing is off so off-screen
outputs are in the DOM too.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_jupyterlab(tmp_path: Path, root: Path, env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """JupyterLab serving `root`; yields (url, token) once it answers, stops it afterwards."""
    dirs = {name: tmp_path / name for name in ("config", "runtime", "workspaces", "settings", "data")}
    for d in dirs.values():
        d.mkdir()
    for plugin, settings in (("notebook-extension/tracker", {"windowingMode": "none"}),
                             ("apputils-extension/notification", {"fetchNews": "false"})):
        path = dirs["settings"] / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    env = dict(env)
    env.update(
        JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]), JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        IPYTHONDIR=str(dirs["data"] / "ipython"),
    )
    port, token = free_port(), secrets.token_hex(16)
    log_path = tmp_path / "jupyterlab.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--ServerApp.open_browser=False"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("JupyterLab did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.3)
        yield url, token
    finally:
        proc.terminate()  # our own server process; its kernels go with it
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@contextlib.contextmanager
def open_lab_notebook(url: str, token: str, path: str) -> Iterator[tuple]:
    """Headless Chromium on `path` in the served JupyterLab; yields (page, notebook panel).

    Returns once the notebook shows and its kernel is idle; the browser closes afterwards.
    """
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/lab/tree/{path}?token={token}")
            notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            expect(notebook.locator(".jp-Cell").first).to_be_visible()
            # "Idle" in the toolbar can show while the kernel is still starting: wait for the status bar.
            expect(page.locator(".jp-StatusBar-Widget").filter(has_text=re.compile(r"\|\s*Idle"))).to_be_visible()
            yield page, notebook
        finally:
            browser.close()
