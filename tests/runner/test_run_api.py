"""The Python entry points as a user meets them: what help() shows, what a wrong argument says."""

from __future__ import annotations

import inspect

import pytest

import evalnb
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")


def test_run_shows_every_option_with_the_same_names_and_defaults_as_arun():
    run, arun = inspect.signature(evalnb.run), inspect.signature(evalnb.arun)
    assert not any(p.kind is p.VAR_KEYWORD for p in run.parameters.values())  # nothing hidden in **options
    assert [(p.name, p.kind, p.default) for p in run.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in arun.parameters.values()]
    assert {"generation", "concurrency", "judge_model", "max_cost_usd", "epochs", "executor"} <= set(run.parameters)


def test_every_option_of_run_reaches_the_run(make_suite, model_server):
    server = model_server()
    result = evalnb.run(make_suite({"t": rows(3)}), [evalnb.Model("good", base_url=server.base_url, label="g")],
                        concurrency=2, max_samples=2, epochs=2, name="signature", metadata={"k": "v"},
                        generation={"temperature": 0}, progress=False)
    assert (result.status, result.name, result.epochs) == ("completed", "signature", 2)
    assert len(result.samples) == 4 and result.run["metadata"] == {"k": "v"}


@pytest.mark.parametrize("models", [["strong"], "strong", [evalnb.Model("ok", base_url="http://127.0.0.1:9/v1"), "weak"]])
def test_a_bare_string_model_is_refused_saying_how_to_write_a_model(make_suite, models):
    with pytest.raises(TypeError) as info:
        evalnb.run(make_suite({"t": rows(2)}), models, progress=False)
    message = str(info.value)
    bare = "weak" if isinstance(models, list) and len(models) == 2 else "strong"
    assert f"{bare!r} is a bare string, which would mean OpenAI's model of that name" in message
    assert f"evalnb.Model({bare!r})" in message and "base_url='http://host:port/v1'" in message
    assert message.startswith("models[1]" if bare == "weak" else "models[0]")


def test_a_bare_string_judge_is_refused_too_and_name_at_url_still_works(make_suite, model_server):
    server = model_server()
    suite = make_suite({"t": rows(2)})
    with pytest.raises(TypeError, match=r"judge_model: 'judge' is a bare string"):
        evalnb.run(suite, [evalnb.Model("good", base_url=server.base_url)], judge_model="judge", progress=False)
    result = evalnb.run(suite, [f"good@{server.base_url}"], progress=False)
    assert result.status == "completed" and result.models == ["good"]


def test_generation_fields_an_endpoint_does_not_take_are_warned_about_before_the_run(make_suite):
    suite = make_suite({"t": rows(2)})
    with pytest.warns(UserWarning, match=r"generation: top_k not sent to gpt-4.1-mini \(its endpoint does not take"):
        evalnb.estimate(suite, [evalnb.Model("gpt-4.1-mini"), evalnb.Model("local", base_url="http://127.0.0.1:9/v1")],
                        generation={"top_k": 5})


def test_an_unset_key_variable_is_refused_before_any_call_as_the_cli_does(make_suite, model_server, monkeypatch):
    server = model_server()
    monkeypatch.delenv("EVALNB_UNSET_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    suite = make_suite({"t": rows(100)})
    with pytest.raises(evalnb.errors.MissingKeyError, match=r"environment variable EVALNB_UNSET_KEY is not set "
                                                            r"\(the API key for m at http://127.0.0.1:\d+/v1\)"):
        evalnb.run(suite, [evalnb.Model("m", base_url=server.base_url, api_key_env="EVALNB_UNSET_KEY")], progress=False)
    with pytest.raises(evalnb.errors.MissingKeyError, match="OPENAI_API_KEY is not set"):
        evalnb.run(suite, [evalnb.Model("m", base_url=server.base_url)], judge_model=evalnb.Model("gpt-4.1"),
                   progress=False)
    assert server.request_count == 0 and evalnb.runs().empty  # nothing called, no run recorded
    keyed = evalnb.run(suite, [evalnb.Model("m", base_url=server.base_url, api_key_env="EVALNB_UNSET_KEY",
                                            api_key="sk-given-in-code")], max_samples=2, progress=False)
    assert keyed.status == "completed" and server.request_count == 2
