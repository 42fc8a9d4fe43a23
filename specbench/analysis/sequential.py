"""Always-valid intervals for the pooled speedup and the sequential ON/OFF rule (docs/theory.md §14).

The adaptive plan (`harness.adaptive`) looks at a workload's speedup after every prompt and stops
as soon as the verdict is settled. Checking a fixed-n interval after every prompt inflates the
false-ON rate (tests/unit/test_sequential.py measures 13–30 % against a nominal 2.5 %), so the
plan uses a **confidence sequence**: bounds that hold at every n at once, so they stay valid at a
data-dependent stopping time.

The speedup is a ratio of sums over prompts, log S = Σ_j c_j log Σ_u x_ju (docs/theory.md §7).
By the delta method, n·(log Ŝ_n − log S) ≈ Σ_u ζ_u with ζ_u = Σ_j c_j (x_ju − μ_j) / μ_j, a sum
of independent mean-zero terms of variance σ². For such a sum the one-sided **normal-mixture
boundary** (Robbins 1970; Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric,
nonasymptotic confidence sequences", Ann. Statist. 49; the one-sided, half-normal mixing form) gives

    P(∃ n: Σ_u ζ_u / σ ≥ b_α(n)) ≤ α,     b_α(n) = u*·√(n + ρ),

where u* solves log 2 − ½ log((n + ρ)/ρ) + log Φ(u) + u²/2 = log(1/α). σ is estimated as the
prompts arrive (the sd of the influences z_u = Σ_j c_j x_ju / m_j, as in §7); with the plug-in
σ̂ the sequence is asymptotically valid (Waudby-Smith, Arnold, Wu, Ramdas et al. 2024,
"Time-uniform central limit theory and asymptotic confidence sequences", Ann. Statist.). At the
few prompts a cell starts with σ̂ is itself noisy, so σ̂ is replaced by its one-sided upper
confidence limit σ̂·√((n−1)/χ²_{n−1, δ}) (δ = VAR_DELTA) and no decision is taken before
MIN_PROMPTS prompts; the simulation test measures the result at the boundary.

Decision (docs/theory.md §14): K candidate settings are measured directly, each with its own
sequence at level α/K (Bonferroni), so all K hold at once with probability ≥ 1 − α.
ON when some candidate's lower bound clears 1 + margin (the highest point speedup among those
that clear it is chosen); OFF when every candidate's upper bound lies below 1 + margin;
undecided otherwise.

Futility (docs/theory.md §14, "Stopping for futility"): from FUTILITY_FROM prompts on, a cell whose
prompts run out before an optimistic projection would exclude 1 + margin is stopped undecided
(`futile`, `settles_by`): the rule as it will be applied at the last prompt (σ̂ as now, at its
upper limit), with the estimate moved to the optimistic end of its one-sided FUTILITY_OPTIMISM
interval. It never turns a cell ON, and the sequence is
time-uniform, so the false-ON rate and the coverage at the (earlier) stopping time still hold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

from specbench.analysis.stats import THROUGHPUT_RATIO_COEFS

MIN_PROMPTS = 4  # no decision from fewer prompts: σ̂ of 2–3 prompts is too noisy to trust
VAR_DELTA = 0.1  # σ̂ is taken at its one-sided (1 − δ) upper confidence limit
MORE_CAP = 10_000  # "needs about N more prompts" is not estimated beyond this
ALPHA = 0.05  # all candidates' sequences hold at once with probability ≥ 1 − ALPHA (two-sided)
# The futility stop may end a cell from its 2nd prompt (σ̂ exists from 2), projecting the estimate
# at the far end of its one-sided 80 % t interval: chosen by simulation (docs/theory.md §14).
FUTILITY_FROM = 2
FUTILITY_OPTIMISM = 0.8


@lru_cache(maxsize=4096)
def mixture_quantile(ratio: float, alpha: float) -> float:
    """u* of the one-sided half-normal mixture boundary at (n + ρ)/ρ = `ratio`: the root of
    log 2 − ½ log(ratio) + log Φ(u) + u²/2 = log(1/α) (module docstring)."""
    target = math.log(1.0 / alpha)

    def excess(u: float) -> float:
        return (
            math.log(2.0) - 0.5 * math.log(ratio) + float(special.log_ndtr(u)) + u * u / 2 - target
        )

    return float(optimize.brentq(excess, 0.0, 100.0, xtol=1e-10))


def mixture_rho(n_opt: float, alpha: float) -> float:
    """The mixing precision ρ (in units of σ²) that makes the boundary tightest near n_opt
    prompts (the approximation of Howard et al. 2021); any ρ fixed in advance is valid."""
    la = 2.0 * math.log(1.0 / alpha)
    return max(n_opt, 1.0) / (la + math.log(1.0 + la))


def boundary_factor(n: np.ndarray | int, alpha: float, rho: float) -> np.ndarray:
    """b_α(n)/n: multiply by σ to get the one-sided half-width of log S at n prompts."""
    ns = np.atleast_1d(np.asarray(n, float))
    out = np.full(ns.shape, np.inf)
    for i, k in enumerate(ns):
        if k >= 1:
            out[i] = mixture_quantile(float((k + rho) / rho), alpha) * math.sqrt(k + rho) / k
    return out


def sigma_upper(sd: np.ndarray, n: np.ndarray, delta: float = VAR_DELTA) -> np.ndarray:
    """σ̂ at its one-sided (1 − δ) upper confidence limit, √((n−1)/χ²_{n−1,δ})·σ̂ (∞ at n < 2)."""
    n = np.asarray(n, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        chi = sps.chi2.ppf(delta, np.maximum(n - 1, 1))
        factor = np.where(n >= 2, np.sqrt(np.maximum(n - 1, 1) / chi), np.inf)
    return np.asarray(sd, float) * factor


def running_log_stat(
    arrays: Sequence[np.ndarray], coefs: Sequence[float] = THROUGHPUT_RATIO_COEFS
) -> tuple[np.ndarray, np.ndarray]:
    """log Ŝ_n and the sd of the influences z_u after each of the first n units, n = 1…N.

    `arrays[j]` has shape (…, N): units along the last axis, any leading (batch) axes. Returns
    two arrays of shape (…, N); sd is NaN at n = 1.
    """
    x = np.stack([np.asarray(a, float) for a in arrays], axis=-2)  # (…, J, N)
    c = np.asarray(coefs, float)
    n = np.arange(1, x.shape[-1] + 1, dtype=float)
    sums = np.cumsum(x, axis=-1)  # (…, J, N)
    cross = np.cumsum(x[..., :, None, :] * x[..., None, :, :], axis=-1)  # (…, J, J, N)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_s = np.einsum("j,...jn->...n", c, np.log(sums))
        a = c[:, None] / (sums / n)  # (…, J, N): c_j / m_j
        sum_z = np.einsum("...jn,...jn->...n", a, sums)
        sum_z2 = np.einsum("...in,...ijn,...jn->...n", a, cross, a)
        var = (sum_z2 - sum_z**2 / n) / (n - 1)
        sd = np.where(n >= 2, np.sqrt(np.maximum(var, 0.0)), np.nan)
    return log_s, sd


@dataclass(frozen=True)
class SequenceSettings:
    """How the sequences are built: the joint level, the number of candidates K they are split
    over (Bonferroni), the prompts n_opt the boundary is tuned for, and the decision margin."""

    margin: float = 0.05
    candidates: int = 1
    n_opt: int = 16
    alpha: float = ALPHA
    min_prompts: int = MIN_PROMPTS

    @property
    def side_alpha(self) -> float:
        """Each end of each candidate's sequence: α / (2K)."""
        return self.alpha / (2 * max(self.candidates, 1))

    @property
    def rho(self) -> float:
        return mixture_rho(self.n_opt, self.side_alpha)


