"""The statistics of `specbench verify` (pure numpy/scipy): is a sampled token stream the target's?

Exact speculative sampling emits, at every position j of a round (1..γ+1, the last one being the
bonus token), a token distributed as the target's p(· | context, e_1..e_{j−1}) given the tokens
emitted before it in the round (docs/theory.md §1): whether the round reached position j depends
only on those earlier tokens and their accept coins. So each position is tested on the rounds
that reached it, conditional on their own prefix:

- position 1 (one prefix: the context): Pearson χ² of the token counts against p
  (`goodness_of_fit`);
- positions j ≥ 2 (many prefixes): the randomized probability integral transform
  u = P(token ranked above e_j) + V·p(e_j), V ~ U(0, 1), tokens ranked by descending p of their
  own prefix; under exact sampling every u is U(0, 1) and independent across rounds, whatever the
  prefix, so the rounds pool into one χ² test of uniformity over equal-width bins (`pit_test`).
  A token drawn from the wrong row or the wrong distribution lands low in p's ranking (u near 1),
  one drawn from a sharpened p lands high (u near 0): both tails are tested.

All tests of a verify run form one family: Bonferroni at the family-wise `significance` (0.001 by
default). For a pass/fail verdict Holm rejects exactly when Bonferroni does, so the simpler one is
kept. `null_false_fail_rate` checks the family's false-fail rate on a synthetic exact sampler.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_EXPECTED = 5.0  # χ² bins: tokens with at least this expected count; the rest pooled
MIN_POSITION_SAMPLES = 50  # a later position is tested when at least this many rounds reached it
MAX_PIT_BINS = 20
PIT_PER_BIN = 10  # expected samples per uniformity bin


@dataclass(frozen=True)
class FitTest:
    """A χ² goodness-of-fit test of n sampled tokens against a distribution p."""

    n: int
    chi2: float
    dof: int  # 0: p puts (almost) all its mass on one bin, nothing to test
    p_value: float
    tv: float  # ½ Σ |count/n − p|
    tv_bound: float  # ½ Σ √(p(1 − p)/n) ≥ E[TV] under exact sampling
    impossible: int  # samples of tokens with p = 0 (fail outright)


def goodness_of_fit(
    counts: np.ndarray, p: np.ndarray, min_expected: float = MIN_EXPECTED
) -> FitTest:
    """χ² test of observed token counts (V,) against probabilities p (V,).

    Bins: every token with expected count n·p ≥ `min_expected`, plus one bin pooling the rest
    (merged into the smallest regular bin when its own expected count is below `min_expected`).
    One bin left means dof 0: p is (almost) deterministic there and nothing is tested. A sampled
    token with p = 0 makes the p-value 0.
    """
    counts = np.asarray(counts, dtype=float)
    p = np.asarray(p, dtype=float)
    p = p / p.sum()
    n = int(counts.sum())
    if n == 0:
        return FitTest(0, math.nan, 0, 1.0, math.nan, math.nan, 0)
    impossible = int(counts[p <= 0].sum())
    tv = 0.5 * float(np.abs(counts / n - p).sum())
    tv_bound = 0.5 * float(np.sqrt(p * (1 - p) / n).sum())
    expected = p * n
    big = expected >= min_expected
    obs = list(counts[big])
    exp = list(expected[big])
    rest_exp, rest_obs = float(expected[~big].sum()), float(counts[~big].sum())
    if rest_exp >= min_expected or not obs:
        obs.append(rest_obs)
        exp.append(rest_exp)
    elif rest_exp > 0:  # a too-small pooled bin joins the smallest regular bin
        j = int(np.argmin(exp))
        obs[j] += rest_obs
        exp[j] += rest_exp
    dof = len(obs) - 1
    if impossible:
        return FitTest(n, math.inf, max(dof, 1), 0.0, tv, tv_bound, impossible)
    if dof < 1:
        return FitTest(n, 0.0, 0, 1.0, tv, tv_bound, 0)
    res = stats.chisquare(np.asarray(obs), np.asarray(exp))
    return FitTest(n, float(res.statistic), dof, float(res.pvalue), tv, tv_bound, 0)


@dataclass(frozen=True)
class PositionTest:
    """Position j ≥ 2 of a round: the PIT of every round that reached it, tested for uniformity."""

    position: int  # 1-based emitted position in the round
    n: int  # rounds that reached it
    prefixes: int  # distinct prefixes e_1..e_{j−1} among them
    bins: int  # 0: too few rounds, not tested
    chi2: float
    p_value: float
    mean_u: float  # 0.5 under exact sampling; near 1: tokens the target thinks unlikely
    impossible: int  # tokens with p = 0 at their prefix (fail outright)

    @property
    def tested(self) -> bool:
        return self.bins >= 2


def pit_values(p: np.ndarray, tokens: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Randomized PIT of `tokens` (k,) under p (V,), tokens ranked by descending p (ties by id)."""
    p = np.asarray(p, float)
    p = p / p.sum()
    order = np.argsort(-p, kind="stable")
    rank = np.empty(len(p), int)
    rank[order] = np.arange(len(p))
    above = np.concatenate([[0.0], np.cumsum(p[order])])  # mass ranked strictly above
    tokens = np.asarray(tokens, int)
    return np.asarray(above[rank[tokens]] + rng.random(len(tokens)) * p[tokens], float)


