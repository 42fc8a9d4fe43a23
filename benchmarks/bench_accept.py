"""Offline accept-rate measurement (`specbench accept`) vs generation-based measurement.

Both measure α = E[β], β = Σ min(p, q) (docs/theory.md §2 (a)), on the same pair and logged requests:

1. generation: exact speculative decoding with the engine (γ = --gamma, each request at its
   logged temperature / top-p, up to --max-new tokens), β summed over the verified positions of
   every round; cost = the decoding wall time.
2. accept: teacher-forced scoring of every logged response position (tokenize, plan, batched
   forwards of both models, β); cost = that wall time (`end to end` adds the bootstrap and plan).

Reported: positions measured per second by each and their ratio, and α three ways: generation
(verified positions), accept on the very token sequences the generation produced (all positions,
and the verified positions only: the latter must equal generation's β up to float rounding), and
accept on the logged responses themselves (other samples, so it differs by sampling noise).

    .venv/bin/python benchmarks/bench_accept.py                       # tiny pair, shipped traffic
    .venv/bin/python benchmarks/bench_accept.py --device cuda --gamma 4
    .venv/bin/python benchmarks/bench_accept.py --target DIR --draft DIR --data logs.jsonl \\
        --bucket-by category

Prints figures; it asserts nothing (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
import torch

from specbench.analysis import rollout
from specbench.config import ModelSpec
from specbench.data.logged import open_logged, select_requests
from specbench.data.logged_rows import FieldNames
from specbench.decoding.drafters import ModelDrafter
from specbench.decoding.generate import fixed_gamma, speculative_generate
from specbench.decoding.lm import CachedLM
from specbench.decoding.teacher_forced import (
    ScoredSequence,
    default_batch_tokens,
    plan_sequences,
    score_sequences,
)
from specbench.decoding.timing import Clock
from specbench.harness.accept.accept import AcceptOptions, measure_requests, tokenize_requests
from specbench.models import check_pair_compatible, load_model
from specbench.sampling_params import SamplingParams

REPO = Path(__file__).resolve().parents[1]


def generation_pass(target, draft, tokenized, params, gamma, max_new, seed, v, eos):  # type: ignore[no-untyped-def]
    """Speculative decoding of every request; returns (Σβ verified, verified positions, outputs,
    {output position → β} per request)."""
    clock = Clock(target.device)
    t_lm, d_lm = CachedLM(target.model, v), CachedLM(draft.model, v)
    beta_sum = verified = 0.0
    outputs, verified_at = [], []
    for i, (_, prompt_ids, _) in enumerate(tokenized):
        g = torch.Generator(device=target.device).manual_seed(seed + i)
        drafter = ModelDrafter(d_lm, params[i], clock, g, eos)
        with torch.inference_mode():
            out = speculative_generate(
                t_lm,
                drafter,
                prompt_ids,
                fixed_gamma(gamma),
                params[i],
                max_new,
                clock,
                eos,
                generator=g,
            )
        assert out.rounds is not None
        r = out.rounds
        start, positions = 1, {}  # the first token comes from the prefill, never verified
        for n, k, beta, kept in zip(r.accepted, r.drafted, r.beta, r.emitted, strict=True):
            tested = min(n + 1, k)  # docs/theory.md §2 (a): positions 1..min(n + 1, k) were tested
            beta_sum += sum(beta[:tested])
            verified += tested
            positions.update({start + j: beta[j] for j in range(tested)})
            start += kept
        outputs.append(out.output_ids)
        verified_at.append(positions)
    return beta_sum, verified, outputs, verified_at


def accept_pass(target, draft, requests, params, source, v):  # type: ignore[no-untyped-def]
    """What `accept` does before its statistics: tokenize, plan, batched forwards, β."""
    tokenized = tokenize_requests(requests, target.tokenizer, "auto", [], False, source)
    seqs = [
        s for i, (_, p, r) in enumerate(tokenized) for s in plan_sequences(p, r, 1024, i).sequences
    ]
    return score_sequences(
        target.model,
        draft.model,
        seqs,
        [],
        v,
        dict(enumerate(params)),
        default_batch_tokens(target.device),
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--target", default="tiny-target")
    ap.add_argument("--draft", default="tiny-draft")
    ap.add_argument("--data", default=str(REPO / "datasets" / "logged" / "tiny_traffic.jsonl"))
    ap.add_argument("--bucket-by", default="workload")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto", help="auto = bf16 on GPU, fp32 on CPU")
    ap.add_argument("--gamma", type=int, default=8, help="γ of the generation-based measurement")
    ap.add_argument("--max-new", type=int, default=64, help="generation length")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (both sides)")
    ap.add_argument("--repeats", type=int, default=3, help="timed passes of each, interleaved")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    target = load_model(ModelSpec(model=args.target, device=args.device, dtype=args.dtype))
    draft = load_model(ModelSpec(model=args.draft, device=args.device, dtype=args.dtype))
    vocab = check_pair_compatible(target, draft)
    v, eos = vocab.real_vocab_size, frozenset(vocab.eos_token_ids)
    fields = FieldNames(bucket=args.bucket_by)
    source, rows = open_logged(args.data, columns=fields.columns())
    requests = select_requests(source, rows, fields, 0, False, None, None, args.seed).requests
    tokenized = tokenize_requests(requests, target.tokenizer, "auto", [], False, source)
    params = [r.params or SamplingParams(1.0) for r, _, _ in tokenized]
    sync = Clock(target.device).now  # device-synchronised milliseconds

    # warm-up, not timed: one accept pass (every batch shape) and one short generation
    accept_pass(target, draft, requests, params, source, v)
    generation_pass(target, draft, tokenized[:1], params, args.gamma, 8, args.seed, v, eos)

    gen_times, acc_times, e2e_times = [], [], []
    for _ in range(args.repeats):  # interleaved, so machine noise hits both alike
        t0 = sync()
        gen_beta, gen_verified, outputs, verified_at = generation_pass(
            target, draft, tokenized, params, args.gamma, args.max_new, args.seed, v, eos
        )
        gen_times.append((sync() - t0) / 1000)
        t0 = sync()
        scored = accept_pass(target, draft, requests, params, source, v)
        acc_times.append((sync() - t0) / 1000)
        t0 = sync()
        measure_requests(
            target,
            draft,
            v,
            requests,
            AcceptOptions(settings=[], logged_params=True),
            lambda _b: rollout.time_model_relative(0.1, 0.0, "default"),
            source,
        )
        e2e_times.append((sync() - t0) / 1000)
    gen_s, acc_s, e2e_s = (statistics.median(t) for t in (gen_times, acc_times, e2e_times))
    alpha_gen = gen_beta / gen_verified
    acc_positions = sum(s.agree.shape[0] for s in scored)
    alpha_logged = float(sum(np.nansum(s.beta[-1]) for s in scored) / acc_positions)

    # accept on the generation's own token sequences: the same contexts as the verified positions
    same = [ScoredSequence(i, tokenized[i][1], o) for i, o in enumerate(outputs) if o]
    same_scores = score_sequences(target.model, draft.model, same, [], v, dict(enumerate(params)))
    all_pos = np.concatenate([s.beta[-1] for s in same_scores])
    at_verified = np.asarray(
        [
            (s.beta[-1][p], b)
            for s in same_scores
            for p, b in verified_at[s.request].items()
            if p < s.beta.shape[1]
        ]
    )
    alpha_same_all = float(all_pos.mean())
    alpha_same_verified = float(at_verified[:, 0].mean())
    max_diff = float(np.abs(at_verified[:, 0] - at_verified[:, 1]).max())

    gen_rate, acc_rate = gen_verified / gen_s, acc_positions / acc_s
    temps = sorted({p.temperature for p in params})
    print(
        f"pair: {args.target} ← {args.draft} on {target.device} ({target.dtype}), {args.threads} thread(s); median of {args.repeats} interleaved passes"
    )
    print(
        f"data: {source}: {len(tokenized)} requests (logged temperatures {temps}); generation γ={args.gamma}, ≤ {args.max_new} new tokens"
    )
    print(
        f"generation-based: {int(gen_verified)} verified positions in {gen_s:.2f} s = {gen_rate:,.0f} positions/s"
    )
    print(
        f"accept:           {acc_positions} positions in {acc_s:.3f} s = {acc_rate:,.0f} positions/s (end to end with bootstrap and plan: {acc_positions / e2e_s:,.0f}/s)"
    )
    print(
        f"ratio accept ÷ generation: {acc_rate / gen_rate:.1f}× (end to end {acc_positions / e2e_s / gen_rate:.1f}×)"
    )
    print(f"α generation (verified positions):              {alpha_gen:.4f}")
    print(
        f"α accept, same sequences, all positions:        {alpha_same_all:.4f} (|Δ| {abs(alpha_same_all - alpha_gen):.4f})"
    )
    print(
        f"α accept, same sequences, verified positions:   {alpha_same_verified:.4f} (|Δ| {abs(alpha_same_verified - alpha_gen):.4f}; max per-position |Δβ| {max_diff:.2e})"
    )
    print(
        f"α accept, logged responses (other samples):     {alpha_logged:.4f} (|Δ| {abs(alpha_logged - alpha_gen):.4f})"
    )


if __name__ == "__main__":
    main()
