"""Shared fixtures: a private evalnb home, suites written to tmp_path, local model servers.

Nothing here is autouse: a test module opts in (the runner tests use
``pytestmark = pytest.mark.usefixtures("evalnb_home")``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest


@pytest.fixture
def evalnb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """EVALNB_HOME points at a fresh folder: the store, uploads and cache live there."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("EVALNB_HOME", str(home))
    return home


@pytest.fixture
def make_suite(tmp_path: Path) -> Callable[..., Any]:
    """``make_suite({"t1": rows, ...}, t1={"grader": ...})`` -> a Suite over JSONL in tmp_path."""
    from evalnb.suite import Suite
    from helpers.runner_kit import manifest

    def build(tasks: dict[str, list[dict]], **fields_by_task: dict) -> Suite:
        data = tmp_path / "data"
        return Suite.from_dict(manifest(data, tasks, **fields_by_task), base_dir=data)

    return build


@pytest.fixture
def model_server() -> Callable[..., Any]:
    """``model_server(responder=planted, **options)`` -> a started LocalModelServer (stopped after)."""
    from evalnb.testing import LocalModelServer
    from helpers.runner_kit import responder as planted

    servers: list[LocalModelServer] = []

    def start(responder: Any = planted, **options: Any) -> LocalModelServer:
        server = LocalModelServer(responder, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def widget_displays(monkeypatch: pytest.MonkeyPatch) -> list:
    """Pretend to be in Jupyter and collect the progress panels (WidgetDisplay) runs build."""
    pytest.importorskip("ipywidgets")
    import evalnb.runner.progress as progress

    made: list = []

    class Recorded(progress.WidgetDisplay):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr(progress, "WidgetDisplay", Recorded)
    return made


@pytest.fixture(scope="session")
def ray_runtime() -> Any:
    """A real Ray for the slow tests: the cluster in RAY_ADDRESS (`.ci/run` starts one with
    `ray start --head`), else a local one with 2 CPUs started here (once per session).

    Ray listens on 127.0.0.1 only (its own switch for single-machine clusters), so no test
    traffic leaves the loopback interface.
    """
    import os

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray = pytest.importorskip("ray")
    address = os.environ.get("RAY_ADDRESS")
    last: BaseException | None = None
    for _ in range(3):  # a loaded 2-core machine can miss Ray's 30 s start-up deadline
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            break
        except Exception as exc:  # noqa: BLE001 - retried, then raised
            last = exc
            ray.shutdown()
    else:
        raise RuntimeError(f"could not start or reach Ray: {last}")
    yield ray
    ray.shutdown()
