"""Log-likelihoods over /v1/completions (echo + logprobs) against LocalModelServer, which
answers as vLLM does; expected numbers come from the server's known log-probability function."""

from __future__ import annotations

import asyncio

import pytest

from evalnb.errors import ProviderError
from evalnb.providers import Model, ModelClient
from evalnb.testing import LocalModelServer
from evalnb.testing._logprobs import tokenize


def known(before: str, token: str) -> float:
    """A log-probability anyone can recompute: shorter tokens and shorter contexts are likelier."""
    return -(len(token) + 0.01 * len(before))


def expected(context: str, continuation: str) -> float:
    """Sum of `known` over the tokens of context + continuation that end after the context."""
    full = context + continuation
    pieces = tokenize(full)
    total = 0.0
    for j, (token, offset) in enumerate(pieces):
        end = pieces[j + 1][1] if j + 1 < len(pieces) else len(full)
        if end > len(context) and offset > 0:
            total += known(full[:offset], token)
    return total


def loglikelihoods(server: LocalModelServer, pairs, api: str = "completions"):
    async def main():
        async with ModelClient(Model("m", base_url=server.base_url, api=api), backoff_base=0.01) as client:
            return await client.loglikelihoods(pairs)
    return asyncio.run(main())


def test_the_server_echoes_tokens_offsets_and_logprobs_as_vllm_does() -> None:
    with LocalModelServer(default=" Paris", token_logprobs=known) as server:
        import httpx

        reply = httpx.post(f"{server.base_url}/completions", json={
            "model": "m", "prompt": ["Capital: France?", "Q: x"], "echo": True, "logprobs": 1, "max_tokens": 1}).json()
    assert [c["index"] for c in reply["choices"]] == [0, 1]
    first = reply["choices"][0]
    assert first["text"] == "Capital: France? Paris"  # the prompt echoed, then one generated token
    lp = first["logprobs"]
    assert lp["tokens"] == ["Capital", ":", " France", "?", " Paris"]
    assert lp["text_offset"] == [0, 7, 8, 15, 16]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert lp["token_logprobs"][2] == known("Capital:", " France")
    assert lp["top_logprobs"][2] == {" France": known("Capital:", " France"), " the": -0.7}


def test_loglikelihoods_sum_the_continuation_tokens_in_one_call() -> None:
    context = "Question: Which is a colour?\nAnswer:"
    pairs = [(context, " red"), (context, " a large dog"), (context, "!")]
    with LocalModelServer(token_logprobs=known) as server:
        got = loglikelihoods(server, pairs)
        assert server.calls("/v1/completions") == 1
        body = server.requests[0].body
    assert body["prompt"] == [c + x for c, x in pairs] and body["echo"] is True and body["logprobs"] == 1
    assert body["max_tokens"] == 1  # the generated token is past the prompt and is not counted
    assert [g.logprob for g in got] == pytest.approx([expected(c, x) for c, x in pairs])
    assert got[0].logprob == pytest.approx(known(context, " red"))


def test_a_token_straddling_the_boundary_counts_for_the_continuation() -> None:
    with LocalModelServer(token_logprobs=known) as server:
        (got,) = loglikelihoods(server, [("Q: Ans", "wer")])
    assert got.logprob == pytest.approx(known("Q:", " Answer"))


def test_is_greedy_when_every_continuation_token_is_the_top_one() -> None:
    with LocalModelServer(token_logprobs={" A": -0.1, " B": -2.5, " C": -0.2, " D": -0.3}) as server:
        got = loglikelihoods(server, [("Answer:", " A"), ("Answer:", " B"), ("Answer:", " C D")])
    assert [g.is_greedy for g in got] == [True, False, True]
    assert got[2].logprob == pytest.approx(-0.5)


def test_a_server_that_cannot_echo_logprobs_is_a_clear_error_not_retried() -> None:
    with LocalModelServer(echo_logprobs=False) as server:
        with pytest.raises(ProviderError, match="cannot score by log-likelihood") as info:
            loglikelihoods(server, [("Answer:", " A")])
        assert server.calls("/v1/completions") == 1
    assert "llama-server" in str(info.value)


def test_loglikelihoods_need_the_completions_api() -> None:
    with LocalModelServer() as server:
        with pytest.raises(ProviderError, match="api='completions'"):
            loglikelihoods(server, [("a", " b")], api="chat")
        assert server.request_count == 0


def test_completions_api_generates_from_a_plain_prompt() -> None:
    async def main(server):
        async with ModelClient(Model("m", base_url=server.base_url, api="completions")) as client:
            return await client.complete("2 + 2 =", {"max_output_tokens": 5, "temperature": 0, "stop": ["\n"],
                                                     "instructions": "not sent"})
    with LocalModelServer({"2 + 2": " 4"}) as server:
        done = asyncio.run(main(server))
        body = server.requests[0].body
    assert done.text == " 4"
    assert server.requests[0].path == "/v1/completions"
    assert body == {"model": "m", "prompt": "2 + 2 =", "temperature": 0, "stop": ["\n"], "max_tokens": 5}


def test_check_loglikelihoods_passes_on_an_echoing_server_and_names_the_problem_otherwise() -> None:
    async def check(server):
        async with ModelClient(Model("m", base_url=server.base_url, api="completions")) as client:
            await client.check_loglikelihoods()

    with LocalModelServer() as server:
        asyncio.run(check(server))
        assert server.calls("/v1/completions") == 1
    with LocalModelServer(echo_logprobs=False) as server:
        with pytest.raises(ProviderError, match="did not echo"):
            asyncio.run(check(server))


def test_a_continuation_starting_with_a_multi_byte_character_counts_its_byte_tokens() -> None:
    """A byte-level tokenizer (the realserver's tiny-arith) splits "≈" into three byte tokens;
    vLLM echoes the first two as "" (zero characters, at the character's offset) and the last
    as "≈". All three are the continuation's, as lm-eval's token split counts them."""
    context, continuation = "A:", "≈ b"
    full = context + continuation
    tokens = ["A", ":", "", "", "≈", " ", "b", "!"]  # as vLLM's reply shows them ("!" is generated)
    offsets = [0, 1, 2, 2, 2, 3, 4, 5]
    lps = [None, -1.0, -2.0, -4.0, -8.0, -16.0, -32.0, -64.0]
    tops = [None] + [{t: lp, "e": -0.5} for t, lp in zip(tokens[1:], lps[1:])]

    def vllm_reply(body: dict) -> dict:
        assert body["prompt"] == [full]
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "text": full + "!", "finish_reason": "length",
                             "logprobs": {"tokens": tokens, "text_offset": offsets, "token_logprobs": lps,
                                          "top_logprobs": tops}}]}

    with LocalModelServer(vllm_reply) as server:
        (got,) = loglikelihoods(server, [(context, continuation)])
    assert got.logprob == -2.0 - 4.0 - 8.0 - 16.0 - 32.0 and got.is_greedy is False
