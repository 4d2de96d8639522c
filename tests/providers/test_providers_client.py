"""ModelClient over real HTTP against LocalModelServer: shapes, retries, limits, secrets."""

from __future__ import annotations

import asyncio
import gc
import random
import time
import warnings

import pytest

from evalnb.errors import ProviderError
from evalnb.providers import AdaptiveLimit, ClientPool, Completion, Model, ModelClient
from evalnb.testing import Fault, LocalModelServer

KEY = "sk-test-key-1234567890"


def run(coro):
    return asyncio.run(coro)


def make_client(server, *, api="responses", key=KEY, events=None, **kwargs):
    model = Model("cand", base_url=server.base_url, api=api, api_key=key)
    hook = (lambda kind, info: events.append((kind, info))) if events is not None else None
    kwargs.setdefault("backoff_base", 0.01)
    kwargs.setdefault("backoff_cap", 0.05)
    return ModelClient(model, on_event=hook, rng=random.Random(0), **kwargs)


def complete(server, prompt="Q?", gen=None, **kwargs):
    async def main():
        async with make_client(server, **kwargs) as client:
            return await client.complete(prompt, gen)
    return run(main())


def fails(server, prompt="Q?", gen=None, **kwargs) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        complete(server, prompt, gen, **kwargs)
    return info.value


# ---- happy paths ---------------------------------------------------------------------------
def test_responses_call_shape_usage_id_and_auth():
    with LocalModelServer({"France": "Paris"}) as s:
        c = complete(s, "capital of France?", {"temperature": 0, "top_k": 5, "max_output_tokens": 8,
                                               "timeout_seconds": 30, "max_retries": 1})
        path, body, headers = s.requests[0]
    assert isinstance(c, Completion)
    assert c.text == "Paris" and c.response_id.startswith("resp_")
    assert c.usage == {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}
    assert c.attempts == 1 and c.retries == 0 and c.empty_retries == 0 and c.latency_s > 0
    assert path == "/v1/responses"
    assert body == {"model": "cand", "input": "capital of France?", "temperature": 0,
                    "max_output_tokens": 8, "top_k": 5}  # pass-through: not OpenAI
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"


