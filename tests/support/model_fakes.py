"""A tiny deterministic runtime for testing cache bookkeeping without a model."""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from unsee.plugins.model.runtime import LocalRuntime

VOCAB = 64
EOS = 0


class CharTokenizer:
    """Characters chr(32+i) ↔ ids 1..63; id 0 is end of turn."""

    eos_token_id = EOS
    unk_token_id = None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [1 + (ord(c) - 32) % (VOCAB - 1) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(chr(32 + i - 1) for i in ids if i != EOS)

    def convert_tokens_to_ids(self, token: str) -> Any:
        return None

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kw):
        text = "".join(f"[{m['role']}]{m['content']}" for m in messages)
        return text + ("[assistant]" if add_generation_prompt else "")


class FakeRuntime(LocalRuntime):
    """Logits are a pure function of the cached prefix (a hash), so any crop
    bug shows up as a different token stream."""

    backend = "fake"

    def __init__(self, tokenizer: CharTokenizer | None = None, max_context: int = 4096) -> None:
        super().__init__()
        self._tok = tokenizer or CharTokenizer()
        self._max = max_context
        self.forward_calls = 0
        self.cache: list[int] = []  # what a real backend's KV cache would hold

    @property
    def tokenizer(self) -> Any:
        return self._tok

    @property
    def max_context(self) -> int:
        return self._max

    def spawn(self) -> "FakeRuntime":
        return FakeRuntime(self._tok, self._max)

    def _forward(self, tokens: list[int], want_logits: bool) -> Any:
        self.forward_calls += 1
        self.cache.extend(tokens)
        digest = hashlib.sha256(bytes(t % 256 for t in self.cache)).digest()
        gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") >> 1)
        logits = torch.randn(VOCAB, generator=gen)
        logits[EOS] -= 3.0  # end of turn is rare
        return logits

    def _crop_cache(self, n_tokens: int) -> None:
        del self.cache[n_tokens:]

    def _release_cache(self) -> None:
        self.cache.clear()
