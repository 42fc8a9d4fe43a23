"""The one resampling layer: intervals over prompts, selection-aware lower bounds, sample sizes.

Every statistic specbench prints is a product of powers of sums over independent units,

    S = Π_j (Σ_u x_ju)^{c_j}        (docs/theory.md §7)

— a mean is (Σ x)/(Σ 1), an acceptance rate Σ β / Σ positions, a speedup of pooled throughput
(Σ tokens_spec / Σ ms_spec) / (Σ tokens_base / Σ ms_base). The unit is the prompt (tokens of one
prompt are correlated); repeats of a prompt are summed into one cluster before resampling, so a
prompt measured three times still counts once.

Intervals are **symmetric studentized bootstrap intervals on the log scale** (bootstrap-t with the
delta-method standard error of log S, influence z_u = Σ_j c_j x_ju / mean(x_j)). The percentile
bootstrap and scipy's BCa under-cover at specbench's sizes (n = 8: 0.85–0.88 for a ratio of means,
for a lognormal mean), while the log-scale bootstrap-t reaches 0.93–0.96 at n = 8, 16, 32 (tests/unit/test_calibration.py asserts it;
benchmarks/bench_calibration.py prints the full table). scipy.stats.bootstrap offers no
studentized method, which is why this one is written here; the generic `bootstrap` for any other
statistic does use scipy's BCa.

Replicates are multinomial resample counts drawn in blocks, so memory stays O(block × units) on
logs of any size; a fixed seed makes `specbench report` reproduce identical numbers.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

DEFAULT_SEED = 20240101
MAX_BOOT = 100_000  # resamples a user may ask for (memory and minutes stay bounded)
_BLOCK_CELLS = 4_000_000  # resample counts held at once (block × units)


@dataclass(frozen=True)
class Estimate:
    value: float
    lo: float
    hi: float

    @property
    def halfwidth(self) -> float:
        return (self.hi - self.lo) / 2

    def as_dict(self) -> dict[str, object]:
        return {"value": self.value, "ci95": [self.lo, self.hi]}


NAN_ESTIMATE = Estimate(math.nan, math.nan, math.nan)


def cluster_sums(
    arrays: Sequence[np.ndarray], clusters: Sequence[object] | None
) -> list[np.ndarray]:
    """Sum each array within clusters (repeats of a prompt): the resampling unit is the cluster."""
    arrs = [np.asarray(a, float) for a in arrays]
    if clusters is None:
        return arrs
    _, codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    k = int(codes.max()) + 1 if len(codes) else 0
    return [np.bincount(codes, weights=a, minlength=k) for a in arrs]


@dataclass(frozen=True)
class Replicates:
    """Point log-statistics, their standard errors and bootstrap replicates for K candidates that
    share units (resampled jointly, so their correlation is kept)."""

    log_value: np.ndarray  # (K,) log S_k
    se: np.ndarray  # (K,) delta-method standard error of log S_k
    boot_log: np.ndarray  # (B, K)
    boot_se: np.ndarray  # (B, K)

    @property
    def n_candidates(self) -> int:
        return len(self.log_value)


def _log_stat_and_se(
    sums: np.ndarray, cross: np.ndarray, coefs: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """log S and se(log S) from weighted sums (…, J) and cross-products (…, J, J) over n units.

    z_u = Σ_j c_j x_ju / m_j with m_j = mean x_j; Var(z) from Σ w z and Σ w z² (docs/theory.md §7).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        means = sums / n
        log_s = (np.log(sums) * coefs).sum(axis=-1)
        a = coefs / means  # (…, J)
        sum_z = (a * sums).sum(axis=-1)
        sum_z2 = np.einsum("...j,...jk,...k->...", a, cross, a)
        var = (sum_z2 - sum_z**2 / n) / (n - 1)
        se = np.sqrt(np.maximum(var, 0.0) / n)
    return log_s, se


