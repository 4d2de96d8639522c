"""LocalModelServer's Batch API, spoken to by the official `openai` SDK (its types are the oracle)."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
from openai.types import Batch, FileObject

from evalnb.testing import BatchFault, Fault, LocalModelServer


def line(cid, prompt, url="/v1/responses", model="m"):
    body = {"model": model, "input": prompt} if url == "/v1/responses" else {
        "model": model, "messages": [{"role": "user", "content": prompt}]}
    return {"custom_id": cid, "method": "POST", "url": url, "body": body}


def jsonl(lines):
    return "\n".join(json.dumps(x) for x in lines).encode()


def records(client, file_id):
    return [json.loads(x) for x in client.files.content(file_id).text.splitlines()]


def sdk(server):
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def test_sdk_round_trip_files_batches_and_output_shapes():
    with LocalModelServer({"France": "Paris"}) as s:
        c = sdk(s)
        f = c.files.create(file=("in.jsonl", jsonl([line("a", "capital of France?"), line("b", "other")])),
                           purpose="batch")
        assert isinstance(f, FileObject) and f.purpose == "batch" and f.bytes > 0
        raw_file = httpx.get(f"{s.base_url}/files/{f.id}").json()
        FileObject.model_validate(raw_file, strict=True)  # every field the SDK's type declares, typed
        b = c.batches.create(input_file_id=f.id, endpoint="/v1/responses", completion_window="24h",
                             metadata={"run": "r1"})
        assert b.status == "validating" and b.metadata == {"run": "r1"}
        done = c.batches.retrieve(b.id)
        assert done.status == "completed" and done.model == "m"
        assert done.request_counts.total == 2 and done.request_counts.completed == 2
        assert done.error_file_id is None and done.completed_at is not None
        Batch.model_validate(httpx.get(f"{s.base_url}/batches/{b.id}").json(), strict=True)
        out = {r["custom_id"]: r for r in records(c, done.output_file_id)}
        assert out["a"]["response"]["status_code"] == 200
        assert out["a"]["response"]["body"]["output_text"] == "Paris"
        assert out["b"]["response"]["body"]["output_text"] == "42"
        assert c.files.content(f.id).content == jsonl([line("a", "capital of France?"), line("b", "other")])
        assert s.uploads == 1 and s.batched_requests == 2
        assert s.calls("/v1/responses") == 0  # answered inside the batch, not as live calls
        listed = c.batches.list()
        assert [x.id for x in listed.data] == [b.id]


def test_batch_answers_equal_live_answers_with_usage_and_chat():
    usage = {"input_tokens": 10, "output_tokens": 3, "cached_input_tokens": 4}
    with LocalModelServer({"Peru": "Lima"}, usage=usage) as s:
        c = sdk(s)
        live = httpx.post(f"{s.base_url}/chat/completions",
                          json=line("x", "capital of Peru?", "/v1/chat/completions")["body"]).json()
        f = c.files.create(file=("in.jsonl", jsonl([line("x", "capital of Peru?", "/v1/chat/completions")])),
                           purpose="batch")
        b = c.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        body = records(c, c.batches.retrieve(b.id).output_file_id)[0]["response"]["body"]
    for key in ("choices", "usage", "model", "object"):
        assert body[key] == live[key]


def test_per_request_faults_go_to_the_error_file():
    with LocalModelServer(faults=[Fault(status=400, match="bad"), Fault(drop=True, match="drop")]) as s:
        c = sdk(s)
        f = c.files.create(file=("in.jsonl", jsonl([line("ok", "fine"), line("bad", "bad one"),
                                                    line("drop", "drop me")])), purpose="batch")
        b = c.batches.retrieve(c.batches.create(input_file_id=f.id, endpoint="/v1/responses",
                                                completion_window="24h").id)
        assert b.status == "completed"
        assert (b.request_counts.completed, b.request_counts.failed) == (1, 2)
        errors = {r["custom_id"]: r for r in records(c, b.error_file_id)}
    assert errors["bad"]["response"]["status_code"] == 400
    assert errors["bad"]["response"]["body"]["error"]["message"] == "injected fault: HTTP 400"
    assert errors["drop"]["response"]["status_code"] == 500


def test_delay_keeps_it_in_progress_then_cancel():
    with LocalModelServer(batch_delay=30) as s:
        c = sdk(s)
        f = c.files.create(file=("in.jsonl", jsonl([line(str(i), "q") for i in range(4)])), purpose="batch")
        b = c.batches.create(input_file_id=f.id, endpoint="/v1/responses", completion_window="24h")
        seen = c.batches.retrieve(b.id)
        assert seen.status == "in_progress" and seen.request_counts.total == 4
        assert c.batches.cancel(b.id).status == "cancelling"
        final = c.batches.retrieve(b.id)
        assert final.status == "cancelled" and final.cancelled_at is not None
        assert final.request_counts.completed == 0 and final.output_file_id is None
        with pytest.raises(openai.ConflictError, match="cannot cancel|Cannot cancel"):
            c.batches.cancel(b.id)


def test_short_delay_completes_later():
    with LocalModelServer(batch_delay=0.2) as s:
        c = sdk(s)
        f = c.files.create(file=("in.jsonl", jsonl([line("a", "q")])), purpose="batch")
        b = c.batches.create(input_file_id=f.id, endpoint="/v1/responses", completion_window="24h")
        assert c.batches.retrieve(b.id).status == "in_progress"
        time.sleep(0.25)
        assert c.batches.retrieve(b.id).status == "completed"


def test_whole_batch_failure_and_expiry_with_times():
    faults = [BatchFault(fail="Your organization's quota is spent", times=1), BatchFault(expire_after=1, times=1)]
    with LocalModelServer(batch_faults=faults) as s:
        c = sdk(s)
        f = c.files.create(file=("in.jsonl", jsonl([line("a", "q"), line("b", "q2")])), purpose="batch")
        failed = c.batches.retrieve(c.batches.create(input_file_id=f.id, endpoint="/v1/responses",
                                                     completion_window="24h").id)
        assert failed.status == "failed" and failed.failed_at is not None
        assert failed.errors.data[0].message == "Your organization's quota is spent"
        expired = c.batches.retrieve(c.batches.create(input_file_id=f.id, endpoint="/v1/responses",
                                                      completion_window="24h").id)
        assert expired.status == "expired" and expired.expired_at is not None
        assert (expired.request_counts.completed, expired.request_counts.failed) == (1, 1)
        err = records(c, expired.error_file_id)
        assert err[0]["custom_id"] == "b" and err[0]["error"]["code"] == "batch_expired"
        assert err[0]["response"] is None
        third = c.batches.retrieve(c.batches.create(input_file_id=f.id, endpoint="/v1/responses",
                                                    completion_window="24h").id)
        assert third.status == "completed" and third.request_counts.completed == 2


@pytest.mark.parametrize("lines, code", [
    ([line("a", "q"), line("a", "q")], "duplicate_custom_id"),
    ([line("a", "q", url="/v1/chat/completions")], "invalid_url"),
    ([line("a", "q"), line("b", "q", model="other")], "mismatched_model"),
    ([{"custom_id": "a", "method": "GET", "url": "/v1/responses", "body": {}}], "invalid_method"),
])
def test_bad_input_fails_validation_naming_the_line(lines, code):
    with LocalModelServer() as s:
        c = sdk(s)
        f = c.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
        b = c.batches.retrieve(c.batches.create(input_file_id=f.id, endpoint="/v1/responses",
                                                completion_window="24h").id)
    assert b.status == "failed"
    assert b.errors.data[0].code == code and b.errors.data[0].line is not None


def test_http_errors_for_bad_requests():
    with LocalModelServer() as s:
        c = sdk(s)
        with pytest.raises(openai.NotFoundError):
            c.batches.retrieve("batch_nope")
        with pytest.raises(openai.NotFoundError):
            c.files.retrieve("file-nope")
        with pytest.raises(openai.BadRequestError, match="input_file_id"):
            c.batches.create(input_file_id="file-nope", endpoint="/v1/responses", completion_window="24h")
        f = c.files.create(file=("in.jsonl", jsonl([line("a", "q")])), purpose="batch")
        with pytest.raises(openai.BadRequestError, match="endpoint"):
            c.batches.create(input_file_id=f.id, endpoint="/v1/nope", completion_window="24h")  # type: ignore[arg-type]
        bad = httpx.post(f"{s.base_url}/files", content=b"not a form", headers={"content-type": "text/plain"})
        assert bad.status_code == 400 and "multipart" in bad.json()["error"]["message"]
    with pytest.raises(ValueError, match="BatchFault"):
        BatchFault()
    with pytest.raises(ValueError, match="batch_delay"):
        LocalModelServer(batch_delay=-1)
