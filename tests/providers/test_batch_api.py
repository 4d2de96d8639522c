"""The Batch API client: JSONL lines, splits, result files, and HTTP against LocalModelServer."""

from __future__ import annotations

import asyncio
import json

import pytest

from evalnb.errors import ProviderError
from evalnb.providers import Model
from evalnb.providers.batch_api import BatchAPI, live_body, parse_results, poll_delays, request_line, split
from evalnb.providers.build import build_chat_request, build_responses_request
from evalnb.providers.pricing import batch_price, call_cost, check_price, has_batch_price
from evalnb.testing import Fault, LocalModelServer

GEN = {"temperature": 0, "max_output_tokens": 16, "instructions": "be brief", "top_k": 5, "max_retries": 3}


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_request_line_carries_the_live_body(api):
    model = Model("m", base_url="http://127.0.0.1:9/v1", api=api)
    line = request_line("t/m/3/0", *live_body(model, "What is 2+2?", GEN))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    record = json.loads(line)
    build = build_chat_request if api == "chat" else build_responses_request
    assert record == {"custom_id": "t/m/3/0", "method": "POST",
                      "url": "/v1/chat/completions" if api == "chat" else "/v1/responses",
                      "body": build("m", "What is 2+2?", GEN, is_openai=False)}
    assert "max_retries" not in record["body"]  # execution controls are never sent
    openai = request_line("x", *live_body(Model("gpt", api=api), "q", GEN))
    assert b"top_k" not in openai  # nor pass-through fields to OpenAI, as live


def test_split_by_requests_and_bytes_in_order():
    lines = [(str(i), b"x" * 10 + b"\n") for i in range(10)]  # 11 bytes each
    parts = split(lines, max_requests=4)
    assert [len(p) for p in parts] == [4, 4, 2]
    assert [cid for p in parts for cid, _ in p] == [str(i) for i in range(10)]
    assert [len(p) for p in split(lines, max_bytes=33)] == [3, 3, 3, 1]
    assert split([], max_requests=3) == []
    with pytest.raises(ValueError, match=r"request '0' is 11 bytes, over the batch file limit of 10"):
        split(lines, max_bytes=10)


def test_parse_results_output_error_expired_and_garbage():
    data = b"\n".join(json.dumps(r).encode() for r in [
        {"custom_id": "ok", "response": {"status_code": 200, "body": {
            "id": "r1", "output_text": "4", "output": [], "usage": {"input_tokens": 3, "output_tokens": 1}}},
         "error": None},
        {"custom_id": "bad", "response": {"status_code": 400, "body": {"error": {"message": "no such model"}}},
         "error": None},
        {"custom_id": "slow", "response": {"status_code": 503, "body": {"error": {"message": "overloaded"}}}},
        {"custom_id": "late", "response": None, "error": {"code": "batch_expired", "message": "window passed"}},
        {"custom_id": "odd", "response": {"status_code": 200, "body": {"nothing": 1}}},
    ]) + b"\nnot json\n"
    found = parse_results(data, "responses")
    assert found["ok"].reply.text == "4" and found["ok"].reply.usage["input_tokens"] == 3
    assert found["ok"].reply.response_id == "r1" and found["ok"].error is None
    assert found["bad"].error == "HTTP 400: no such model" and not found["bad"].retryable
    assert found["slow"].retryable and found["slow"].status == 503
    assert found["late"].retryable and "batch_expired: window passed" in found["late"].error
    assert found["odd"].reply is None and found["odd"].retryable and "bad reply" in found["odd"].error
    assert set(found) == {"ok", "bad", "slow", "late", "odd"}


