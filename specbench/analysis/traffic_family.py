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


def spec_time(
    rng: np.random.Generator, alpha: np.ndarray, tokens: np.ndarray, gamma: int, kappa: float
) -> np.ndarray:
    """Time (baseline steps) to emit `tokens` at γ, round by round, with the end-of-budget cap."""
    alpha = np.clip(alpha, 0.02, 0.98)
    a, b = kappa * alpha, kappa * (1.0 - alpha)
    made = np.zeros(tokens.shape)
    time = np.zeros(tokens.shape)
    active = made < tokens
    while active.any():
        cap = np.minimum(gamma, np.maximum(tokens - made - 1, 0))
        ok = rng.random((*tokens.shape, gamma)) < rng.beta(a, b)[..., None]
        run = np.argmin(np.concatenate([ok, np.zeros((*tokens.shape, 1), bool)], -1), -1)
        accepted = np.minimum(run, cap)
        made += np.where(active, accepted + 1, 0)
        time += np.where(active, _round_cost(cap), 0.0)
        active = made < tokens
    return time


def draw(
    rng: np.random.Generator, reps: int, n: int, gammas: tuple[int, ...], fam: Family
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(tok_base, ms_base) of shape (reps, n) and (tok_spec, ms_spec) of shape (K, reps, n)."""
    shape = (reps, n)
    lo, hi = math.log(LENGTHS[0]), math.log(LENGTHS[1])
    cost = rng.lognormal(0.0, fam.cost_sigma, shape)
    log_len = rng.uniform(lo, hi, shape)
    z = (log_len - (lo + hi) / 2) / ((hi - lo) / math.sqrt(12.0))
    mix = fam.length_corr * z + math.sqrt(1 - fam.length_corr**2) * rng.standard_normal(shape)
    alpha = np.clip(fam.alpha_mean + fam.alpha_sd * mix, 0.05, 0.95)

    def length() -> np.ndarray:
        return np.clip(np.round(np.exp(log_len + rng.normal(0.0, 0.3, shape))), 2, LENGTHS[1])

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
