"""How a failed run reads: a 401 names the key variable to fix; the CLI states each reason once.

A real LocalModelServer answers every call with a 401 (fault injection), as a wrong key would.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers.runner_kit import manifest, rows

import evalnb
from evalnb.testing import Fault

pytestmark = pytest.mark.usefixtures("evalnb_home")

DENIED = Fault(status=401, body={"error": {"message": "Incorrect API key provided"}})


def test_a_401_names_the_key_variable_the_model_reads(make_suite, model_server, monkeypatch):
    server = model_server(faults=[DENIED])
    monkeypatch.setenv("MY_PROVIDER_KEY", "sk-wrong-but-set")
    model = evalnb.Model("m", base_url=server.base_url, api_key_env="MY_PROVIDER_KEY")
    result = evalnb.run(make_suite({"t": rows(4)}), [model], progress=False)
    errors = [e for e in result.samples["error"] if isinstance(e, str)]
    assert errors and all(f"401 from {server.base_url}: check MY_PROVIDER_KEY" in e for e in errors), errors
    assert all("sk-wrong-but-set" not in e for e in errors)  # the key itself is never shown
    assert "check MY_PROVIDER_KEY" in repr(result)


def test_a_401_without_any_key_says_none_was_sent_and_how_to_name_one(make_suite, model_server):
    server = model_server(faults=[DENIED])
    result = evalnb.run(make_suite({"t": rows(3)}), [evalnb.Model("m", base_url=server.base_url)], progress=False)
    message = result.samples["error"].iloc[0]
    assert f"401 from {server.base_url}: no key was sent" in message and "api_key_env='VAR'" in message


def _reason_count(text: str) -> int:
    return len(re.findall(r"Incorrect API key provided", text))


@pytest.mark.parametrize("progress", [True, False])
def test_the_cli_states_each_failure_reason_once(tmp_path, model_server, capsys, progress):
    from evalnb.cli import main

    server = model_server(faults=[DENIED])
    (tmp_path / "suite.json").write_text(json.dumps(manifest(tmp_path, {"t": rows(8)})), encoding="utf-8")
    args = ["run", str(tmp_path / "suite.json"), "--model", f"m@{server.base_url}"]
    code = main(args + ([] if progress else ["--no-progress"]))
    out, err = capsys.readouterr()
    assert code == 1 and "status: failed" in out
    assert _reason_count(out + err) == 1, err  # today's output said it ~7 times
    assert err.count("no key was sent") == 1
    assert "stopped after 3 consecutive failed calls (auth)" in err  # why the rest were not sent
    assert "evalnb show" in err and "--samples --failed" in err and "evalnb resume" in err
    assert re.search(r"t / m #\d", err)  # the failed samples, by place