def test_poll_delays_start_quick_and_back_off_to_the_interval():
    gen = poll_delays(1.0)
    assert [next(gen) for _ in range(7)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert next(poll_delays(0.01)) == 0.01


def test_client_round_trip_and_errors_against_a_local_server():
    async def main(server):
        model = Model("m", base_url=server.base_url, api_key="sk-secret-for-batch-test")
        async with BatchAPI(model) as api:
            lines = [request_line(f"c{i}", *live_body(model, f"q{i}", {})) for i in range(3)]
            batch = await api.submit(b"".join(lines), metadata={"evalnb_run": "r"})
            assert batch["status"] == "validating" and batch["metadata"] == {"evalnb_run": "r"}
            seen = await api.retrieve(batch["id"])
            assert seen["status"] == "completed"
            outcomes = await api.outcomes(seen)
            assert {c: o.reply.text for c, o in outcomes.items()} == {"c0": "42", "c1": "42", "c2": "42"}
            assert await api.input_lines(seen) == {f"c{i}": lines[i] for i in range(3)}
            assert [b["id"] for b in await api.recent(0)] == [batch["id"]]
            with pytest.raises(ProviderError, match="batch API GET /batches/nope: HTTP 404") as err:
                await api.retrieve("nope")
            assert err.value.status == 404 and not err.value.retryable
            with pytest.raises(ProviderError, match="HTTP 409"):
                await api.cancel(batch["id"])  # finished

    with LocalModelServer() as server:
        asyncio.run(main(server))
        assert server.requests[0].headers["authorization"] == "Bearer sk-secret-for-batch-test"


def test_transient_api_errors_are_retried_and_keys_never_shown():
    async def main(url):
        model = Model("m", base_url=url, api_key="sk-secret-for-batch-test")
        async with BatchAPI(model, retries=2, backoff_base=0.001) as api:
            with pytest.raises(ProviderError) as err:
                await api.retrieve("b1")
        return err.value

    # a server that quotes the key back in a 503, three times: retried twice, then reported masked
    with LocalModelServer(faults=[Fault(status=503)]) as server:
        server.batches_book.handle = lambda method, path, headers, body: (  # type: ignore[method-assign]
            503, json.dumps({"error": {"message": f"down, {headers.get('authorization')}"}}).encode(), {})
        error = asyncio.run(main(server.base_url))
        assert server.request_count == 3
    assert "HTTP 503: down" in str(error) and "sk-secret-for-batch-test" not in str(error)
    assert error.retryable


def test_batch_prices():
    live = {"input": 2.0, "output": 8.0, "cached_input": 0.5}
    assert batch_price({**live, "batch_discount": 0.5}) == {"input": 1.0, "output": 4.0, "cached_input": 0.25}
    assert batch_price({**live, "batch_input": 1.0, "batch_output": 3.0}) == {
        "input": 1.0, "output": 3.0, "cached_input": 0.5}
    assert batch_price({**live, "batch_input": 0.2, "batch_output": 3.0})["cached_input"] == 0.2
    assert batch_price(live) == live and batch_price(None) is None
    assert has_batch_price({**live, "batch_discount": 1}) and not has_batch_price(live)
    usage = {"input_tokens": 1000, "output_tokens": 100}
    assert call_cost(usage, batch_price({"input": 2.0, "output": 8.0, "batch_discount": 0.5})) == \
        pytest.approx(call_cost(usage, {"input": 2.0, "output": 8.0}) / 2)
    assert check_price({"input": 1, "output": 2, "batch_discount": 0.5})["batch_discount"] == 0.5
    with pytest.raises(ValueError, match="'batch_input' needs 'batch_output'"):
        check_price({"input": 1, "output": 2, "batch_input": 0.5})
    with pytest.raises(ValueError, match="either 'batch_input'/'batch_output' or 'batch_discount'"):
        check_price({"input": 1, "output": 2, "batch_input": 0.5, "batch_output": 1, "batch_discount": 0.5})
    with pytest.raises(ValueError, match=r"price\['batch_discount'\] must be a factor in \(0, 1\]"):
        check_price({"input": 1, "output": 2, "batch_discount": 0})
    with pytest.raises(ValueError, match=r"Model 'm': price\['batch_discount'\]"):
        Model("m", price={"input": 1, "output": 2, "batch_discount": 1.5})