def pit_test(
    position: int,
    groups: list[tuple[np.ndarray, np.ndarray]],
    rng: np.random.Generator,
    min_samples: int = MIN_POSITION_SAMPLES,
) -> PositionTest:
    """Pooled uniformity test of the PIT over groups (p at a prefix (V,), tokens emitted there)."""
    us = [pit_values(p, t, rng) for p, t in groups if len(t)]
    impossible = sum(int((np.asarray(p)[np.asarray(t, int)] <= 0).sum()) for p, t in groups)
    u = np.concatenate(us) if us else np.zeros(0)
    n = len(u)
    mean_u = float(u.mean()) if n else math.nan
    if impossible:
        return PositionTest(position, n, len(groups), 2, math.inf, 0.0, mean_u, impossible)
    bins = min(MAX_PIT_BINS, n // PIT_PER_BIN)
    if n < min_samples or bins < 2:
        return PositionTest(position, n, len(groups), 0, math.nan, 1.0, mean_u, 0)
    counts = np.bincount(np.minimum((u * bins).astype(int), bins - 1), minlength=bins)
    res = stats.chisquare(counts)  # equal expected counts n / bins
    return PositionTest(
        position, n, len(groups), bins, float(res.statistic), float(res.pvalue), mean_u, 0
    )


def bonferroni(p_values: list[float], significance: float) -> tuple[float, bool]:
    """(smallest Bonferroni-adjusted p-value, whether every test passes at `significance`)."""
    if not p_values:
        return 1.0, True
    adjusted = min(1.0, min(p_values) * len(p_values))
    return adjusted, adjusted >= significance


# ---------------------------------------------------------------------------------------------
# calibration: a synthetic exact sampler


def _toy_p(prefix: tuple[int, ...], vocab: int, seed: int) -> np.ndarray:
    """A fixed random 'target' distribution per prefix (deterministic in prefix and seed)."""
    key = zlib.crc32(np.asarray((seed, *prefix), np.int64).tobytes())
    logits = 2.0 * np.random.default_rng(key).standard_normal(vocab)
    e = np.exp(logits - logits.max())
    return np.asarray(e / e.sum(), float)


def _simulated_family(
    rng: np.random.Generator, contexts: int, samples: int, gamma: int, vocab: int, fault: bool
) -> list[float]:
    """p-values of one synthetic verify run: per context, position 1's χ² and positions 2..γ+1.

    Rounds are drawn position by position from the toy p of their prefix and continue past a
    token with probability min(1, 0.6 + 2·p(token)) (a stand-in for acceptance, which depends on the
    tokens), up to γ + 1 tokens: the null the tests assume, drawn without the code under test.
    `fault`: the last position (the bonus) is drawn from the previous prefix's p instead.
    """
    out: list[float] = []
    for c in range(contexts):
        base = (int(rng.integers(2**31)), c)
        p1 = _toy_p(base, vocab, 0)
        level: dict[tuple[int, ...], int] = {base: samples}  # prefix → rounds that reached it
        first = np.zeros(vocab)
        for j in range(1, gamma + 2):
            groups: list[tuple[np.ndarray, np.ndarray]] = []
            nxt: dict[tuple[int, ...], int] = {}
            for prefix, n in level.items():
                p = _toy_p(prefix, vocab, 0)
                drawn = p if not (fault and j == gamma + 1) else _toy_p(prefix[:-1], vocab, 0)
                counts = rng.multinomial(n, drawn)
                toks = np.repeat(np.arange(vocab), counts)
                if j == 1:
                    first += counts
                else:
                    groups.append((p, toks))
                for t in np.flatnonzero(counts):
                    go = int(rng.binomial(counts[t], min(1.0, 0.6 + 2 * p[t])))
                    if go:
                        nxt[(*prefix, int(t))] = go
            if j >= 2:
                test = pit_test(j, groups, rng)
                if test.tested:
                    out.append(test.p_value)
            level = nxt
        fit = goodness_of_fit(first, p1)
        if fit.dof >= 1:
            out.append(fit.p_value)
    return out


def null_false_fail_rate(
    n_rep: int,
    seed: int = 0,
    significance: float = 0.001,
    contexts: int = 8,
    samples: int = 2000,
    gamma: int = 4,
    vocab: int = 64,
    fault: bool = False,
) -> tuple[float, float]:
    """(P(verify's family fails), Monte Carlo standard error) on a synthetic exact sampler (or,
    with `fault`, one whose bonus token comes from the wrong row: then this is the power)."""
    rng = np.random.default_rng(seed)
    fails = 0
    for _ in range(n_rep):
        pv = _simulated_family(rng, contexts, samples, gamma, vocab, fault)
        fails += not bonferroni(pv, significance)[1]
    rate = fails / n_rep
    return rate, math.sqrt(max(rate * (1 - rate), 1e-12) / n_rep)