def log_bounds(
    log_s: np.ndarray, sd: np.ndarray, n: np.ndarray, s: SequenceSettings
) -> tuple[np.ndarray, np.ndarray]:
    """The confidence sequence on the log scale at n prompts: (lower, upper) of log S."""
    half = sigma_upper(sd, n) * boundary_factor(n, s.side_alpha, s.rho).reshape(np.shape(n))
    half = np.where(np.isfinite(half), half, np.inf)
    return log_s - half, log_s + half


@dataclass(frozen=True)
class CandidateBound:
    """One candidate's sequence now: n prompts, point speedup and its always-valid interval."""

    label: str
    n: int
    speedup: float
    lo: float
    hi: float
    log_s: float = math.nan  # log Ŝ_n, and σ̂ of the influences at n (NaN before 2 prompts)
    sd: float = math.nan


@dataclass(frozen=True)
class SequentialDecision:
    """The state of a cell: "on" (with the chosen candidate), "off" or "undecided"."""

    state: str
    chosen: str | None
    bounds: list[CandidateBound]
    more_prompts: int | None  # undecided: about how many more prompts would settle it
    # undecided and not settled within the `remaining` prompts even optimistically (`futile`)
    futile: bool = False
    remaining: int | None = None  # the prompts the cell had left when decided (None: unknown)


