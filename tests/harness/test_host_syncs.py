"""Host synchronisations per speculative round, counted on the tiny pair and held at the design's
number (docs/performance.md "Host synchronisations per round").

On CUDA a device→host read (`.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `int(t)`, `float(t)`,
`bool(t)`, `t.__index__`) waits for every queued kernel; so does building a device tensor from a
Python list (`torch.tensor(..., device=cuda)`, a pageable copy that PyTorch synchronises), and
`Clock.now()` synchronises on purpose around each timed interval (decoding/timing.py). On a CPU the
same calls are made, so counting them here counts what a GPU round would wait for — every tensor
of the round lives on the model's device, so every such read is a device read there.

The design, per round that drafts k tokens with the draft model (k forwards of the draft):
  device→host reads: 2 per draft step (its confidence, then its token) + 3 for the target
      under sampling (β of the drafted positions, the k accept coins, the emitted token), or
      2 under greedy (the argmax matches, the emitted token);
  host→device token copies: 1 per draft step + 1 verify forward + 1 drafted-token tensor;
  timer synchronisations: 2 per draft step + 2 around the verify.
An n-gram round reads 3 (sampled) and copies 2, whatever it drafted, and synchronises 2 around
the verify plus 2 around its lookup (1 when it found nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

import specbench.decoding.generate as generate
from specbench.decoding.drafters import ModelDrafter, NgramDrafter
from specbench.decoding.generate import fixed_gamma, speculative_generate
from specbench.decoding.lm import CachedLM
from specbench.decoding.timing import Clock
from specbench.sampling_params import SamplingParams

READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__")


class CountingClock(Clock):
    def __init__(self, device: torch.device, counts: Counter[str]) -> None:
        super().__init__(device)
        self.counts = counts

    def now(self) -> float:
        self.counts["timer"] += 1
        return super().now()


@contextmanager
def counting(counts: Counter[str]) -> Iterator[None]:
    """Count device→host reads on every tensor, and tensors built from host data."""
    originals = {name: getattr(torch.Tensor, name) for name in READS}
    real_tensor = torch.tensor

    def wrap(name: str) -> Any:
        original = originals[name]

        def counted(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            counts["read"] += 1
            counts[f"read:{name}"] += 1
            return original(self, *args, **kwargs)

        return counted

    def tensor(*args: Any, **kwargs: Any) -> torch.Tensor:
        counts["copy"] += 1
        return real_tensor(*args, **kwargs)

    try:
        for name in READS:
            setattr(torch.Tensor, name, wrap(name))
        torch.tensor = tensor  # type: ignore[assignment]
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
        torch.tensor = real_tensor  # type: ignore[assignment]


def _rounds(pair: Any, drafter_kind: str, params: SamplingParams, gamma: int) -> list[Any]:
    """Run a generation, counting inside every `speculative_round` separately."""
    v = pair.vocab.real_vocab_size
    counts: Counter[str] = Counter()
    clock = CountingClock(torch.device("cpu"), counts)
    target = CachedLM(pair.target.model, v)
    gen = torch.Generator().manual_seed(0)
    drafter: Any
    if drafter_kind == "model":
        drafter = ModelDrafter(CachedLM(pair.draft.model, v), params, clock, gen)
    else:
        drafter = NgramDrafter(1, 3, clock)
    ids = pair.target.tokenizer("def f(x):\n    return x + 1\n\ndef g(x):\n    return")["input_ids"]
    real_round = generate.speculative_round
    per_round: list[tuple[int, int, Counter[str]]] = []

    def counted_round(*args: Any, **kwargs: Any) -> Any:
        counts.clear()
        with counting(counts):
            step = real_round(*args, **kwargs)
        per_round.append((len(step.proposal.tokens), len(step.proposal.step_ms), Counter(counts)))
        return step

    generate.speculative_round = counted_round  # type: ignore[assignment]
    try:
        with torch.inference_mode():
            speculative_generate(target, drafter, ids, fixed_gamma(gamma), params, 24, clock, generator=gen)  # fmt: skip
    finally:
        generate.speculative_round = real_round  # type: ignore[assignment]
    return per_round


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_model_drafter_round_syncs_at_the_design_number(tiny_pair: Any, temperature: float) -> None:
    params = SamplingParams(temperature=temperature)
    rounds = _rounds(tiny_pair, "model", params, gamma=4)
    assert len(rounds) >= 4
    target_reads = 2 if params.greedy else 3
    for k, steps, c in rounds:
        assert steps == k  # no confidence stop: one draft forward per drafted token
        assert c["read"] == 2 * steps + target_reads, c
        assert c["copy"] == steps + 2, c
        assert c["timer"] == 2 * steps + 2, c
        assert c["read:cpu"] == c["read:numpy"] == c["read:item"] == 0, c


def test_ngram_round_syncs_at_the_design_number(tiny_pair: Any) -> None:
    rounds = _rounds(tiny_pair, "ngram", SamplingParams(temperature=1.0), gamma=4)
    assert any(k > 0 for k, _, _ in rounds) and len(rounds) >= 3
    for k, _, c in rounds:
        assert (c["read"], c["copy"], c["timer"]) == (3, 2, 4 if k else 3), (k, c)


def test_the_counter_sees_an_extra_read(tiny_pair: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A round that reads one value more (here: p's maximum, as a float) is counted: the test
    would fail on a change that adds a per-round sync."""
    real = generate.process_logits

    def reads_max(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
        probs = real(logits, params)
        float(probs.max())
        return probs

    monkeypatch.setattr(generate, "process_logits", reads_max)
    rounds = _rounds(tiny_pair, "model", SamplingParams(temperature=1.0), gamma=3)
    assert all(c["read"] == 2 * steps + 4 for _, steps, c in rounds)
