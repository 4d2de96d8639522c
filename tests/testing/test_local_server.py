"""LocalModelServer: a real HTTP server, checked over real sockets with httpx."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time

import httpx
import pytest

from evalnb.testing import Fault, LocalModelServer, RecordedRequest


def responses(server, prompt, **extra):
    return httpx.post(f"{server.base_url}/responses", json={"model": "m", "input": prompt, **extra})


def chat(server, messages, **extra):
    return httpx.post(f"{server.base_url}/chat/completions",
                      json={"model": "m", "messages": messages, **extra})


# ---- answers -------------------------------------------------------------------------------
def test_responses_reply_shape_and_dict_responder():
    with LocalModelServer({"France": "Paris", "Fra": "never: France matched first"}) as s:
        r = responses(s, "What is the capital of France?")
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "response" and body["status"] == "completed"
    assert body["id"].startswith("resp_") and body["model"] == "m"
    msg = body["output"][0]
    assert msg["type"] == "message" and msg["role"] == "assistant" and msg["status"] == "completed"
    assert msg["content"] == [{"type": "output_text", "text": "Paris", "annotations": []}]
    assert body["output_text"] == "Paris"
    assert body["usage"] == {"input_tokens": 6, "output_tokens": 1, "total_tokens": 7}


def test_default_answer_when_nothing_matches():
    with LocalModelServer({"France": "Paris"}) as s:
        assert responses(s, "capital of Peru?").json()["output_text"] == "42"
    with LocalModelServer({"France": "Paris"}, default="no idea") as s:
        assert responses(s, "capital of Peru?").json()["output_text"] == "no idea"


def test_chat_reply_shape_uses_last_user_message():
    with LocalModelServer({"Peru": "Lima", "France": "Paris"}) as s:
        r = chat(s, [{"role": "system", "content": "Peru is nice"},
                     {"role": "user", "content": "capital of Peru?"},
                     {"role": "assistant", "content": "Lima"},
                     {"role": "user", "content": [{"type": "text", "text": "and France?"}]}])
    body = r.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Paris"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}


def test_responses_input_list_uses_last_user_message():
    with LocalModelServer({"one": "1", "two": "2"}) as s:
        r = responses(s, [{"role": "user", "content": "one"},
                          {"role": "assistant", "content": "1"},
                          {"role": "user", "content": [{"type": "input_text", "text": "two"}]}])
    assert r.json()["output_text"] == "2"


def test_callable_responder_one_and_two_arguments():
    seen = []

    def one(body):
        seen.append(body["model"])
        return f"echo {body.get('input', 'chat')}"

    with LocalModelServer(one) as s:
        assert responses(s, "hi").json()["output_text"] == "echo hi"
    assert seen == ["m"]

    with LocalModelServer(lambda body, path: path) as s:
        assert responses(s, "x").json()["output_text"] == "/v1/responses"
        r = chat(s, [{"role": "user", "content": "x"}])
        assert r.json()["choices"][0]["message"]["content"] == "/v1/chat/completions"


def test_callable_responder_full_body_fault_and_none():
    def responder(body):
        prompt = body["input"]
        if prompt == "raw":
            return {"custom": True}
        if prompt == "fault":
            return Fault(status=503)
        if prompt == "dict-fault":
            return {"fault": {"status": 429, "retry_after": 2}}
        return None

    with LocalModelServer(responder, default="dflt") as s:
        assert responses(s, "raw").json() == {"custom": True}
        assert responses(s, "fault").status_code == 503
        r = responses(s, "dict-fault")
        assert r.status_code == 429 and r.headers["retry-after"] == "2"
        assert responses(s, "other").json()["output_text"] == "dflt"


def test_responder_exception_is_a_500_naming_it():
    def broken(body):
        raise KeyError("oops")

    with LocalModelServer(broken) as s:
        r = responses(s, "x")
    assert r.status_code == 500
    assert "responder raised KeyError" in r.json()["error"]["message"]


def test_bad_responder_type_rejected():
    with pytest.raises(TypeError):
        LocalModelServer(42)  # type: ignore[arg-type]


# ---- faults --------------------------------------------------------------------------------
def test_status_fault_with_retry_after_and_times():
    with LocalModelServer(faults=[Fault(status=429, retry_after=1, match="Q3", times=2)]) as s:
        first, second, third = (responses(s, "Q3?") for _ in range(3))
        other = responses(s, "Q4?")
    for r in (first, second):
        assert r.status_code == 429
        assert r.headers["retry-after"] == "1"
        assert r.json()["error"]["message"] == "injected fault: HTTP 429"
        assert r.json()["error"]["type"] == "rate_limit_error"
    assert third.status_code == 200 and other.status_code == 200


def test_every_nth_matching_request():
    with LocalModelServer(faults=[Fault(status=500, every=3)]) as s:
        codes = [responses(s, f"q{i}").status_code for i in range(7)]
    assert codes == [200, 200, 500, 200, 200, 500, 200]


def test_probability_is_seeded_and_edges_hold():
    def codes(seed):
        with LocalModelServer(faults=[Fault(status=500, probability=0.5, seed=seed)]) as s:
            return [responses(s, "q").status_code for _ in range(20)]

    a, b = codes(7), codes(7)
    assert a == b and 500 in a and 200 in a
    with LocalModelServer(faults=[Fault(status=500, probability=0.0)]) as s:
        assert {responses(s, "q").status_code for _ in range(5)} == {200}
    with LocalModelServer(faults=[Fault(status=500, probability=1.0)]) as s:
        assert {responses(s, "q").status_code for _ in range(5)} == {500}


def test_drop_closes_without_reply():
    with LocalModelServer(faults=[Fault(drop=True, times=1)]) as s:
        with pytest.raises(httpx.RemoteProtocolError):
            responses(s, "q")
        assert responses(s, "q").status_code == 200
        assert s.request_count == 2  # the dropped request was still recorded


def test_malformed_body_is_not_json():
    with LocalModelServer(faults=[Fault(malformed=True)]) as s:
        r = responses(s, "q")
    assert r.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.content)


def test_empty_output_for_both_apis():
    with LocalModelServer(faults=[Fault(empty=True)]) as s:
        body = responses(s, "q").json()
        assert body["output_text"] == "" and body["output"][0]["content"][0]["text"] == ""
        assert chat(s, [{"role": "user", "content": "q"}]).json()["choices"][0]["message"]["content"] == ""


def test_body_only_fault_and_extra_headers_and_path_filter():
    faults = [Fault(body={"hello": 1}, path="/v1/chat/completions",
                    headers={"x-test": "yes"})]
    with LocalModelServer(faults=faults) as s:
        r = chat(s, [{"role": "user", "content": "q"}])
        assert r.status_code == 200 and r.json() == {"hello": 1} and r.headers["x-test"] == "yes"
        assert responses(s, "q").json()["output_text"] == "42"  # other path untouched


def test_predicate_match_and_status_body_string():
    faults = [Fault(match=lambda body: body.get("temperature") == 1, status=400, body="plain words")]
    with LocalModelServer(faults=faults) as s:
        bad = responses(s, "q", temperature=1)
        good = responses(s, "q", temperature=0)
    assert bad.status_code == 400 and bad.text == "plain words"
    assert good.status_code == 200


def test_faults_callable():
    def faults(body, path):
        return Fault(status=418) if body and body.get("input") == "teapot" else None

    with LocalModelServer(faults=faults) as s:
        assert responses(s, "teapot").status_code == 418
        assert responses(s, "cup").status_code == 200


def test_first_matching_fault_wins():
    with LocalModelServer(faults=[Fault(status=503, match="a"), Fault(status=500)]) as s:
        assert responses(s, "a").status_code == 503
        assert responses(s, "b").status_code == 500


def test_latency_fixed_range_and_fault_latency():
    with LocalModelServer(latency=0.05) as s:
        t = time.perf_counter()
        responses(s, "q")
        assert time.perf_counter() - t >= 0.05
    with LocalModelServer(latency=(0.02, 0.04)) as s:
        t = time.perf_counter()
        responses(s, "q")
        assert time.perf_counter() - t >= 0.02
    with LocalModelServer({"slow": "done"}, faults=[Fault(latency=0.1, match="slow")]) as s:
        t = time.perf_counter()
        assert responses(s, "slow").json()["output_text"] == "done"  # delayed, then answered
        assert time.perf_counter() - t >= 0.1
        with httpx.Client() as client:  # made before the clock starts: loading CA certificates
            # for a new client took ~0.05-0.1 s on a loaded machine and flaked the bound below
            client.get(f"{s.base_url}/models")
            t = time.perf_counter()
            client.post(f"{s.base_url}/responses", json={"model": "m", "input": "fast"})
            assert time.perf_counter() - t < 0.1


@pytest.mark.parametrize("kwargs", [
    {"times": -1}, {"every": 0}, {"probability": 1.5}, {"probability": -0.1},
    {"status": 99}, {"status": 600}, {"latency": -1}, {"latency": (0.2, 0.1)}, {"latency": "x"},
])
def test_fault_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        Fault(**kwargs)


def test_server_rejects_bad_latency_and_non_fault_items():
    with pytest.raises(ValueError):
        LocalModelServer(latency=(1, 0))
    with pytest.raises(TypeError):
        LocalModelServer(faults=[{"status": 500}])  # type: ignore[list-item]


def test_fault_repr_shows_only_set_fields():
    assert repr(Fault(status=429, times=2)) == "Fault(times=2, status=429)"


# ---- recording -----------------------------------------------------------------------------
def test_requests_are_recorded_with_headers_and_reset_restarts_faults():
    with LocalModelServer(faults=[Fault(status=500, times=1)]) as s:
        assert responses(s, "q").status_code == 500
        httpx.post(f"{s.base_url}/responses", json={"model": "m", "input": "hi"},
                   headers={"Authorization": "Bearer sk-test"})
        assert s.request_count == 2
        path, body, headers = s.requests[1]
        assert isinstance(s.requests[1], RecordedRequest)
        assert path == "/v1/responses" and body == {"model": "m", "input": "hi"}
        assert headers["authorization"] == "Bearer sk-test"
        s.reset()
        assert s.requests == [] and s.request_count == 0 and s.max_in_flight == 0
        assert responses(s, "q").status_code == 500  # fault counters restarted


def test_max_in_flight_counts_concurrent_requests():
    async def main(url):
        async with httpx.AsyncClient() as client:
            await asyncio.gather(*(client.post(url, json={"model": "m", "input": str(i)})
                                   for i in range(10)))

    with LocalModelServer(latency=0.2) as s:
        asyncio.run(main(f"{s.base_url}/responses"))
        assert s.max_in_flight == 10
        assert s.in_flight == 0


def test_max_concurrency_queues_calls_like_a_deployment_with_few_slots():
    async def main(url):
        async with httpx.AsyncClient() as client:
            start = time.perf_counter()
            replies = await asyncio.gather(*(client.post(url, json={"model": "m", "input": str(i)})
                                             for i in range(10)))
            return time.perf_counter() - start, replies

    with LocalModelServer(latency=0.1, max_concurrency=2) as s:
        elapsed, replies = asyncio.run(main(f"{s.base_url}/responses"))
        assert all(r.status_code == 200 for r in replies)
        assert s.max_in_flight == 10  # all ten arrived together...
        assert s.max_busy == 2  # ...but only two were worked on at once
        assert elapsed >= 0.45  # five rounds of 0.1 s, not one
    with LocalModelServer(latency=0.1) as s:  # no cap: every call is worked on at once
        asyncio.run(main(f"{s.base_url}/responses"))
        assert s.max_busy == 10
    with pytest.raises(ValueError, match="max_concurrency"):
        LocalModelServer(max_concurrency=0)


# ---- lifecycle -----------------------------------------------------------------------------
def test_works_inside_a_running_event_loop():
    async def main():
        with LocalModelServer({"x": "sync-with"}) as s:  # plain `with` inside a coroutine
            async with httpx.AsyncClient() as c:
                r = await c.post(f"{s.base_url}/responses", json={"model": "m", "input": "x"})
                assert r.json()["output_text"] == "sync-with"
        async with LocalModelServer({"x": "async-with"}) as s:
            async with httpx.AsyncClient() as c:
                r = await c.post(f"{s.base_url}/responses", json={"model": "m", "input": "x"})
                assert r.json()["output_text"] == "async-with"
        return True

    assert asyncio.run(main())


def test_start_stop_restart_and_base_url():
    s = LocalModelServer()
    with pytest.raises(RuntimeError):
        s.base_url
    assert "stopped" in repr(s)
    s.start()
    assert s.start() is s  # idempotent
    assert s.base_url.startswith("http://127.0.0.1:") and s.base_url.endswith("/v1")
    port = s.port
    assert responses(s, "q").status_code == 200
    s.stop()
    s.stop()  # idempotent
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"http://127.0.0.1:{port}/v1/responses", json={"model": "m", "input": "q"})
    s.start()
    try:
        assert responses(s, "q").status_code == 200
    finally:
        s.stop()


def test_stop_with_request_in_progress_and_idle_keepalive_connection():
    s = LocalModelServer(latency=5).start()
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
    time.sleep(0.05)
    t = time.perf_counter()
    s.stop()
    assert time.perf_counter() - t < 2
    assert sock.recv(100) == b""  # closed, no reply
    sock.close()


# ---- other endpoints and HTTP edges -------------------------------------------------------
def test_embeddings_hash_default_dimensions_and_list_shape():
    with LocalModelServer() as s:
        r = httpx.post(f"{s.base_url}/embeddings", json={"model": "e", "input": ["a b", "c"]})
        again = httpx.post(f"{s.base_url}/embeddings", json={"model": "e", "input": "a b"})
        small = httpx.post(f"{s.base_url}/embeddings", json={"model": "e", "input": "a", "dimensions": 4})
    body = r.json()
    assert body["object"] == "list" and body["model"] == "e"
    assert [d["index"] for d in body["data"]] == [0, 1]
    assert all(d["object"] == "embedding" and len(d["embedding"]) == 32 for d in body["data"])
    assert body["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    vec = body["data"][0]["embedding"]
    assert math.isclose(sum(x * x for x in vec), 1.0, rel_tol=1e-9)
    assert again.json()["data"][0]["embedding"] == vec  # deterministic
    assert body["data"][1]["embedding"] != vec
    assert len(small.json()["data"][0]["embedding"]) == 4


def test_embeddings_custom_embedder_and_empty_fault():
    def embedder(texts):
        return [[float(len(t)), 1.0] for t in texts]

    with LocalModelServer(embedder=embedder, faults=[Fault(empty=True, match="empty")]) as s:
        r = httpx.post(f"{s.base_url}/embeddings", json={"model": "e", "input": ["abc", "de"]})
        e = httpx.post(f"{s.base_url}/embeddings", json={"model": "e", "input": "empty"})
    assert [d["embedding"] for d in r.json()["data"]] == [[3.0, 1.0], [2.0, 1.0]]
    assert e.json()["data"] == []


def test_models_endpoint():
    with LocalModelServer(model="my-model") as s:
        r = httpx.get(f"{s.base_url}/models")
    assert r.json()["data"][0]["id"] == "my-model"


def test_completions_endpoint():
    with LocalModelServer({"Question: 1+1": "2"}) as s:
        r = httpx.post(f"{s.base_url}/completions", json={"model": "m", "prompt": "Question: 1+1\nAnswer:"})
    assert r.json()["choices"][0]["text"] == "2" and r.json()["object"] == "text_completion"


def test_chat_stream_is_server_sent_events():
    with LocalModelServer({"hi": "hello"}) as s:
        r = chat(s, [{"role": "user", "content": "hi"}], stream=True)
    assert r.headers["content-type"] == "text/event-stream"
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "hello"


def test_http_errors_unknown_path_method_and_bad_json():
    with LocalModelServer() as s:
        assert httpx.post(f"{s.base_url}/nope", json={}).status_code == 404
        assert httpx.get(f"{s.base_url}/responses").status_code == 405
        bad = httpx.post(f"{s.base_url}/responses", content=b"{not json",
                         headers={"content-type": "application/json"})
        not_object = httpx.post(f"{s.base_url}/responses", json=[1, 2])
        assert s.requests[-2].body is None  # recorded even though unreadable
    assert bad.status_code == 400 and "JSON object" in bad.json()["error"]["message"]
    assert not_object.status_code == 400


def _raw_exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(payload)
        sock.settimeout(2)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk


def test_keep_alive_chunked_body_and_connection_close():
    body = json.dumps({"model": "m", "input": "France"}).encode()
    req = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    chunked = (b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               b"Connection: close\r\n\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    with LocalModelServer({"France": "Paris"}) as s:
        data = _raw_exchange(s.port, req + req + chunked)  # three requests, one connection
        assert s.request_count == 3
    assert data.count(b"HTTP/1.1 200 OK") == 3
    assert data.count(b'"output_text":"Paris"') == 3
    assert b"Connection: close" in data  # the last reply says so, then the server closes


def test_malformed_request_line_and_oversized_length():
    with LocalModelServer() as s:
        assert _raw_exchange(s.port, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400")
        big = b"POST /v1/responses HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n"
        assert _raw_exchange(s.port, big).startswith(b"HTTP/1.1 413")


def test_broken_embedder_is_a_500_not_a_hang():
    def embedder(texts):
        raise RuntimeError("model not loaded")

    with LocalModelServer(embedder=embedder) as s:
        r = httpx.post(f"{s.base_url}/embeddings", json={"model": "e", "input": "x"}, timeout=5)
    assert r.status_code == 500 and "model not loaded" in r.json()["error"]["message"]


def test_record_false_counts_without_keeping_requests():
    with LocalModelServer(record=False) as s:
        for _ in range(3):
            responses(s, "q")
        assert s.request_count == 3 and s.requests == []


def test_connections_counts_accepted_connections_and_resets():
    with LocalModelServer() as s:
        with httpx.Client() as client:  # keep-alive: one connection for three requests
            for _ in range(3):
                client.post(f"{s.base_url}/responses", json={"model": "m", "input": "q"})
        responses(s, "q")  # a client of its own: a second connection
        assert (s.request_count, s.connections) == (4, 2)
        s.reset()
        assert s.connections == 0
