"""Acceptance estimators from per-round records (THEORY §2), with prompt-bootstrap intervals.

For one group of speculative records (same workload, temperature, drafter and γ):
  (a) exact β mean over *verified* positions — a round that accepted n of k drafted tokens tested
      positions 1..min(n + 1, k); β there is Σ min(p, q) (the match indicator when greedy);
  (b) accepted / proposed — vLLM's "draft acceptance rate", biased low;
  (c) accepted / tested — the iid MLE of α (tested = accepted + rejections);
  (d) per-position conditional acceptance a_i = #(A ≥ i) / #(A ≥ i − 1), over rounds that drafted
      at least i tokens;
plus α solved from the mean accepted length τ = 1 + accepted / rounds, and the truncation curve
ā(γ') = 1 + mean(min(A, γ')) from the rounds that drafted the full γ (THEORY §3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.analysis import roi
from specbench.analysis.stats import Estimate, ratio_ci


@dataclass(frozen=True)
class PromptAcceptance:
    """Per-prompt sums, the bootstrap units."""

    beta_sum: np.ndarray
    verified: np.ndarray
    accepted: np.ndarray
    proposed: np.ndarray
    tested: np.ndarray
    rounds: np.ndarray


def per_prompt(records: list[dict[str, Any]]) -> PromptAcceptance:
    cols: dict[str, list[float]] = {k: [] for k in PromptAcceptance.__dataclass_fields__}
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
    return PromptAcceptance(**{k: np.asarray(v, float) for k, v in cols.items()})


def all_rounds(records: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
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
    records: list[dict[str, Any]], gamma: int, n_boot: int, level: float
) -> AlphaEstimates:
    pp = per_prompt(records)
    exact = ratio_ci(pp.beta_sum, pp.verified, n_boot, level)
    acc_tested = ratio_ci(pp.accepted, pp.tested, n_boot, level)
    acc_prop = ratio_ci(pp.accepted, pp.proposed, n_boot, level)
    per_round = ratio_ci(pp.accepted, pp.rounds, n_boot, level)
    tau = Estimate(1 + per_round.value, 1 + per_round.lo, 1 + per_round.hi)

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


def truncation_curve(accepted: np.ndarray, drafted: np.ndarray, gamma_max: int) -> dict[int, float]:
    """Empirical ā(γ) = 1 + mean(min(A, γ)) for γ ≤ γ_max, from rounds that drafted all γ_max.

    Valid because the first γ decisions of a round do not depend on what is drafted after them.
    """
    full = accepted[drafted == gamma_max]
    if len(full) == 0:
        return {}
    return {g: float(1 + np.minimum(full, g).mean()) for g in range(1, gamma_max + 1)}
