"""Batched forward timing: what one engine step costs with b sequences in flight (docs/theory.md
§18), measured on the transformers backend without a serving engine.

For each batch size b the target and the draft each hold a KV cache of b rows over the same
realistic context (`batch_contexts`: the workload's prompts). One measurement is

- the draft's per-token forward over b rows (b × 1 tokens): T_d(b);
- the target's verify forward over b rows of γ + 1 tokens for every γ of the grid, γ = 0 being
  the plain decode step: T_t(b, γ);

each timed alone and rolled back at once (`DynamicCache.crop`), so every forward sees the same
cache length. The forwards are interleaved — within a repetition every b, and within each b the
draft step before each verify — and the order of the batch sizes rotates between repetitions, so
a slow spell of a shared machine lands on every (b, γ) alike instead of on the ones measured last.

    timings = time_batched_forwards(target, draft, contexts, [1, 2, 4], [0, 2, 4], repeats=5)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from specbench.decoding.lm import cache_kwargs
from specbench.decoding.timing import Clock


@dataclass(frozen=True)
class BatchTiming:
    """One repetition at one batch size: milliseconds, device-synchronised."""

    batch_size: int
    repeat: int
    draft_ms: float  # the draft's forward over b rows × 1 token
    verify_ms: dict[int, float]  # γ → the target's forward over b rows × (γ + 1) tokens


def batch_contexts(token_ids: Sequence[Sequence[int]], rows: int, length: int) -> torch.Tensor:
    """(rows, length) context tokens: row i is prompt i mod P's tokens, repeated to `length`
    (every row the same length, so no padding and no attention mask changes the cost)."""
    usable = [list(ids) for ids in token_ids if ids]
    if not usable or rows < 1 or length < 1:
        raise ValueError("batch contexts need at least one non-empty prompt, one row, one token")
    out = []
    for i in range(rows):
        ids = usable[i % len(usable)]
        out.append((ids * (length // len(ids) + 1))[:length])
    return torch.tensor(out, dtype=torch.long)  # (rows, length)


def _prefill(model: Any, ids: torch.Tensor) -> DynamicCache:
    cache = DynamicCache(config=model.config)
    model(input_ids=ids, use_cache=True, logits_to_keep=1, **cache_kwargs(model, cache))
    return cache


def _timed_forward(model: Any, cache: DynamicCache, ids: torch.Tensor, clock: Clock) -> float:
    """One forward over ids (b, n) after the cache, then forget those n positions."""
    t0 = clock.now()
    out = model(
        input_ids=ids, use_cache=True, logits_to_keep=ids.shape[1], **cache_kwargs(model, cache)
    )
    out.logits.argmax(dim=-1)  # (b, n): the work a verify reads back
    dt = clock.now() - t0
    cache.crop(-ids.shape[1])
    return dt


@torch.inference_mode()
def time_batched_forwards(
    target: Any,
    draft: Any,
    contexts: torch.Tensor,
    batch_sizes: Sequence[int],
    gammas: Sequence[int],
    repeats: int,
    warmup: int = 1,
    vocab_size: int | None = None,
    seed: int = 0,
) -> Iterator[BatchTiming]:
    """Yield one `BatchTiming` per (repetition, batch size) as it is measured (module
    docstring). `contexts` (≥ max(batch_sizes) rows) is each cache's prefix; the first `warmup`
    repetitions are run and discarded; `gammas` should include 0 (the plain decode step)."""
    device = next(target.parameters()).device
    draft_device = next(draft.parameters()).device  # its own: a device_map may place it apart
    clock = Clock(device, draft_device)
    sizes = sorted(set(batch_sizes))
    grid = sorted(set(gammas))
    if contexts.shape[0] < sizes[-1]:
        raise ValueError(
            f"contexts has {contexts.shape[0]} rows; batch size {sizes[-1]} needs more"
        )
    vocab = vocab_size or int(target.config.vocab_size)
    gen = torch.Generator().manual_seed(seed)
    caches = {
        b: (
            _prefill(target, contexts[:b].to(device)),
            _prefill(draft, contexts[:b].to(draft_device)),
        )
        for b in sizes
    }
    for rep in range(-warmup, repeats):
        shift = rep % len(sizes)
        for b in sizes[shift:] + sizes[:shift]:
            target_cache, draft_cache = caches[b]
            tokens = torch.randint(0, vocab, (b, grid[-1] + 1), generator=gen).to(device)
            draft_ms: list[float] = []
            verify: dict[int, float] = {}
            for g in grid:  # the draft step beside each verify: side by side, not after
                first = tokens[:, :1].to(draft_device)  # a no-op where both share a device
                draft_ms.append(_timed_forward(draft, draft_cache, first, clock))
                verify[g] = _timed_forward(target, target_cache, tokens[:, : g + 1], clock)
            if rep >= 0:
                draft_ms.sort()
                yield BatchTiming(b, rep, draft_ms[len(draft_ms) // 2], verify)
