"""Device-synchronised wall-clock timing, and the forward-latency micro-benchmark built on it.

CUDA kernels run asynchronously: a timer read without a synchronize measures the launch, not the
work. `Clock.now()` synchronises the device first (a no-op on CPU), so every interval it bounds
contains the whole forward it brackets.

`measure_forward_latency` is the short micro-benchmark behind `accept --measure-timing`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch

from specbench.decoding.lm import CachedLM


class Clock:
    """`now()` in milliseconds, synchronising each CUDA device of `devices` first.

    Name every device whose work an interval must contain: the target's input device and the
    draft's when they differ (a `device_map` can put the draft's first layer on another GPU than
    the target's, docs/configuration.md). Within one model spread over several GPUs, its output
    reaches its input device through copies that wait for every GPU before it, so its input
    device is enough. The same device named twice is synchronised once.
    """

    def __init__(self, device: torch.device, *more: torch.device) -> None:
        self._cuda = list(dict.fromkeys(d for d in (device, *more) if d.type == "cuda"))

    @property
    def cuda_devices(self) -> list[torch.device]:
        """The devices `now()` synchronises, in order, each once."""
        return list(self._cuda)

    def now(self) -> float:
        for device in self._cuda:
            torch.cuda.synchronize(device)
        return time.perf_counter() * 1000.0


@torch.inference_mode()
def measure_forward_latency(
    target: Any,
    draft: Any,
    vocab_size: int,
    context_len: int = 128,
    drafted: Sequence[int] = (1, 2, 4, 8),
    reps: int = 10,
    warmup: int = 2,
    seed: int = 0,
) -> dict[str, Any]:
    """Median forward latencies at batch 1 with a KV cache over a random context of
    `context_len` tokens: one decode step of the target (T_ar) and of the draft (T_d), and one
    target verify over k + 1 tokens for each k in `drafted` (T_t(k)). The steps are interleaved
    per repetition and the cache is rolled back after each, so every step sees the same cache
    length; the first `warmup` repetitions are discarded. Milliseconds, device-synchronised.
    """
    device = next(target.parameters()).device
    clock = Clock(device, next(draft.parameters()).device)
    gen = torch.Generator().manual_seed(seed)
    ctx = torch.randint(0, vocab_size, (context_len,), generator=gen).tolist()
    lms = {"target": CachedLM(target, vocab_size), "draft": CachedLM(draft, vocab_size)}
    for lm in lms.values():
        lm.feed(ctx, keep=1)
    times: dict[str, list[float]] = {"target": [], "draft": []}
    times.update({f"verify_{k}": [] for k in drafted})

    def step(name: str, lm: CachedLM, tokens: list[int], rep: int) -> None:
        t0 = clock.now()
        lm.feed(tokens, keep=len(tokens)).argmax(dim=-1)
        dt = clock.now() - t0
        lm.rollback(len(tokens))
        if rep >= warmup:
            times[name].append(dt)

    for rep in range(warmup + reps):
        tok = torch.randint(0, vocab_size, (max(drafted, default=1) + 1,), generator=gen).tolist()
        step("draft", lms["draft"], tok[:1], rep)
        step("target", lms["target"], tok[:1], rep)
        for k in drafted:
            step(f"verify_{k}", lms["target"], tok[: k + 1], rep)
    return {
        "t_target_ms": statistics.median(times["target"]),
        "t_draft_ms": statistics.median(times["draft"]),
        "verify_ms": {k: statistics.median(times[f"verify_{k}"]) for k in drafted},
        "context_len": context_len,
        "reps": reps,
        "device": str(device),
    }
