"""Acceptance estimators from per-round records (docs/theory.md §2), with intervals over prompts.

For one group of speculative records (same workload, temperature, drafter and γ):
  (a) exact β mean over *verified* positions — a round that accepted n of k drafted tokens tested
      positions 1..min(n + 1, k); β there is Σ min(p, q) (the match indicator when greedy);
  (b) accepted / proposed — vLLM's "draft acceptance rate", biased low;
  (c) accepted / tested — the iid MLE of α (tested = accepted + rejections);
  (d) per-position conditional acceptance a_i = #(A ≥ i) / #(A ≥ i − 1), over rounds that drafted
      at least i tokens;
plus α solved from the mean accepted length τ = 1 + accepted / rounds, and the truncation curve:
ā_p(γ') = 1 + E[min(A, γ')] per prompt, each turn that ran into max_new_tokens walked down its
budget with the loop's cap (`analysis.arithmetic.end_of_budget`), pooled by tokens Σ L_p / Σ (L_p / ā_p(γ'))
(docs/theory.md §3: pooling rounds instead is biased low whenever α varies across prompts). Every interval treats prompts as the units, repeats of a prompt summed into one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbench.analysis.arithmetic import roi
from specbench.analysis.arithmetic.end_of_budget import (
    censored_pmf,
    iid_pmf,
    tokens_per_round_by_prompt,
)
from specbench.analysis.stats.resampling import Estimate
from specbench.analysis.stats.signflip import rate_estimate, ratio_estimate
from specbench.record_line import RecordLine


@dataclass(frozen=True)
class PromptAcceptance:
    """Per-prompt sums, the bootstrap units."""

    beta_sum: np.ndarray
    verified: np.ndarray
    accepted: np.ndarray
    proposed: np.ndarray
    tested: np.ndarray
    rounds: np.ndarray
    prompt_ids: list[str]


def per_prompt(records: list[RecordLine]) -> PromptAcceptance:
    cols: dict[str, list[float]] = {
        k: [] for k in PromptAcceptance.__dataclass_fields__ if k != "prompt_ids"
    }
    for rec in records:
        r = rec["rounds"]
        beta_sum = verified = tested = 0.0
        for n, k, beta in zip(r["accepted"], r["drafted"], r["beta"], strict=True):
            v = min(n + 1, k)
            beta_sum += sum(beta[:v])
            verified += v
            tested += v
        cols["beta_sum"].append(beta_sum)
        cols["verified"].append(verified)
        cols["accepted"].append(sum(r["accepted"]))
        cols["proposed"].append(sum(r["drafted"]))
        cols["tested"].append(tested)
        cols["rounds"].append(len(r["accepted"]))
    arrays = {k: np.asarray(v, float) for k, v in cols.items() if k != "prompt_ids"}
    return PromptAcceptance(**arrays, prompt_ids=[str(rec["prompt_id"]) for rec in records])


def all_rounds(records: list[RecordLine]) -> tuple[np.ndarray, np.ndarray]:
    """(accepted, drafted) of every round, flattened."""
    acc = [a for rec in records for a in rec["rounds"]["accepted"]]
    dra = [d for rec in records for d in rec["rounds"]["drafted"]]
    return np.asarray(acc, int), np.asarray(dra, int)


@dataclass(frozen=True)
class AlphaEstimates:
    exact_beta: Estimate
    accepted_tested: Estimate
    accepted_proposed: Estimate
    tokens_per_round: Estimate  # τ = 1 + accepted / rounds
    from_accepted_length: Estimate | None  # α solved from τ at this γ (fixed γ only)


def estimate_alpha(
    records: list[RecordLine], gamma: int, n_boot: int, level: float
) -> AlphaEstimates:
    pp = per_prompt(records)
    ids = pp.prompt_ids
    # each a ratio of sums over prompts, its interval the sign-flip test inverted
    # (docs/theory.md §7, §8: calibrated on the realistic family at n = 3–32; unbounded — α's
    # range [0, 1] — below the test's resolution of 6 prompts). n_boot is kept for the callers.
    exact = rate_estimate(pp.beta_sum, pp.verified, level, clusters=ids)
    acc_tested = rate_estimate(pp.accepted, pp.tested, level, clusters=ids)
    acc_prop = rate_estimate(pp.accepted, pp.proposed, level, clusters=ids)
    tau = ratio_estimate(pp.accepted + pp.rounds, pp.rounds, level, clusters=ids)

    def solve(t: float) -> float:
        return roi.alpha_from_accepted(min(max(t, 1.0), gamma + 1.0), gamma)

    from_tau = None
    if np.isfinite(tau.value):
        lo = solve(tau.lo) if np.isfinite(tau.lo) else float("nan")
        hi = solve(tau.hi) if np.isfinite(tau.hi) else float("nan")
        from_tau = Estimate(solve(tau.value), lo, hi)
    return AlphaEstimates(exact, acc_tested, acc_prop, tau, from_tau)


def per_position_acceptance(
    accepted: np.ndarray, drafted: np.ndarray, gamma: int
) -> list[float | None]:
    """a_i for i = 1..γ: P(position i accepted | positions < i accepted), rounds with k ≥ i."""
    rates: list[float | None] = []
    for i in range(1, gamma + 1):
        eligible = drafted >= i
        reached = (accepted >= i - 1) & eligible
        denom = int(reached.sum())
        rates.append(float(((accepted >= i) & eligible).sum() / denom) if denom else None)
    return rates


def accepted_histogram(accepted: np.ndarray, gamma: int) -> list[int]:
    """Rounds that accepted 0, 1, …, γ draft tokens."""
    return np.bincount(accepted, minlength=gamma + 1)[: gamma + 1].tolist()


@dataclass(frozen=True)
class PromptTruncation:
    """Per prompt (record) of a γ_max run: tokens emitted L_p, exact-β α_p and ā_p(γ) for
    γ = 1..γ_max from its rounds (rounds capped below γ_max censored; NaN without any round),
    each turn that ran into max_new_tokens walked down its budget (`analysis.arithmetic.end_of_budget`)."""

    lengths: np.ndarray  # (P,)
    alphas: np.ndarray  # (P,)
    expected: np.ndarray  # (P, γ_max); column γ − 1 holds ā_p(γ)


def prompt_truncation(records: list[RecordLine], gamma_max: int) -> PromptTruncation:
    """Valid because the first γ decisions of a round do not depend on what is drafted after them;
    a round near the end of the budget is capped by the tokens left, not by γ (docs/theory.md §3)."""
    lengths, alphas, pmfs = [], [], []
    pp = per_prompt(records)
    for i, rec in enumerate(records):
        acc = np.asarray(rec["rounds"]["accepted"], int)
        dra = np.asarray(rec["rounds"]["drafted"], int)
        lengths.append(float((acc + 1).sum()))
        alphas.append(pp.beta_sum[i] / pp.verified[i] if pp.verified[i] > 0 else np.nan)
        # what the budget let each round draft (γ_max when uncapped); records without the asked
        # γ read every short round as capped by the budget
        asked = np.asarray(rec["rounds"].get("gamma") or dra, int)
        pmfs.append(censored_pmf(acc, np.where(asked < gamma_max, dra, gamma_max), gamma_max))
    expected = tokens_per_round_by_prompt(records, np.asarray(pmfs, float), gamma_max)
    return PromptTruncation(np.asarray(lengths, float), np.asarray(alphas, float), expected)


def truncation_curve(records: list[RecordLine], gamma_max: int) -> dict[int, float]:
    """Empirical ā(γ) for γ ≤ γ_max: per-prompt truncation pooled by tokens (docs/theory.md §3)."""
    pt = prompt_truncation(records, gamma_max)
    if not np.isfinite(pt.expected).any():
        return {}
    return {
        g: roi.pooled_tokens_per_round(pt.lengths, pt.expected[:, g - 1])
        for g in range(1, gamma_max + 1)
    }


def iid_curve(records: list[RecordLine], gamma_max: int) -> dict[int, float]:
    """ā(γ) from the iid model at each prompt's own exact-β α, pooled by tokens, each turn that
    ran into max_new_tokens walked down its budget as in `prompt_truncation`."""
    pt = prompt_truncation(records, gamma_max)
    keep = np.isfinite(pt.alphas)
    if not keep.any():
        return {}
    kept = [rec for rec, k in zip(records, keep, strict=True) if k]
    pmfs = np.asarray([iid_pmf(a, gamma_max) for a in pt.alphas[keep]], float)
    expected = tokens_per_round_by_prompt(kept, pmfs, gamma_max)
    return {
        g: roi.pooled_tokens_per_round(pt.lengths[keep], expected[:, g - 1])
        for g in range(1, gamma_max + 1)
    }