def candidate_bound(
    label: str, arrays: Sequence[np.ndarray], s: SequenceSettings
) -> CandidateBound:
    """A candidate's sequence after all its paired prompts (arrays: tok_new, ms_new, tok_base,
    ms_base per prompt, as in `analysis.latency.Paired.arrays`)."""
    n = len(np.asarray(arrays[0]))
    if n == 0:
        return CandidateBound(label, 0, math.nan, 0.0, math.inf)
    log_s, sd = running_log_stat(arrays)
    lo, hi = log_bounds(log_s[-1:], sd[-1:], np.asarray([n]), s)
    return CandidateBound(
        label,
        n,
        math.exp(log_s[-1]),
        math.exp(lo[0]),
        math.exp(hi[0]),
        float(log_s[-1]),
        float(sd[-1]),
    )


def more_prompts_needed(b: CandidateBound, s: SequenceSettings, cap: int = MORE_CAP) -> int:
    """About how many more prompts until the sequence's half-width falls below the distance of
    the point estimate from 1 + margin (assuming the estimate and σ̂ = `b.sd` stay where they
    are; σ̂ at its upper limit, as the sequence takes it). The half-width falls with n (both
    factors do, tests/unit/test_sequential.py), so the first n below the gap is found by
    bisection."""
    gap = abs(math.log(b.speedup) - math.log1p(s.margin)) if b.speedup > 0 else 0.0
    sd = b.sd
    if not math.isfinite(sd) or gap <= 0:
        return cap

    def half(n: int) -> float:
        return float(sigma_upper(np.asarray(sd), np.asarray(n))) * float(
            boundary_factor(n, s.side_alpha, s.rho)[0]
        )

    lo, hi = max(b.n, s.min_prompts), cap
    if lo > cap or not half(cap) < gap:
        return cap
    while lo < hi:
        mid = (lo + hi) // 2
        if half(mid) < gap:
            hi = mid
        else:
            lo = mid + 1
    return lo - b.n


def optimism_shift(sd: np.ndarray, n_now: np.ndarray) -> np.ndarray:
    """How far the futility projection moves an estimate of log S, towards either side: to the
    far end of its one-sided FUTILITY_OPTIMISM Student-t interval, t_{n−1}·σ̂/√n. The projection
    asks whether the cell could settle were the truth there, not where the noisy estimate sits."""
    n_now = np.maximum(np.asarray(n_now, float), 2.0)
    return np.asarray(
        sps.t.ppf(FUTILITY_OPTIMISM, n_now - 1) * np.asarray(sd, float) / np.sqrt(n_now)
    )


