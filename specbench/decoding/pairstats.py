"""Offline statistics of a target/draft pair: greedy continuations, teacher-forced acceptance, and
decode-step latency.

Notation as in docs/theory.md: p = p_target, q = q_draft, β_t = Σ_x min(p_t(x), q_t(x)) (the exact
probability that a drafted position is accepted), α = E[β]. Everything here is estimator (a) of
docs/theory.md §2: mean exact β over positions, computed teacher-forced with one forward of each model over
prompt + continuation. No sampling is involved, so on a fixed machine the numbers are deterministic.

The functions take models and token ids (no tokenizer, no files), so they serve the training
script that writes the shipped manifest, the test that checks it, and the benchmark alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from transformers import DynamicCache

from specbench.decoding.acceptance_rules import exact_beta
from specbench.decoding.lm import cache_kwargs
from specbench.decoding.sampling import process_logits
from specbench.sampling_params import SamplingParams


def _logits(model: Any, ids: Sequence[int]) -> torch.Tensor:
    """One no-cache forward over `ids` (batch 1) → float32 logits (len(ids), V)."""
    device = next(model.parameters()).device
    x = torch.tensor([list(ids)], dtype=torch.long, device=device)
    out = model(input_ids=x, use_cache=False)
    return out.logits[0].float().cpu()


@torch.inference_mode()
def greedy_continuation(model: Any, prompt_ids: Sequence[int], n_new: int) -> list[int]:
    """The model's greedy (argmax, first index on ties) continuation of `prompt_ids`.

    Exactly `n_new` tokens: the loop does not stop at EOS, so every prompt contributes the same
    number of positions. Uses the KV cache: one prefill forward, then one forward per new token.
    """
    if n_new <= 0:
        return []
    device = next(model.parameters()).device
    x = torch.tensor([list(prompt_ids)], dtype=torch.long, device=device)
    kv_cache = DynamicCache(config=model.config)
    out = model(input_ids=x, use_cache=True, **cache_kwargs(model, kv_cache))
    new: list[int] = []
    while True:
        tok = int(out.logits[0, -1].argmax())
        new.append(tok)
        if len(new) == n_new:
            return new
        step = torch.tensor([[tok]], dtype=torch.long, device=device)
        out = model(input_ids=step, use_cache=True, **cache_kwargs(model, kv_cache))


@torch.inference_mode()
def teacher_forced_stats(
    target: Any,
    draft: Any,
    prompt_ids: Sequence[int],
    continuation_ids: Sequence[int],
    temperature: float = 1.0,
) -> dict[str, Any]:
    """Per-position acceptance of the draft against the target along a fixed continuation.

    One forward of each model over prompt + continuation. The scored positions are the
    len(continuation_ids) positions whose next token is a continuation token (logit rows
    len(prompt)-1 … len(prompt)+len(continuation)-2). At each:

    - `beta`: exact β = Σ min(p, q) with p, q = `process_logits(·, SamplingParams(temperature))`
      (temperature only; no top-k/top-p);
    - `agree`: argmax q == argmax p (greedy agreement, i.e. β at temperature 0);
    - `target_matches_continuation`: argmax p == the continuation token (1.0 everywhere when the
      continuation is the target's own greedy one, up to rare near-ties between the cached and the
      full forward, which this field exposes rather than hides).

    Returns lists of floats/bools per position and their means: `mean_beta`, `greedy_agreement`,
    `target_self_agreement`, plus `n_positions`.
    """
    if len(prompt_ids) == 0:
        raise ValueError("prompt_ids must hold at least one token")
    n = len(continuation_ids)
    if n == 0:
        raise ValueError("continuation_ids must hold at least one token")
    ids = list(prompt_ids) + list(continuation_ids)
    start = len(prompt_ids) - 1
    p_logits = _logits(target, ids)[start : start + n]
    q_logits = _logits(draft, ids)[start : start + n]
    if p_logits.shape[-1] != q_logits.shape[-1]:
        raise ValueError(
            f"vocabulary sizes differ: target {p_logits.shape[-1]}, draft {q_logits.shape[-1]}"
        )
    params = SamplingParams(temperature=temperature)
    beta = exact_beta(process_logits(p_logits, params), process_logits(q_logits, params))
    p_arg = p_logits.argmax(dim=-1)
    agree = p_arg == q_logits.argmax(dim=-1)
    self_match = p_arg == torch.tensor(list(continuation_ids), dtype=torch.long)
    return {
        "beta": [float(b) for b in beta],
        "agree": [bool(a) for a in agree],
        "target_matches_continuation": [bool(m) for m in self_match],
        "mean_beta": float(beta.double().mean()),
        "greedy_agreement": float(agree.double().mean()),
        "target_self_agreement": float(self_match.double().mean()),
        "n_positions": n,
    }


def acceptance_figures(
    target: Any,
    draft: Any,
    prompts: Mapping[str, Mapping[str, Sequence[int]]],
    n_new: int,
    temperature: float = 1.0,
    continuations: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, Any]:
    """The manifest's acceptance figures for prompts grouped by workload.

    `prompts` maps workload name → {prompt id → prompt token ids}. For each prompt the target's
    greedy continuation of `n_new` tokens is generated (or taken from `continuations[prompt id]`
    when given — e.g. the ones stored in the manifest, so a check does not depend on a near-tie in
    generation), then scored with `teacher_forced_stats`. Per workload the means are pooled over
    all positions (every prompt contributes the same number of positions when continuations all
    have length `n_new`).

    Returns {"workloads": {name: {greedy_agreement, mean_beta, target_self_agreement, n_prompts,
    n_positions, prompt_ids}}, "continuations": {prompt id: [token ids]}, "beta_spread",
    "most_predictable", "least_predictable", "n_new", "temperature"}.
    """
    out_workloads: dict[str, dict[str, Any]] = {}
    conts: dict[str, list[int]] = {}
    for workload, items in prompts.items():
        betas: list[float] = []
        agrees: list[bool] = []
        selfs: list[bool] = []
        for pid, ids in items.items():
            if continuations is not None and pid in continuations:
                cont = list(continuations[pid])
            else:
                cont = greedy_continuation(target, ids, n_new)
            conts[pid] = cont
            st = teacher_forced_stats(target, draft, ids, cont, temperature)
            betas.extend(st["beta"])
            agrees.extend(st["agree"])
            selfs.extend(st["target_matches_continuation"])
        if not betas:
            raise ValueError(f"workload {workload!r} has no prompts")
        out_workloads[workload] = {
            "greedy_agreement": sum(agrees) / len(agrees),
            "mean_beta": statistics.fmean(betas),
            "target_self_agreement": sum(selfs) / len(selfs),
            "n_prompts": len(items),
            "n_positions": len(betas),
            "prompt_ids": list(items),
        }
    by_beta = sorted(out_workloads, key=lambda w: out_workloads[w]["mean_beta"])
    return {
        "workloads": out_workloads,
        "beta_spread": out_workloads[by_beta[-1]]["mean_beta"]
        - out_workloads[by_beta[0]]["mean_beta"],
        "most_predictable": by_beta[-1],
        "least_predictable": by_beta[0],
        "n_new": n_new,
        "temperature": temperature,
        "continuations": conts,
    }


@torch.inference_mode()
def decode_step_latencies(
    models: Mapping[str, Any],
    context_len: int = 64,
    n_steps: int = 200,
    block: int = 8,
    reset_every: int = 64,
    warmup: int = 16,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Time one decode step (1 new token, KV cache, batch 1) of each model, interleaved in blocks.

    Each model gets the same random context of `context_len` tokens (prefilled, not timed). The
    models then take turns, `block` consecutive steps each, so machine noise hits them alike while
    each model runs a few steps back to back as a drafter does within a round (with `block=1` the
    small model pays for the caches the big one just evicted on every step). Every `reset_every`
    steps of a model its cache is rebuilt from the context (not timed), so the cache length stays
    within [context_len, context_len + reset_every). Each step includes the argmax of the logits.
    The first `warmup` steps of each model are discarded; `n_steps` are kept. Returns the per-step
    times in milliseconds for each model. The thread count is the caller's
    (`torch.set_num_threads`).
    """
    if not models:
        return {}
    if block < 1 or reset_every < 1:
        raise ValueError("block and reset_every must be >= 1")
    vocab = min(int(m.config.vocab_size) for m in models.values())
    gen = torch.Generator().manual_seed(seed)
    ctx = torch.randint(0, vocab, (1, context_len), generator=gen)
    times: dict[str, list[float]] = {name: [] for name in models}
    state: dict[str, tuple[Any, torch.Tensor]] = {}
    done = dict.fromkeys(models, 0)

    def prefill(name: str) -> None:
        m = models[name]
        kv_cache = DynamicCache(config=m.config)
        out = m(
            input_ids=ctx.to(next(m.parameters()).device),
            use_cache=True,
            **cache_kwargs(m, kv_cache),
        )
        state[name] = (kv_cache, out.logits[:, -1:].argmax(-1))

    total = warmup + n_steps
    while any(n < total for n in done.values()):
        for name, m in models.items():
            for _ in range(min(block, total - done[name])):
                if done[name] % reset_every == 0:
                    prefill(name)
                cache, tok = state[name]
                t0 = time.perf_counter()
                out = m(input_ids=tok, use_cache=True, **cache_kwargs(m, cache))
                nxt = out.logits[:, -1:].argmax(-1)
                dt = time.perf_counter() - t0
                state[name] = (cache, nxt)
                if done[name] >= warmup:
                    times[name].append(dt * 1e3)
                done[name] += 1
    return times


def latency_summary(times: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Median per-step milliseconds per model (`<name>_ms_median`)."""
    return {f"{name}_ms_median": statistics.median(ts) for name, ts in times.items()}
