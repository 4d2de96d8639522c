"""LocalModelServer's tokenizer: token strings, their offsets, and ids, as a BPE server has them.

Tokens are runs of word characters or single other characters, each with the whitespace
before it (``"Answer: B"`` -> ``["Answer", ":", " B"]``), as GPT-2's byte-level BPE puts a
word's leading space in the word's token; whitespace at the very end is a token of its own.
Special tokens (``<|endoftext|>``) are never split, even with ``add_special_tokens=False``, as
Hugging Face tokenizers treat them. Like GPT-2's, the tokenizer adds no BOS token. So the
tokens of a text are a prefix of the tokens of that text plus more, unless the text ends in
whitespace or in the middle of a word (the cases real BPE merges across too): lm-eval's
context/continuation split and a split by character offset then agree.

With ``byte_fallback`` a symbol outside ASCII (``→``, ``≈``, ``☃``: not a word character) is
split into its UTF-8 bytes, as byte-level BPE splits characters it has no merge for: each byte
is its own token (``<0xE2>``), and the server shows them as vLLM echoes them, ``""`` for a byte
that does not complete a character and the character for the one that does, all at the
character's offset. A continuation that starts with such a character then starts with
zero-width tokens, which a client finding it by ``text_offset`` must count.

With ``bpe_spaces`` whitespace is split as GPT-2's pre-tokenizer splits it: a run of spaces
before a word leaves its last space to the word (``"a  b"`` -> ``["a", " ", " b"]``) and a
newline is a token of its own (``"\\nQ"`` -> ``["\\n", "Q"]``); then a context that ends in
whitespace does not split where its text ends, the case lm-eval moves the whitespace for.

Ids are given to token strings as they are first seen (the special tokens first, from 0), so
they are stable for one server's life: an id the server never gave out is not in its
vocabulary, like an id past a real vocabulary's size.
"""

from __future__ import annotations

import re
import threading

SPECIAL_TOKENS = ("<|endoftext|>",)
EOS_TOKEN = BOS_TOKEN = SPECIAL_TOKENS[0]  # GPT-2's: one end-of-text token, never added to prompts
MAX_MODEL_LEN = 8192
_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s])|\s+")
_BPE_TOKEN = re.compile(r" ?(?:\w+|[^\w\s])|\s+(?!\S)|\s+")  # GPT-2's pattern, letters and digits as \w
_SPECIAL = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS))


class UnknownTokenId(ValueError):
    """A token id the server's vocabulary does not hold (an HTTP 400, as vLLM answers it)."""


def tokenize(text: str, bpe_spaces: bool = False) -> list[tuple[str, int]]:
    """``(token, character offset)`` pairs covering ``text`` exactly."""
    pattern = _BPE_TOKEN if bpe_spaces else _TOKEN
    if "<|" not in text:
        return [(m.group(), m.start()) for m in pattern.finditer(text)]
    pieces, start = [], 0
    for special in _SPECIAL.finditer(text):
        pieces += [(m.group(), start + m.start()) for m in pattern.finditer(text[start:special.start()])]
        pieces.append((special.group(), special.start()))
        start = special.end()
    pieces += [(m.group(), start + m.start()) for m in pattern.finditer(text[start:])]
    return pieces


def byte_pieces(text: str, bpe_spaces: bool = False) -> list[tuple[str, str, int]]:
    """``(vocabulary key, shown text, offset)`` per token, non-ASCII symbols split into bytes."""
    out: list[tuple[str, str, int]] = []
    for token, offset in tokenize(text, bpe_spaces):
        core = token.lstrip()
        if len(core) != 1 or ord(core) < 128 or core.isalnum() or core == "_" or token in SPECIAL_TOKENS:
            out.append((token, token, offset))
            continue
        if len(token) > 1:
            out.append((token[:-1], token[:-1], offset))  # the whitespace before it, a token of its own
        where = offset + len(token) - 1
        data = core.encode("utf-8")
        out += [(f"<0x{b:02X}>", core if i == len(data) - 1 else "", where) for i, b in enumerate(data)]
    return out


class Vocabulary:
    """Token strings and their ids, both ways (ids in first-seen order; thread-safe)."""

    def __init__(self, byte_fallback: bool = False, bpe_spaces: bool = False) -> None:
        self.byte_fallback = byte_fallback
        self.bpe_spaces = bpe_spaces
        self._lock = threading.Lock()
        self._ids: dict[str, int] = {}
        self._strings: list[str] = []
        for token in SPECIAL_TOKENS:
            self.id_of(token)

    def __len__(self) -> int:
        return len(self._strings)

    def id_of(self, token: str) -> int:
        found = self._ids.get(token)
        if found is not None:
            return found
        with self._lock:
            found = self._ids.get(token)
            if found is None:
                found = self._ids[token] = len(self._strings)
                self._strings.append(token)
            return found

    def tokenize(self, text: str) -> list[tuple[str, int]]:
        """``(token as shown, character offset)`` pairs of ``text`` (`tokenize`, or with byte tokens)."""
        if not self.byte_fallback:
            return tokenize(text, self.bpe_spaces)
        return [(shown, offset) for _, shown, offset in byte_pieces(text, self.bpe_spaces)]

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``'s tokens (no special token is added: there is no BOS)."""
        if not self.byte_fallback:
            return [self.id_of(token) for token, _ in tokenize(text, self.bpe_spaces)]
        return [self.id_of(key) for key, _, _ in byte_pieces(text, self.bpe_spaces)]

    def strings(self, ids: list[int]) -> list[str]:
        """Each id's token string; an id not given out is `UnknownTokenId`."""
        strings = self._strings
        out = []
        for token_id in ids:
            if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < len(strings):
                raise UnknownTokenId(f"Token id {token_id!r} is out of vocabulary (size {len(strings)})")
            out.append(strings[token_id])
        return out

    def decode(self, ids: list[int]) -> str:
        return "".join(token for token, _ in self.pieces(ids))

    def pieces(self, ids: list[int]) -> list[tuple[str, int]]:
        """``(token as shown, character offset)`` pairs of a prompt given as ids, as given (not
        re-tokenized); byte tokens show ``""`` until their character is complete."""
        out, offset, pending = [], 0, b""
        for token in self.strings(ids):
            if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
                pending += bytes([int(token[3:5], 16)])
                try:
                    token, pending = pending.decode("utf-8"), b""
                except UnicodeDecodeError:
                    if len(pending) < 4:
                        out.append(("", offset))
                        continue
                    token, pending = "\ufffd", b""
            out.append((token, offset))
            offset += len(token)
        return out