def settles_by(
    log_s: np.ndarray, sd: np.ndarray, n_final: np.ndarray | int, s: SequenceSettings
) -> np.ndarray:
    """Whether each sequence would exclude 1 + margin by n_final prompts if its estimate log Ŝ
    and σ̂ stayed where they are (σ̂ at its upper limit, as the sequence will take it). b_α(n)/n
    and σ̂'s upper factor fall with n (tests/unit/test_sequential.py checks it), so the
    half-width at n_final is the smallest it reaches by then. False where σ̂ is unknown."""
    n_final = np.asarray(n_final)
    gap = np.abs(np.asarray(log_s, float) - math.log1p(s.margin))
    values, where = np.unique(n_final, return_inverse=True)
    factor = boundary_factor(values, s.side_alpha, s.rho)[where].reshape(n_final.shape)
    with np.errstate(invalid="ignore"):
        half = sigma_upper(np.asarray(sd, float), n_final) * factor
        return np.isfinite(half) & (half < gap) & (n_final >= s.min_prompts)


def futile(
    log_s: np.ndarray,
    sd: np.ndarray,
    n_now: np.ndarray | int,
    n_final: np.ndarray | int,
    s: SequenceSettings,
) -> np.ndarray:
    """Whether the cell cannot be decided by n_final prompts even optimistically; candidates
    along the last axis, n_now the prompts each has. A candidate could end ON if its estimate
    moved up by `optimism_shift` lies above the line and settles by n_final (`settles_by`), OFF
    if moved down it lies at or below the line and settles; one without σ̂ yet (fewer than 2
    usable prompts) could end either way if n_final reaches MIN_PROMPTS. Futile when no
    candidate could end ON and not every one could end OFF (as `decide`'s "needs about N
    more")."""
    log_s = np.asarray(log_s, float)
    sd = np.asarray(sd, float)
    n_final = np.broadcast_to(np.asarray(n_final), log_s.shape)
    n_now = np.broadcast_to(np.asarray(n_now), log_s.shape)
    unknown = ~np.isfinite(sd) & (n_final >= s.min_prompts)
    shift = optimism_shift(sd, n_now)
    can_on = settles_by(log_s + shift, sd, n_final, s) & (log_s + shift > math.log1p(s.margin))
    can_off = settles_by(log_s - shift, sd, n_final, s) & (log_s - shift <= math.log1p(s.margin))
    return ~(can_on | unknown).any(axis=-1) & ~(can_off | unknown).all(axis=-1)


def decide(
    candidates: dict[str, Sequence[np.ndarray]],
    s: SequenceSettings,
    remaining: int | None = None,
) -> SequentialDecision:
    """The sequential verdict over the candidates measured so far (module docstring). With
    `remaining` (the prompts the cell has left; the caller passes it once the cell has measured
    FUTILITY_FROM prompts), an undecided verdict is marked `futile` when those prompts cannot
    settle it even optimistically (`futile`)."""
    bounds = [candidate_bound(k, arr, s) for k, arr in candidates.items()]
    line = 1.0 + s.margin
    ready = [b for b in bounds if b.n >= s.min_prompts]
    clearing = [b for b in ready if b.lo > line]
    if clearing:
        best = max(clearing, key=lambda b: b.speedup)
        return SequentialDecision("on", best.label, bounds, None)
    if bounds and len(ready) == len(bounds) and all(b.hi < line for b in bounds):
        return SequentialDecision("off", None, bounds, None)
    # ON needs one candidate above the line to clear it; OFF needs every candidate below it
    above = [i for i, b in enumerate(bounds) if b.speedup > line]
    sides = above if above else list(range(len(bounds)))
    need = [
        more_prompts_needed(bounds[i], s)
        for i in sides
        if bounds[i].n >= 2 and math.isfinite(bounds[i].speedup)
    ]
    more = (min(need) if above else max(need)) if need else None
    stop = False
    if bounds and remaining is not None and remaining > 0:
        log_s = np.asarray([b.log_s for b in bounds])
        sds = np.asarray([b.sd for b in bounds])
        ns = np.asarray([b.n for b in bounds])
        stop = bool(futile(log_s, sds, ns, ns + remaining, s))
    return SequentialDecision("undecided", None, bounds, more, stop, remaining)
