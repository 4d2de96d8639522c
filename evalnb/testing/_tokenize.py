"""vLLM's tokenizer endpoints for LocalModelServer: ``/tokenize``, ``/detokenize``, ``/tokenizer_info``.

Shapes as vLLM serves them (``vllm/entrypoints/serve/tokenize``): ``POST /tokenize``
``{prompt, add_special_tokens?, return_token_strs?}`` -> ``{count, max_model_len, tokens,
token_strs}``; ``POST /detokenize`` ``{tokens}`` -> ``{prompt}``; ``GET /tokenizer_info`` -> the
tokenizer's init settings (``eos_token``, ``bos_token``, ``pad_token``, ...) plus
``tokenizer_class``. lm-eval's ``tokenizer_backend="remote"`` reads exactly these, so lm-eval's
``local-completions`` can score log-likelihoods against the server with no local tokenizer.
"""

from __future__ import annotations

from typing import Any

from evalnb.testing._replies import error_reply
from evalnb.testing._tokenizer import BOS_TOKEN, EOS_TOKEN, MAX_MODEL_LEN, SPECIAL_TOKENS, UnknownTokenId, Vocabulary

PATHS = {("POST", "/tokenize"), ("POST", "/detokenize"), ("GET", "/tokenizer_info")}


def serves(path: str) -> bool:
    return path in ("/tokenize", "/detokenize", "/tokenizer_info")


def answer(method: str, path: str, body: Any, vocab: Vocabulary) -> tuple[int, dict]:
    """``(status, reply JSON)`` of one tokenizer request; bad input is a 4xx naming the field."""
    if (method, path) not in PATHS:
        return 405, error_reply(405, f"{method} {path} is not served")
    if path == "/tokenizer_info":
        return 200, tokenizer_info()
    if not isinstance(body, dict):
        return 400, error_reply(400, "request body must be a JSON object")
    if path == "/tokenize":
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            return 400, error_reply(400, "/tokenize needs `prompt`, a string (chat `messages` are not served)")
        tokens = vocab.encode(prompt)  # add_special_tokens adds nothing: GPT-2-like, no BOS
        strs = vocab.strings(tokens) if body.get("return_token_strs") else None
        return 200, {"count": len(tokens), "max_model_len": MAX_MODEL_LEN, "tokens": tokens, "token_strs": strs}
    tokens = body.get("tokens")
    if not isinstance(tokens, list):
        return 400, error_reply(400, "/detokenize needs `tokens`, a list of token ids")
    try:
        return 200, {"prompt": vocab.decode(tokens)}
    except UnknownTokenId as exc:
        return 400, error_reply(400, str(exc))


def tokenizer_info() -> dict[str, Any]:
    """What vLLM's ``TokenizerInfo`` gives: the tokenizer's ``init_kwargs`` and its class name."""
    return {
        "add_bos_token": False, "add_prefix_space": False, "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN,
        "unk_token": EOS_TOKEN, "pad_token": None, "clean_up_tokenization_spaces": False, "errors": "replace",
        "model_max_length": MAX_MODEL_LEN,
        "added_tokens_decoder": {str(i): {"content": t, "lstrip": False, "normalized": True, "rstrip": False,
                                          "single_word": False, "special": True}
                                 for i, t in enumerate(SPECIAL_TOKENS)},
        "tokenizer_class": "LocalModelServerTokenizer",
    }
