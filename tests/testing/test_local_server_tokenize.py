"""LocalModelServer's vLLM tokenizer endpoints and token-id prompts on /v1/completions.

Shapes as vLLM serves them (`/tokenize` -> count, max_model_len, tokens, token_strs;
`/detokenize` -> prompt; `/tokenizer_info` -> the tokenizer's settings); a prompt given as the
token ids `/tokenize` returned scores exactly as the same text does.
"""

from __future__ import annotations

import httpx
import pytest

from evalnb.testing import LocalModelServer


def known(before: str, token: str) -> float:
    return -(len(token) + 0.01 * len(before))


def completion(server: LocalModelServer, prompt, **extra) -> httpx.Response:
    body = {"model": server.model, "prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 1, **extra}
    return httpx.post(f"{server.base_url}/completions", json=body)


def test_tokenize_detokenize_and_tokenizer_info_answer_as_vllm() -> None:
    text = "Question: Is 2+2 four?\nAnswer:<|endoftext|> yes"
    with LocalModelServer() as server:
        got = httpx.post(f"{server.url}/tokenize", json={"model": server.model, "prompt": text,
                                                         "add_special_tokens": False, "return_token_strs": True}).json()
        plain = httpx.post(f"{server.url}/tokenize", json={"prompt": "Answer: yes"}).json()
        back = httpx.post(f"{server.url}/detokenize", json={"model": server.model, "tokens": got["tokens"]}).json()
        info = httpx.get(f"{server.url}/tokenizer_info").json()
        unknown = httpx.post(f"{server.url}/detokenize", json={"tokens": [len(server.vocab) + 5]})
        wrong_method = httpx.get(f"{server.url}/tokenize")
        no_prompt = httpx.post(f"{server.url}/tokenize", json={"messages": []})
        assert server.calls("/tokenize") == 4
    assert set(got) == {"count", "max_model_len", "tokens", "token_strs"}
    assert got["token_strs"] == ["Question", ":", " Is", " 2", "+", "2", " four", "?", "\nAnswer", ":",
                                 "<|endoftext|>", " yes"]  # the special token is never split
    assert got["count"] == len(got["tokens"]) == 12 and got["max_model_len"] > 0
    assert got["tokens"][10] == 0 and got["tokens"][1] == got["tokens"][9]  # one id per token string
    assert plain["token_strs"] is None and plain["tokens"][1:] == [got["tokens"][9], got["tokens"][11]]
    assert plain["tokens"][0] not in got["tokens"]  # "Answer" is a new token ("\nAnswer" was seen)
    assert back == {"prompt": text}
    assert info["eos_token"] == info["bos_token"] == "<|endoftext|>" and info["add_bos_token"] is False
    assert "tokenizer_class" in info and "pad_token" in info
    assert unknown.status_code == 400 and "out of vocabulary" in unknown.json()["error"]["message"]
    assert wrong_method.status_code == 405 and no_prompt.status_code == 400


def test_token_id_prompts_score_exactly_as_their_text() -> None:
    texts = ["Capital: France? Paris", "Q: x"]
    with LocalModelServer(default=" Lyon is", token_logprobs=known) as server:
        ids = [httpx.post(f"{server.url}/tokenize", json={"prompt": t}).json()["tokens"] for t in texts]
        by_text = completion(server, texts, max_tokens=2).json()
        by_ids = completion(server, ids, max_tokens=2).json()
        one = completion(server, ids[0]).json()  # a single prompt as one list of ints
        plain = httpx.post(f"{server.base_url}/completions", json={"model": "m", "prompt": ids[1]}).json()
        bad = completion(server, [ids[0], [10 ** 6]])
    assert by_ids["choices"] == by_text["choices"]
    assert by_ids["usage"] == by_text["usage"] == {"prompt_tokens": 8, "completion_tokens": 4, "total_tokens": 12}
    first = by_ids["choices"][0]
    assert first["text"] == "Capital: France? Paris Lyon is"  # echoed prompt, then max_tokens generated tokens
    lp = first["logprobs"]
    assert lp["tokens"][-3:] == [" Paris", " Lyon", " is"] and lp["text_offset"][-2:] == [22, 27]
    assert lp["token_logprobs"][0] is None
    assert lp["token_logprobs"][4] == pytest.approx(known("Capital: France?", " Paris"))
    assert one["choices"][0]["logprobs"]["tokens"][:-1] == lp["tokens"][:-2] and len(one["choices"]) == 1
    assert plain["choices"][0]["text"] == " Lyon is"  # no echo: only the generated text
    assert bad.status_code == 400 and "1000000" in bad.json()["error"]["message"]


def test_a_dict_responder_sees_a_token_id_prompt_as_its_text() -> None:
    with LocalModelServer({"capital of France": " Paris"}) as server:
        ids = httpx.post(f"{server.url}/tokenize", json={"prompt": "The capital of France is"}).json()["tokens"]
        reply = httpx.post(f"{server.base_url}/completions", json={"model": "m", "prompt": ids, "max_tokens": 5}).json()
    assert reply["choices"][0]["text"] == " Paris"


def test_byte_fallback_splits_symbols_into_byte_tokens_echoed_as_vllm_echoes_them() -> None:
    text = "A: → b é"
    with LocalModelServer(byte_fallback=True, token_logprobs=known) as server:
        got = httpx.post(f"{server.url}/tokenize", json={"prompt": text, "return_token_strs": True}).json()
        back = httpx.post(f"{server.url}/detokenize", json={"tokens": got["tokens"]}).json()
        by_ids = completion(server, [got["tokens"]]).json()
        by_text = completion(server, text).json()
        half = httpx.post(f"{server.url}/detokenize", json={"tokens": got["tokens"][:4]}).json()
    assert got["token_strs"] == ["A", ":", " ", "<0xE2>", "<0x86>", "<0x92>", " b", " é"]  # "é" is a word character
    assert back == {"prompt": text} and half == {"prompt": "A: "}  # an incomplete character shows nothing yet
    assert by_ids["choices"] == by_text["choices"]
    lp = by_ids["choices"][0]["logprobs"]
    assert list(zip(lp["tokens"], lp["text_offset"]))[2:7] == [(" ", 2), ("", 3), ("", 3), ("→", 3), (" b", 4)]
    assert lp["token_logprobs"][3] == pytest.approx(known("A: ", "")) and by_ids["usage"]["prompt_tokens"] == 8


def test_bpe_spaces_split_whitespace_as_gpt2_and_tokenizer_api_false_serves_no_tokenizer() -> None:
    """GPT-2's pre-tokenizer: a run of spaces leaves its last one to the next word, a newline is
    its own token, trailing whitespace is a token; the texts still decode to themselves."""
    with LocalModelServer(bpe_spaces=True) as server:
        got = httpx.post(f"{server.url}/tokenize", json={"prompt": "a  b\n\nQ ", "return_token_strs": True}).json()
        assert got["token_strs"] == ["a", " ", " b", "\n", "\n", "Q", " "]
        assert httpx.post(f"{server.url}/detokenize", json={"tokens": got["tokens"]}).json() == {"prompt": "a  b\n\nQ "}
    with LocalModelServer() as server:  # the default keeps whitespace runs with the next word
        got = httpx.post(f"{server.url}/tokenize", json={"prompt": "a  b", "return_token_strs": True}).json()
        assert got["token_strs"] == ["a", "  b"]
    with LocalModelServer(tokenizer_api=False) as server:
        assert httpx.get(f"{server.url}/tokenizer_info").status_code == 404
        assert httpx.post(f"{server.url}/tokenize", json={"prompt": "a"}).status_code == 404
