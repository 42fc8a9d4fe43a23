"""The family of realistic data the verdicts' error rates are claimed for (docs/theory.md §10).

No interval is honest over every heavy-tailed distribution, so the calibration names the family
it is measured on — data as unkind as real traffic:

- a heavy-tailed cost per prompt, lognormal σ = 0.5 (the stress case σ = 1), shared by all of
  a prompt's units (baseline and every setting: a long context is slow on every side);
- acceptance that varies across prompts (α_p ~ 0.6 ± 0.2, clipped to [0.05, 0.95]) and within
  them (each round's α drawn from Beta(κ·α_p, κ·(1 − α_p)), κ = 4), correlated with the
  prompt's length (ρ = 0.3 with log length);
- output lengths log-uniform over 8–256 tokens (32×), each unit's length drawn around its
  prompt's (sampling: the two sides' lengths differ), capped at the budget;
- the end-of-budget γ cap: a round with r tokens left proposes min(γ, r − 1);
- run-to-run noise: lognormal σ = 0.1 per unit, a component of it shared by the settings.

A round costs γ·T_d + T_t(γ) in baseline-step units (T_d = 0.12, T_t = 1 + 0.04·γ). The truth of
each setting (the population pooled-throughput ratio) is computed once by a large simulation
(the cost factor cancels: it is independent of everything else), and each setting's times are
scaled so its true speedup is exactly the value a check asks for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

T_DRAFT, T_VERIFY, T_VERIFY_PER_TOKEN = 0.12, 1.0, 0.04
LENGTHS = (8, 256)


@dataclass(frozen=True)
class Family:
    cost_sigma: float = 0.5
    alpha_mean: float = 0.6
    alpha_sd: float = 0.2
    kappa: float = 4.0
    length_corr: float = 0.3
    noise: float = 0.1


def _round_cost(gamma: np.ndarray) -> np.ndarray:
    return gamma * T_DRAFT + T_VERIFY + T_VERIFY_PER_TOKEN * gamma


@dataclass(frozen=True)
class Walk:
    """One speculative decode of each unit, summed over its rounds (arrays of the units' shape)."""

    time: np.ndarray  # baseline steps
    accepted: np.ndarray  # draft tokens accepted
    drafted: np.ndarray  # draft tokens proposed (after the end-of-budget cap)
    beta: np.ndarray  # Σ over verified positions of the round's acceptance probability
    verified: np.ndarray  # positions verified: min(accepted + 1, drafted) a round
    rounds: np.ndarray
    tokens: np.ndarray  # emitted: accepted + 1 a round


def walk(
    rng: np.random.Generator, alpha: np.ndarray, tokens: np.ndarray, gamma: int, kappa: float
) -> Walk:
    """Emit `tokens` at γ round by round with the end-of-budget cap, keeping what each estimator
    of α and τ sums over a prompt's rounds (docs/theory.md §2)."""
    alpha = np.clip(alpha, 0.02, 0.98)
    a, b = kappa * alpha, kappa * (1.0 - alpha)
    sums = {k: np.zeros(tokens.shape) for k in Walk.__dataclass_fields__}
    active = sums["tokens"] < tokens
    while active.any():
        cap = np.minimum(gamma, np.maximum(tokens - sums["tokens"] - 1, 0))
        u = rng.random((*tokens.shape, gamma))  # drawn before the round's α (the seeds' order)
        p = rng.beta(a, b)
        ok = u < p[..., None]
        run = np.argmin(np.concatenate([ok, np.zeros((*tokens.shape, 1), bool)], -1), -1)
        accepted = np.minimum(run, cap)
        verified = np.minimum(accepted + 1, cap)
        for key, v in (("tokens", accepted + 1), ("time", _round_cost(cap)),
                       ("accepted", accepted), ("drafted", cap), ("beta", p * verified),
                       ("verified", verified), ("rounds", 1.0)):  # fmt: skip
            sums[key] += np.where(active, v, 0.0)
        active = sums["tokens"] < tokens
    return Walk(**sums)


def spec_time(
    rng: np.random.Generator, alpha: np.ndarray, tokens: np.ndarray, gamma: int, kappa: float
) -> np.ndarray:
    """Time (baseline steps) to emit `tokens` at γ, round by round, with the end-of-budget cap."""
    return walk(rng, alpha, tokens, gamma, kappa).time


def _prompts(
    rng: np.random.Generator, shape: tuple[int, int], fam: Family
) -> tuple[np.ndarray, np.ndarray]:
    """Each prompt's log length and its α, correlated with the length."""
    lo, hi = math.log(LENGTHS[0]), math.log(LENGTHS[1])
    log_len = rng.uniform(lo, hi, shape)
    z = (log_len - (lo + hi) / 2) / ((hi - lo) / math.sqrt(12.0))
    mix = fam.length_corr * z + math.sqrt(1 - fam.length_corr**2) * rng.standard_normal(shape)
    return log_len, np.clip(fam.alpha_mean + fam.alpha_sd * mix, 0.05, 0.95)


def _length(rng: np.random.Generator, log_len: np.ndarray) -> np.ndarray:
    """One unit's output length around its prompt's (sampling: each side's differs), capped."""
    return np.clip(np.round(np.exp(log_len + rng.normal(0.0, 0.3, log_len.shape))), 2, LENGTHS[1])


def draw(
    rng: np.random.Generator, reps: int, n: int, gammas: tuple[int, ...], fam: Family
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(tok_base, ms_base) of shape (reps, n) and (tok_spec, ms_spec) of shape (K, reps, n)."""
    shape = (reps, n)
    cost = rng.lognormal(0.0, fam.cost_sigma, shape)
    log_len, alpha = _prompts(rng, shape, fam)

    def length() -> np.ndarray:
        return _length(rng, log_len)

    tok_b = length()
    ms_b = tok_b * cost * np.exp(rng.normal(0.0, fam.noise, shape))
    shared = rng.normal(0.0, fam.noise, shape)
    tok_s, ms_s = [], []
    for g in gammas:
        t = length()
        own = rng.normal(0.0, fam.noise / 2, shape)
        tok_s.append(t)
        ms_s.append(spec_time(rng, alpha, t, g, fam.kappa) * cost * np.exp(shared + own))
    return tok_b, ms_b, np.stack(tok_s), np.stack(ms_s)


@lru_cache(maxsize=32)
def true_speedups(gammas: tuple[int, ...], fam: Family, prompts: int = 50_000) -> tuple[float, ...]:
    """Each γ's population pooled-throughput speedup (cost factor dropped: it cancels)."""
    rng = np.random.default_rng(987654321)
    flat = Family(0.0, fam.alpha_mean, fam.alpha_sd, fam.kappa, fam.length_corr, fam.noise)
    tb, mb, ts, ms = draw(rng, 1, prompts, gammas, flat)
    base = tb.sum() / mb.sum()
    return tuple(float(ts[k].sum() / ms[k].sum() / base) for k in range(len(gammas)))


def draw_at(
    rng: np.random.Generator,
    reps: int,
    n: int,
    gammas: tuple[int, ...],
    fam: Family,
    speedup: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`draw`, with each setting's times scaled so its true speedup is exactly `speedup`."""
    tb, mb, ts, ms = draw(rng, reps, n, gammas, fam)
    truth = true_speedups(gammas, fam)
    for k, s in enumerate(truth):
        ms[k] *= s / speedup
    return tb, mb, ts, ms


def draw_acceptance(rng: np.random.Generator, reps: int, n: int, gamma: int, fam: Family) -> Walk:
    """One setting's per-prompt acceptance sums at γ, arrays of shape (reps, n)."""
    log_len, alpha = _prompts(rng, (reps, n), fam)
    return walk(rng, alpha, _length(rng, log_len), gamma, fam.kappa)


@dataclass(frozen=True)
class AcceptanceTruth:
    """The population ratios of sums the α and τ intervals estimate (docs/theory.md §2)."""

    accepted_drafted: float  # Σ accepted / Σ drafted
    exact_beta: float  # Σ β / Σ verified
    tokens_per_round: float  # τ = Σ tokens / Σ rounds


ALPHA_GRID = 2001  # the expected round sums are tabulated over α and interpolated


def _expected_sums(gamma: int, kappa: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """E[each of `walk`'s sums | the prompt's α, its budget L] on a grid of α × L = 0..256.

    Given α_p the rounds are independent (each draws its own p ~ Beta(κα_p, κ(1 − α_p))), so
    with r tokens left a round proposes c = min(γ, r − 1), accepts A = j with probability
    E[p^j (1 − p)] (j < c) or E[p^c] (j = c), and leaves r − j − 1: a recursion over r on the
    Beta moments m_j = E[p^j] — exact, where `walk` would need millions of rounds."""
    alpha = np.clip(np.linspace(0.05, 0.95, ALPHA_GRID), 0.02, 0.98)
    a, b = kappa * alpha, kappa * (1.0 - alpha)
    m = np.ones((gamma + 3, ALPHA_GRID))
    for j in range(gamma + 2):
        m[j + 1] = m[j] * (a + j) / (a + b + j)
    keys = ("accepted", "drafted", "beta", "verified", "rounds")
    tab = {k: np.zeros((LENGTHS[1] + 1, ALPHA_GRID)) for k in keys}
    for r in range(1, LENGTHS[1] + 1):
        c = min(gamma, r - 1)
        for j in range(c + 1):
            pj = m[j] - m[j + 1] if j < c else m[c]  # P(A = j)
            pbeta = m[j + 1] - m[j + 2] if j < c else m[c + 1]  # E[p · 1{A = j}]
            v = min(j + 1, c)
            now = {"accepted": j * pj, "drafted": c * pj, "beta": v * pbeta,
                   "verified": v * pj, "rounds": pj}  # fmt: skip
            for k in keys:
                tab[k][r] += now[k] + pj * tab[k][r - j - 1]
    return alpha, tab


@lru_cache(maxsize=32)
def true_acceptance(gamma: int, fam: Family, prompts: int = 200_000) -> AcceptanceTruth:
    """The truth: the expected sums given each prompt's α and budget (`_expected_sums`, exact up
    to the α grid's interpolation), averaged over many prompts drawn from the family (their
    Monte Carlo error ≈ 0.1 % of the value, far below any interval's width at the n calibrated)."""
    rng = np.random.default_rng(123456789)
    log_len, alpha = _prompts(rng, (1, prompts), fam)
    budget = _length(rng, log_len).astype(int).ravel()
    grid, tab = _expected_sums(gamma, fam.kappa)

    lo = np.clip(np.searchsorted(grid, alpha.ravel()) - 1, 0, len(grid) - 2)
    w = (alpha.ravel() - grid[lo]) / (grid[lo + 1] - grid[lo])

    def total(key: str) -> float:
        t = tab[key]
        return float(((1 - w) * t[budget, lo] + w * t[budget, lo + 1]).sum())

    return AcceptanceTruth(
        total("accepted") / total("drafted"),
        total("beta") / total("verified"),
        float(budget.sum()) / total("rounds"),
    )
