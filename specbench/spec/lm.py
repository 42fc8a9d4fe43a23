"""A causal LM with its own KV cache at batch size 1: feed tokens, read logits, roll back.

transformers 5.x: `DynamicCache.crop(-n)` removes the last n positions (a positive argument is the
deprecated "keep this many" form); positions are derived from the cache length, so a cropped cache
continues at the right position with no recomputation of the prefix.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel


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
            input_ids=ids, past_key_values=self.cache, use_cache=True, logits_to_keep=keep
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