def test_chat_call_shape_and_usage():
    with LocalModelServer({"France": "Paris"}) as s:
        c = complete(s, "France?", {"instructions": "Be brief.", "max_output_tokens": 4, "stop": ["\n"]},
                     api="chat")
        path, body, _ = s.requests[0]
    assert c.text == "Paris" and c.response_id.startswith("chatcmpl-")
    assert c.usage == {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    assert path == "/v1/chat/completions"
    assert body == {"model": "cand", "messages": [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": "France?"}],
                    "stop": ["\n"], "max_tokens": 4}


def test_no_key_means_no_authorization_header_for_local_servers(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-travel-123")
    with LocalModelServer() as s:
        complete(s, key=None)
        assert "authorization" not in s.requests[0].headers


def test_openai_model_without_key_fails_before_any_request(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    async def main():
        async with ModelClient(Model("gpt-4.1-mini")) as client:
            await client.complete("hi")

    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as info:
        run(main())
    assert info.value.retryable is False and info.value.status is None


# ---- rate limits ---------------------------------------------------------------------------
def test_429_retry_after_is_honoured():
    events: list = []
    with LocalModelServer(faults=[Fault(status=429, retry_after=0.3, times=1)]) as s:
        t = time.perf_counter()
        c = complete(s, events=events)
        waited = time.perf_counter() - t
        assert s.request_count == 2
    assert waited >= 0.3
    assert c.text == "42" and c.attempts == 2 and c.retries == 1
    assert c.rate_limit_wait_s == pytest.approx(0.3)
    assert [k for k, _ in events] == ["rate_limited"]
    assert events[0][1]["delay_s"] == pytest.approx(0.3) and events[0][1]["status"] == 429
    assert events[0][1]["model"] == "cand"


def test_429_without_retry_after_uses_backoff():
    events: list = []
    with LocalModelServer(faults=[Fault(status=429, times=2)]) as s:
        c = complete(s, events=events)
    assert c.retries == 2 and c.attempts == 3
    assert all(0 <= info["delay_s"] <= 0.05 for _, info in events)
    assert c.rate_limit_wait_s == pytest.approx(sum(info["delay_s"] for _, info in events))


def test_429_until_retries_are_spent():
    body = {"error": {"message": "Rate limit reached for requests", "type": "rate_limit_error"}}
    with LocalModelServer(faults=[Fault(status=429, body=body)]) as s:
        err = fails(s, gen={"max_retries": 2})
        assert s.request_count == 3
    assert err.status == 429 and err.retryable is True
    assert "HTTP 429" in str(err) and "Rate limit reached for requests" in str(err)
    assert "3 attempts" in str(err) and str(err).startswith("cand:")


def test_rate_limits_shrink_the_shared_limit_and_are_counted():
    async def main(server):
        limit = AdaptiveLimit(4)
        async with make_client(server, limit=limit) as client:
            await asyncio.gather(client.complete("fast"),
                                 *(client.complete(f"slow {i}") for i in range(3)))
        return limit

    faults = [Fault(status=429, retry_after=0.05, match="fast", times=1),
              Fault(latency=0.3, match="slow")]
    with LocalModelServer(faults=faults) as s:
        limit = run(main(s))
        order = [r.body["input"] for r in s.requests]
    # the 429 cut the limit 4 -> 2; with 3 slow calls still in flight the retry had to wait
    # for them, whose 3 successes then raised it 2 -> 3 (2 successes at limit 2)
    assert order[-1] == "fast" and order.count("fast") == 2
    assert limit.rate_limited == 1 and limit.decreases == 1 and limit.increases == 1
    assert limit.limit == 3
    assert limit.rate_limit_waits == 1 and limit.rate_limit_wait_s == pytest.approx(0.05)
    assert limit.in_flight == 0


def test_limit_bounds_requests_in_flight():
    async def main(server):
        async with make_client(server, limit=AdaptiveLimit(3)) as client:
            return await asyncio.gather(*(client.complete(f"q{i}") for i in range(12)))

    with LocalModelServer(latency=0.15) as s:
        results = run(main(s))
        assert s.max_in_flight == 3 and s.request_count == 12
    assert len(results) == 12


# ---- other retryable failures --------------------------------------------------------------
@pytest.mark.parametrize("status", [408, 409, 500, 502, 503])
def test_retryable_statuses_are_retried(status):
    events: list = []
    with LocalModelServer(faults=[Fault(status=status, times=2)]) as s:
        c = complete(s, events=events, gen={"max_retries": 2})
        assert s.request_count == 3
    assert c.text == "42" and c.retries == 2 and c.rate_limit_wait_s == 0
    assert [k for k, _ in events] == ["retry", "retry"]
    assert events[0][1]["status"] == status


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_fail_after_retries_with_status_and_message(status):
    body = {"error": {"message": f"upstream exploded ({status})"}}
    with LocalModelServer(faults=[Fault(status=status, body=body)]) as s:
        err = fails(s, gen={"max_retries": 1})
        assert s.request_count == 2
    assert err.status == status and err.retryable
    assert f"HTTP {status}" in str(err) and f"upstream exploded ({status})" in str(err)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_are_not_retried(status):
    body = {"error": {"message": "bad parameter: temperature"}}
    with LocalModelServer(faults=[Fault(status=status, body=body)]) as s:
        err = fails(s, gen={"max_retries": 5})
        assert s.request_count == 1
    assert err.status == status and err.retryable is False
    assert "bad parameter: temperature" in str(err) and "attempts" not in str(err)


def test_zero_retries_means_one_attempt():
    with LocalModelServer(faults=[Fault(status=503, times=1)]) as s:
        err = fails(s, gen={"max_retries": 0})
        assert s.request_count == 1
    assert err.status == 503


def test_timeout_is_retried_then_reported():
    slow = Fault(latency=3.0, times=1)
    with LocalModelServer(faults=[slow]) as s:
        t = time.perf_counter()
        c = complete(s, gen={"timeout_seconds": 0.5})
        assert time.perf_counter() - t < 2.5
        assert c.retries == 1 and c.text == "42"
    with LocalModelServer(latency=1.0) as s:
        err = fails(s, gen={"timeout_seconds": 0.1, "max_retries": 1})
        assert s.request_count == 2
    assert err.status is None and err.retryable and "timed out after 0.1s" in str(err)


def test_dropped_connection_is_retried_then_reported():
    with LocalModelServer(faults=[Fault(drop=True, times=1)]) as s:
        c = complete(s)
        assert c.retries == 1 and s.request_count == 2
    with LocalModelServer(faults=[Fault(drop=True)]) as s:
        err = fails(s, gen={"max_retries": 2})
        assert s.request_count == 3
    assert err.status is None and err.retryable and "connection error" in str(err)


def test_malformed_json_is_retried_then_reported():
    with LocalModelServer(faults=[Fault(malformed=True, times=1)]) as s:
        assert complete(s).retries == 1
    with LocalModelServer(faults=[Fault(malformed=True)]) as s:
        err = fails(s, gen={"max_retries": 1}, api="chat")
        assert s.request_count == 2
    assert err.status == 200 and err.retryable and "not valid JSON" in str(err)


def test_wrong_reply_shape_is_retried():
    with LocalModelServer(faults=[Fault(body={"unexpected": True}, times=1)]) as s:
        c = complete(s, api="chat")
        assert c.retries == 1 and c.text == "42"


def test_connection_refused_is_a_retryable_provider_error():
    s = LocalModelServer().start()
    url = s.base_url
    s.stop()

    async def main():
        async with ModelClient(Model("m", base_url=url), backoff_base=0.01) as client:
            await client.complete("q", {"max_retries": 1})

    with pytest.raises(ProviderError, match="connection error") as info:
        run(main())
    assert info.value.retryable


# ---- empty outputs -------------------------------------------------------------------------
def test_empty_output_without_empty_retries_is_returned():
    with LocalModelServer(faults=[Fault(empty=True)]) as s:
        c = complete(s, gen={"max_empty_retries": 0})
        assert s.request_count == 1
    assert c.text == "" and c.empty_retries == 0


def test_empty_output_retried_once():
    events: list = []
    with LocalModelServer(faults=[Fault(empty=True, times=1)]) as s:
        c = complete(s, gen={"max_empty_retries": 1}, events=events)
        assert s.request_count == 2
    assert c.text == "42" and c.empty_retries == 1 and c.attempts == 2 and c.retries == 0
    assert [k for k, _ in events] == ["empty_retry"]


def test_still_empty_after_empty_retries_is_returned_empty():
    with LocalModelServer(faults=[Fault(empty=True)]) as s:
        c = complete(s, gen={"max_empty_retries": 1}, api="chat")
        assert s.request_count == 2
    assert c.text == "" and c.empty_retries == 1


def test_whitespace_only_output_counts_as_empty():
    with LocalModelServer(lambda body: "  \n " if body["input"] == "ws" else "x") as s:
        c = complete(s, "ws", gen={"max_empty_retries": 2})
        assert s.request_count == 3
    assert c.empty_retries == 2


# ---- secrets -------------------------------------------------------------------------------
def test_key_echoed_by_server_never_reaches_error_or_events():
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}. Header was 'Bearer {KEY}'."}}
    events: list = []
    with LocalModelServer(faults=[Fault(status=500, body=echo, times=1),
                                  Fault(status=401, body=echo)]) as s:
        err = fails(s, events=events)
        assert s.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    text = " ".join([str(err), repr(err), *map(str, err.args), str(events)])
    assert KEY not in text
    assert "Incorrect API key provided" in str(err) and "[redacted]" in str(err)
    assert err.status == 401


def test_custom_header_secret_is_redacted_too():
    model = Model("m", base_url="http://127.0.0.1:1/v1", headers={"X-Api-Key": "hdr-secret-987"})
    with LocalModelServer(faults=[Fault(status=403, body={"error": {"message": "key hdr-secret-987 denied"}})]) as s:
        async def main():
            m = Model("m", base_url=s.base_url, headers=model.headers)
            async with ModelClient(m) as client:
                await client.complete("q")
        with pytest.raises(ProviderError) as info:
            run(main())
        assert s.requests[0].headers["x-api-key"] == "hdr-secret-987"
    assert "hdr-secret-987" not in str(info.value)


# ---- embeddings and the grader bridge ------------------------------------------------------
def test_embeddings_call_and_retry():
    async def main(server):
        async with make_client(server) as client:
            return await client.embeddings(["a", "b"], dimensions=4)

    with LocalModelServer(faults=[Fault(status=500, times=1, path="/v1/embeddings")]) as s:
        out = run(main(s))
        path, body, _ = s.requests[-1]
    assert path == "/v1/embeddings" and body == {"dimensions": 4, "input": ["a", "b"], "model": "cand"}
    assert [len(d["embedding"]) for d in out["data"]] == [4, 4]


def test_responses_raw_overrides_model_and_sets_output_text():
    reply = {"id": "resp_x", "object": "response", "status": "completed",
             "output": [{"type": "message", "content": [{"type": "output_text", "text": "graded"}]}]}

    async def main(server):
        async with make_client(server) as client:
            return await client.responses_raw({"model": "auto", "input": "judge this", "stream": True,
                                               "temperature": 0})

    with LocalModelServer(lambda body: reply) as s:
        out = run(main(s))
        sent = s.requests[0].body
    assert sent == {"model": "cand", "input": "judge this", "temperature": 0}
    assert out["output_text"] == "graded" and out["id"] == "resp_x"


def test_responses_raw_on_a_chat_model_is_translated():
    async def main(server):
        async with make_client(server, api="chat") as client:
            return await client.responses_raw({"model": "auto", "instructions": "Judge.",
                                               "input": "Is 2+2=4?", "max_output_tokens": 3})

    with LocalModelServer({"2+2": "yes"}) as s:
        out = run(main(s))
        path, body, _ = s.requests[0]
    assert path == "/v1/chat/completions" and body["max_tokens"] == 3
    assert body["messages"][0] == {"role": "system", "content": "Judge."}
    assert out["output_text"] == "yes" and out["object"] == "response"


# ---- pooling -------------------------------------------------------------------------------
def test_shared_pool_reuses_one_http_client_per_server():
    async def main(server):
        async with ClientPool(max_connections=4) as pool:
            a = ModelClient(Model("a", base_url=server.base_url), pool=pool)
            b = ModelClient(Model("b", base_url=server.base_url, api="chat"), pool=pool)
            await asyncio.gather(*(c.complete("q") for c in (a, b) for _ in range(3)))
            same = pool.client(a.model.base_url) is pool.client(b.model.base_url)
            await a.aclose()  # does not own the pool: must not close it
            await b.complete("still open")
            return same

    with LocalModelServer() as s:
        assert run(main(s)) is True
        assert s.request_count == 7


def test_direct_http_calls_keep_their_connection_and_the_httpx_client_is_httpx_s_own():
    import httpx

    async def main(server):
        async with ClientPool(max_connections=4) as pool:
            client = ModelClient(Model("m", base_url=server.base_url, api="chat"), pool=pool)
            await client.complete("raw path")
            await client.complete("again")
            connections = pool.raw_route(server.base_url)[0]
            assert sum(len(c) for c in connections._idle.values()) == 1  # kept alive after the calls
            http = pool.client(server.base_url)  # httpx's client, made on first use
            assert type(http._transport) is httpx.AsyncHTTPTransport  # httpx's own, not ours
            reply = await http.post(server.base_url + "/chat/completions",
                                    json={"model": "m", "messages": [{"role": "user", "content": "x"}]})
            assert reply.status_code == 200

    with LocalModelServer() as s:
        run(main(s))
        assert s.request_count == 3
        assert s.connections == 2  # one for both lean calls, one for httpx's


def test_a_run_against_a_plain_http_server_never_imports_httpx(tmp_path):
    # httpx (~35 ms to import) is only needed for https:// or when a request fails
    import json
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from evalnb.providers import Model, ModelClient\n"
        "from evalnb.testing import LocalModelServer, Fault\n"
        "import asyncio\n"
        "async def main(url):\n"
        "    c = ModelClient(Model('m', base_url=url, api='chat'))\n"
        "    out = [(await c.complete(p)).text for p in ('a', 'b')]\n"
        "    before = 'httpx' in sys.modules\n"
        "    await c.aclose()\n"
        "    return out, before\n"
        "with LocalModelServer() as s:\n"
        "    out, before = asyncio.run(main(s.base_url))\n"
        "print(out, before)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "EVALNB_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['42', '42'] False"


def test_a_connection_error_on_the_raw_path_is_httpx_s_and_is_retried():
    # the raw path raises httpx's exception types (loaded on the error), so the retry policy
    # sees the same errors on both paths
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket closes
    events = []
    client = ModelClient(Model("m", base_url=f"http://127.0.0.1:{port}/v1", api="chat"),
                         backoff_base=0.001, backoff_cap=0.002, on_event=lambda k, i: events.append((k, i)))
    with pytest.raises(ProviderError) as caught:
        run(client.complete("q", {"max_retries": 2}))
    assert "connection error (ConnectError)" in str(caught.value)
    assert caught.value.retryable is True
    assert [k for k, _ in events] == ["retry", "retry"]


def test_pool_survives_a_new_event_loop():
    pool = ClientPool(max_connections=2)
    with warnings.catch_warnings():
        # the first loop's idle sockets cannot be closed from the second: they are reclaimed
        # (with a ResourceWarning) by the garbage collector
        warnings.simplefilter("ignore", ResourceWarning)
        with LocalModelServer() as s:
            client = ModelClient(Model("m", base_url=s.base_url), pool=pool)
            assert run(client.complete("one")).text == "42"
            assert run(client.complete("two")).text == "42"  # second asyncio.run, fresh loop
            run(pool.aclose())
            assert s.request_count == 2
        gc.collect()


def test_cancelled_call_frees_its_limit_slot():
    async def main(server):
        limit = AdaptiveLimit(1)
        async with make_client(server, limit=limit) as client:
            task = asyncio.ensure_future(client.complete("slow"))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert limit.in_flight == 0
            return await client.complete("fast")

    with LocalModelServer(faults=[Fault(latency=2, match="slow")]) as s:
        assert run(main(s)).text == "42"


def test_client_rejects_non_model():
    with pytest.raises(TypeError):
        ModelClient("gpt-4")  # type: ignore[arg-type]


# ---- the pre-encoded request body ------------------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from evalnb.providers.build import build_chat_request, build_responses_request, canonical  # noqa: E402
from evalnb.providers.client import _body_encoder, _dumps  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(prompt=st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
       instructions=st.one_of(st.none(), st.text(max_size=20)))
def test_body_encoder_is_byte_for_byte_the_full_encoding(prompt, instructions):
    gen = canonical({"temperature": 0.5, "stop": ["\n", '"'], "instructions": instructions, "top_k": 3})
    for build in (build_chat_request, build_responses_request):
        encode = _body_encoder(lambda p, build=build: build("m", p, gen, is_openai=False))
        assert encode(prompt) == _dumps(build("m", prompt, gen, is_openai=False))


def test_body_encoder_takes_non_string_input_whole():
    items = [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    encode = _body_encoder(lambda p: build_responses_request("m", p, {}, is_openai=False))
    assert encode(items) == _dumps({"model": "m", "input": items})


def test_a_generation_dict_changed_in_place_is_sent_as_changed():
    async def main(server):
        async with make_client(server, api="chat") as client:
            gen = {"temperature": 0.0, "max_output_tokens": 4}
            await client.complete("one?", gen)
            gen["temperature"] = 1.0  # the same dict object, new contents
            gen["max_output_tokens"] = 9
            await client.complete("two?", gen)
            await client.complete("three?", {"temperature": 0.3})

    with LocalModelServer({"?": "ok"}) as s:
        run(main(s))
        bodies = [body for _, body, _ in s.requests]
    assert [b["temperature"] for b in bodies] == [0.0, 1.0, 0.3]
    assert [b.get("max_tokens") for b in bodies] == [4, 9, None]
    assert [b["messages"][-1]["content"] for b in bodies] == ["one?", "two?", "three?"]
