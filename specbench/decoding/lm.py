"""A causal LM with its own KV cache at batch size 1: feed tokens, read logits, roll back.

transformers 5.x: `DynamicCache.crop(-n)` removes the last n positions (a positive argument is the
deprecated "keep this many" form); positions are derived from the cache length, so a cropped cache
continues at the right position with no recomputation of the prefix.

The cache is passed as `cache=` where the model's forward takes it (transformers ≥ 5.24, which
deprecates `past_key_values=` and removes it in 5.40) and as `past_key_values=` before
(`cache_kwargs`): the vLLM CPU build pins transformers below 5.20, so both must work. Every caller
owns its `DynamicCache` (updated in place), so no output field is read back.

`MemoizedLM` is the same interface with `feed` memoized by token history: a forward is a
deterministic function of the tokens before it, so `specbench verify`, which replays one round
from the same state many times, runs far fewer forwards.
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel

MEMO_MAX_BYTES = 1 << 30  # logits a MemoizedLM keeps, at most


@cache
def _cache_argument(forward: Any) -> str:
    params = inspect.signature(forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def cache_kwargs(model: PreTrainedModel, kv_cache: DynamicCache) -> dict[str, Any]:
    """The forward's KV-cache argument: {"cache": c} where the model takes it, else
    {"past_key_values": c} (module docstring)."""
    return {_cache_argument(type(model).forward): kv_cache}


class CachedLM:
    """Wraps a model and one KV cache. `length` is the number of positions the cache holds."""

    def __init__(self, model: PreTrainedModel, vocab_size: int) -> None:
        self.model = model
        self.vocab_size = vocab_size  # logits are cut to the real vocabulary (padded rows dropped)
        self.device = model.device
        self.cache = DynamicCache(config=model.config)
        self.length = 0

    def reset(self) -> None:
        self.cache = DynamicCache(config=self.model.config)
        self.length = 0

    def feed(self, token_ids: list[int], keep: int = 1) -> torch.Tensor:
        """Run the model over token_ids after the cached prefix; return the last `keep` logits (keep, V)."""
        ids = torch.tensor([token_ids], dtype=torch.long, device=self.device)
        out = self.model(
            input_ids=ids,
            use_cache=True,
            logits_to_keep=keep,
            **cache_kwargs(self.model, self.cache),
        )
        self.length += len(token_ids)
        return out.logits[0, :, : self.vocab_size]  # (keep, V)

    def rollback(self, n_positions: int) -> None:
        """Forget the last n positions (rejected draft tokens)."""
        if n_positions > 0:
            self.cache.crop(-n_positions)
            self.length -= n_positions

    def cache_length(self) -> int:
        """What the cache itself reports (tests check it equals `length`)."""
        return int(self.cache.get_seq_length())


class MemoizedLM(CachedLM):
    """A `CachedLM` whose `feed` results are memoized by (token history, tokens, keep).

    `history` is what the cache logically holds; the real KV cache is synced lazily on a miss:
    cropped to the longest common prefix with `history`, then extended with the rest.
    """

    def __init__(
        self, model: PreTrainedModel, vocab_size: int, max_bytes: int = MEMO_MAX_BYTES
    ) -> None:
        super().__init__(model, vocab_size)
        self.history: list[int] = []
        self._real: list[int] = []  # tokens in the real KV cache
        self._memo: dict[tuple[tuple[int, ...], tuple[int, ...], int], torch.Tensor] = {}
        self._bytes = 0
        self.max_bytes = max_bytes
        self.hits = self.misses = 0

    def reset(self) -> None:
        self.history = []
        self.length = 0

    def _sync(self) -> None:
        common = 0
        for a, b in zip(self._real, self.history, strict=False):
            if a != b:
                break
            common += 1
        if common == 0 and self._real:
            super().reset()
        elif common < len(self._real):
            super().rollback(len(self._real) - common)
        self._real = self._real[:common]
        if len(self.history) > common:
            super().feed(self.history[common:], keep=1)
            self._real = list(self.history)

    def feed(self, token_ids: list[int], keep: int = 1) -> torch.Tensor:
        key = (tuple(self.history), tuple(token_ids), keep)
        logits = self._memo.get(key)
        if logits is None:
            self.misses += 1
            self._sync()
            logits = super().feed(token_ids, keep)
            self._real.extend(token_ids)
            size = logits.numel() * logits.element_size()
            if self._bytes + size <= self.max_bytes:
                self._memo[key] = logits
                self._bytes += size
        else:
            self.hits += 1
        self.history.extend(token_ids)
        self.length = len(self.history)
        return logits

    def rollback(self, n_positions: int) -> None:
        if n_positions > 0:
            del self.history[-n_positions:]
            self.length = len(self.history)