def log_linear_replicates(
    candidates: Sequence[Sequence[np.ndarray]],
    coefs: Sequence[float],
    n_boot: int = 2000,
    seed: int = DEFAULT_SEED,
) -> Replicates:
    """Bootstrap replicates of log S_k = Σ_j c_j log Σ_u x_kju for each candidate k.

    `candidates[k][j]` is the per-unit array x_kj; every array has the same units in the same
    order (one prompt each). Units are resampled jointly for all candidates.
    """
    c = np.asarray(coefs, float)
    x = np.stack([np.stack([np.asarray(a, float) for a in cand]) for cand in candidates])  # K,J,n
    k_count, _, n = x.shape
    n_boot = min(int(n_boot), MAX_BOOT)
    ones = np.ones(n)
    sums0 = x.sum(axis=-1)
    cross0 = np.einsum("kiu,kju->kij", x, x)
    log0, se0 = _log_stat_and_se(sums0, cross0, c, n)
    if n < 2:
        empty = np.full((0, k_count), np.nan)
        return Replicates(log0, np.full(k_count, np.nan), empty, empty)
    rng = np.random.default_rng(seed)
    block = max(1, min(n_boot, _BLOCK_CELLS // max(n, 1)))
    logs, ses = [], []
    for start in range(0, n_boot, block):
        w = rng.multinomial(n, ones / n, size=min(block, n_boot - start)).astype(float)  # (b, n)
        sums = np.einsum("bu,kju->bkj", w, x)
        cross = np.einsum("bu,kiu,kju->bkij", w, x, x)
        lb, sb = _log_stat_and_se(sums, cross, c, n)
        logs.append(lb)
        ses.append(sb)
    return Replicates(log0, se0, np.concatenate(logs), np.concatenate(ses))


SE_FLOOR = 0.5  # a resample's standard error counts as at least this share of the sample's


def _studentized(rep: Replicates) -> np.ndarray:
    """(B, K) bootstrap-t statistics T* = (log S* − log S) / max(se*, SE_FLOOR·se).

    The floor: a resample that happens to leave out the sample's outliers has an se* far below
    the truth, and its T* would be huge — with one outlying prompt in eight, a third of the
    resamples do that and the plain bootstrap-t interval of an acceptance rate of 0.81 ran down
    to 0.03. Flooring se* at half the sample's se keeps those resamples from dominating the
    quantile while leaving well-behaved data untouched (se* < se/2 is rare there); the measured
    coverage (docs/theory.md §7) is with the floor. A resample whose statistic leaves the scale
    (a rate of exactly 0 or 1 on the log or logit scale) is an extreme move, ±inf: at tiny n such
    resamples make the interval honestly unbounded instead of being dropped.
    """
    diff = rep.boot_log - rep.log_value
    floor = SE_FLOOR * np.where(np.isfinite(rep.se), rep.se, 0.0)
    se = np.maximum(rep.boot_se, floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / se
        t = np.where(se == 0.0, np.where(diff == 0.0, 0.0, np.sign(diff) * np.inf), t)
        t = np.where(np.isinf(diff), diff, t)
    return np.where(np.isnan(diff), np.nan, t)


def symmetric_quantiles(rep: Replicates, level: float) -> np.ndarray:
    """Per candidate, the `level` quantile of |T*| (the half-width in standard errors)."""
    t = np.abs(_studentized(rep))
    out = []
    for k in range(rep.n_candidates):
        col = t[:, k]
        col = col[~np.isnan(col)]
        out.append(float(np.quantile(col, level, method="higher")) if len(col) else math.nan)
    return np.asarray(out)


def _logit_scale(rep: Replicates) -> Replicates:
    """The same replicates on the logit scale, for proportions: logit S = log S − log(1 − S),
    se_logit = se_log / (1 − S) (delta method)."""
    with np.errstate(divide="ignore", invalid="ignore"):

        def logit(log_s: np.ndarray) -> np.ndarray:
            return log_s - np.log1p(-np.exp(log_s))

        def scale(log_s: np.ndarray, se: np.ndarray) -> np.ndarray:
            return se / (1.0 - np.exp(log_s))

        return Replicates(
            logit(rep.log_value),
            scale(rep.log_value, rep.se),
            logit(rep.boot_log),
            scale(rep.boot_log, rep.boot_se),
        )


def _symmetric_interval(rep: Replicates, level: float, proportion: bool) -> tuple[float, float]:
    log_s, se = float(rep.log_value[0]), float(rep.se[0])
    if not (math.isfinite(log_s) and math.isfinite(se)):
        return math.nan, math.nan
    if se == 0.0:
        return math.exp(log_s), math.exp(log_s)
    if proportion:
        rep = _logit_scale(rep)
        log_s, se = float(rep.log_value[0]), float(rep.se[0])
        if not (math.isfinite(log_s) and math.isfinite(se)):
            return math.nan, math.nan
    q = float(symmetric_quantiles(rep, level)[0])
    if math.isnan(q):
        return math.nan, math.nan
    lo, hi = log_s - q * se, log_s + q * se
    with np.errstate(over="ignore"):  # a huge upper end (tiny n, wild data) is +inf, not an error
        if proportion:
            return float(1.0 / (1.0 + np.exp(-lo))), float(1.0 / (1.0 + np.exp(-hi)))
        return float(np.exp(lo)), float(np.exp(hi))


def log_linear_ci(
    arrays: Sequence[np.ndarray],
    coefs: Sequence[float],
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
    clusters: Sequence[object] | None = None,
    proportion: bool = False,
) -> Estimate:
    """S = Π_j (Σ x_j)^{c_j} with its symmetric log-scale bootstrap-t interval (module docstring);
    `proportion` (S in [0, 1], e.g. an acceptance rate) uses the logit scale instead, so the
    interval stays inside [0, 1] at any size."""
    arrs = cluster_sums(arrays, clusters)
    n = len(arrs[0])
    if n == 0:
        return NAN_ESTIMATE
    rep = log_linear_replicates([arrs], coefs, n_boot, seed)
    value = math.exp(float(rep.log_value[0])) if math.isfinite(rep.log_value[0]) else math.nan
    if math.isnan(value):
        # S = 0 (nothing accepted): no resample can move it and the log scale cannot hold it;
        # the data bound it below by 0 and give no honest upper end at this size.
        numerators = [float(a.sum()) for a, cj in zip(arrs, coefs, strict=True) if cj > 0]
        return Estimate(0.0, 0.0, math.nan) if 0.0 in numerators else NAN_ESTIMATE
    if n < 2:
        return Estimate(value, math.nan, math.nan)
    lo, hi = _symmetric_interval(rep, level, proportion)
    return Estimate(value, lo, hi)


def ratio_ci(
    numerator: np.ndarray,
    denominator: np.ndarray,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
    clusters: Sequence[object] | None = None,
) -> Estimate:
    """Σ numerator / Σ denominator (accepted / proposed pooled over prompts), resampling prompts."""
    return log_linear_ci([numerator, denominator], (1.0, -1.0), n_boot, level, seed, clusters)


def proportion_ci(
    numerator: np.ndarray,
    denominator: np.ndarray,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
    clusters: Sequence[object] | None = None,
) -> Estimate:
    """Σ numerator / Σ denominator for a rate in [0, 1] (numerator ≤ denominator per unit: α,
    acceptance, agreement), with the interval on the logit scale."""
    return log_linear_ci(
        [numerator, denominator], (1.0, -1.0), n_boot, level, seed, clusters, proportion=True
    )


def mean_ci(
    values: np.ndarray,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
    clusters: Sequence[object] | None = None,
) -> Estimate:
    """Mean of positive per-unit values (latencies, rates) with its interval."""
    v = np.asarray(values, float)
    return ratio_ci(v, np.ones_like(v), n_boot, level, seed, clusters)


def ratio_of_means_ci(
    top: np.ndarray,
    bottom: np.ndarray,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
    clusters: Sequence[object] | None = None,
) -> Estimate:
    """mean(top) / mean(bottom), paired by unit (e.g. tokens/s of spec ÷ baseline per prompt)."""
    return ratio_ci(top, bottom, n_boot, level, seed, clusters)


# Speedup of pooled decode throughput: (Σ tok_spec / Σ ms_spec) / (Σ tok_base / Σ ms_base).
THROUGHPUT_RATIO_COEFS = (1.0, -1.0, -1.0, 1.0)


def throughput_ratio_ci(
    tokens_new: np.ndarray,
    ms_new: np.ndarray,
    tokens_base: np.ndarray,
    ms_base: np.ndarray,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
    clusters: Sequence[object] | None = None,
) -> Estimate:
    """Pooled tokens/s of one side over the other's, paired by prompt (docs/theory.md §7)."""
    return log_linear_ci(
        [tokens_new, ms_new, tokens_base, ms_base],
        THROUGHPUT_RATIO_COEFS,
        n_boot,
        level,
        seed,
        clusters,
    )


def simultaneous_lower(rep: Replicates, level: float) -> tuple[np.ndarray, float]:
    """Lower bounds exp(log S_k − c·se_k) that hold for all K candidates at once, each at the
    one-sided confidence of a two-sided `level` interval's lower end ((1 + level)/2: 0.975).

    c is the (1 + level)/2 quantile of the bootstrap max-statistic max_k |T*_k| (T* the
    studentized replicate), so P(any S_k below its bound) ≤ P(max_k |T_k| > c) = (1 − level)/2
    whatever the shape of T's distribution, however many candidates there are and however one of
    them was chosen (max-T; docs/theory.md §8). Using |T| rather than T keeps each bound at or
    below that candidate's own printed interval. Returns (bounds, c).
    """
    t = np.abs(_studentized(rep))
    if t.size == 0:
        return np.full(rep.n_candidates, np.nan), math.nan
    m = np.max(np.where(np.isnan(t), -np.inf, t), axis=1)
    m = m[m > -np.inf]
    if len(m) == 0:
        return np.full(rep.n_candidates, np.nan), math.nan
    c = float(np.quantile(m, 1.0 - (1.0 - level) / 2.0, method="higher"))
    with np.errstate(invalid="ignore", over="ignore"):
        bounds = np.exp(rep.log_value - c * rep.se)
    bounds = np.where(rep.se == 0.0, np.exp(rep.log_value), bounds)
    return bounds, c


def bootstrap(
    statistic: Callable[..., np.ndarray],
    arrays: list[np.ndarray],
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """BCa interval (scipy.stats.bootstrap, paired over units) for any other statistic, e.g. a
    difference of rates that may be negative.

    `statistic(*arrays)` takes arrays with a leading resample axis, shape (B, n), and returns (B,).
    """
    arrs = [np.asarray(a, float) for a in arrays]
    n = len(arrs[0])
    if n == 0:
        return NAN_ESTIMATE
    value = float(statistic(*[a[None, :] for a in arrs])[0])
    if n < 2 or not math.isfinite(value):
        return Estimate(value, math.nan, math.nan)

    def stat(*xs: np.ndarray, axis: int = -1) -> np.ndarray:
        shape = xs[0].shape[:-1]
        flat = [x.reshape(-1, x.shape[-1]) for x in xs]
        return np.asarray(statistic(*flat)).reshape(shape)

    with np.errstate(all="ignore"), warnings.catch_warnings():
        # degenerate data (no spread) is handled below; scipy's warning would reach the user
        warnings.simplefilter("ignore")
        res = sps.bootstrap(
            tuple(arrs),
            stat,
            paired=True,
            vectorized=True,
            n_resamples=min(int(n_boot), MAX_BOOT),
            confidence_level=level,
            method="BCa",
            rng=np.random.default_rng(seed),
        )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):  # degenerate data (no spread)
        return (
            Estimate(value, value, value)
            if np.allclose(res.bootstrap_distribution, value)
            else (Estimate(value, math.nan, math.nan))
        )
    return Estimate(value, lo, hi)


def coefficient_of_variation(values: np.ndarray) -> float:
    v = np.asarray(values, float)
    if len(v) < 2 or v.mean() == 0:
        return math.nan
    return float(v.std(ddof=1) / abs(v.mean()))


def prompts_needed(n_now: int, halfwidth_now: float, target_halfwidth: float) -> int:
    """Prompts needed for a target CI half-width: half-width shrinks as 1/√n."""
    if not math.isfinite(halfwidth_now) or halfwidth_now <= target_halfwidth:
        return n_now
    return math.ceil(n_now * (halfwidth_now / target_halfwidth) ** 2)
