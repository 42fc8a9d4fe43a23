"""The adaptive plan's sequential ON/OFF rule: a small group-sequential design on the sign-flip test
(docs/theory.md §14).

The adaptive plan (`harness.transformers.adaptive`) looks at a cell after every prompt and stops as soon as its
verdict is settled. A fixed-n test checked after every prompt is not valid at a data-dependent
stopping time (it decides ON at the line far more often than its level: `analysis.
sequential_calibration` measures it), so the verdict is taken only at a few **looks** fixed
before any data, each an exact test:

- **Looks.** The schedule 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, … prompts, capped at the cell's
  prompt cap n_max (`SequenceSettings.n_max`, the records' `plan_prompts`), n_max itself the last
  look.
- **Level.** Each side (ON, OFF) is one-sided at α_side = (1 − ci_level)/2, split equally over the
  L looks (Bonferroni, α_look = α_side / L); a look below the sign-flip test's resolution at
  α_look (`signflip.min_prompts`) could never reject and is dropped, and L recomputed until no
  look is dropped (an 8-prompt cap is one look at 8 with the full 2.5 %). By the union bound,
  P(ON at any look | every true speedup ≤ 1 + margin) ≤ Σ α_look = α_side whatever the
  dependence between the looks; each look's test is exact for pivots symmetric about zero
  (`analysis.stats.signflip`), so the estimated scale plays no part in the error rate.
- **Unknown cap** (records without `plan_prompts`, no `adaptive.max_prompts`): the looks run over
  the whole schedule with α-spending α_j = α_side / ((j + 1)² (π²/6 − 1)), j = 1, 2, … (summing to
  α_side), leading looks below their test's resolution dropped first.
- **Verdict at m prompts** (the first m units common to every candidate): `signflip.decide` on the
  first `look` units for the last look ≤ m, at α_look, over all K measured candidates (max-T for
  ON, so the choice of the best is covered; intersection-union for OFF). Between looks the verdict
  is the last look's. Bounds: that test inverted (`signflip.decide`), an unbounded end printed as
  0 or ∞.
- **"Needs about N more prompts"**: the first later look at which a true effect as large as the
  current estimate's distance from the line would be decided with 80 % power (`signflip`'s power
  formula at the look's α and K: the ON side at α/K over the candidates, OFF at α each), minus m;
  beyond the last look, `signflip.prompts_for_power` at the last look's α. MORE_CAP when the
  estimate sits on the line; None without two usable prompts.
- **Futility** (`adaptive.futility`): with M prompts left, a cell is futile when no look lies in
  (m, m + M] (a certainty), or when even an optimistic projection — each candidate's
  estimate moved away from the line to the far end of its one-sided FUTILITY_OPTIMISM Student-t
  interval — would still not clear the bound of any look ≤ m + M were it to stay there (σ̂ as
  now). It never turns a cell ON or OFF, so the error rates can only fall.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import stats as sps

from specbench.analysis.stats import signflip
from specbench.analysis.stats.signflip import RatioPivots, throughput_pivots

ALPHA = 0.05  # two-sided: each side (ON, OFF) is a one-sided test at ALPHA / 2 over all looks
MIN_PROMPTS = signflip.min_prompts(ALPHA / 2)  # no look before the test's resolution (6)
MORE_CAP = signflip.MORE_CAP  # "needs about N more prompts" is not estimated beyond this
# The futility stop may end a cell from its 2nd prompt (σ̂ exists from 2), projecting the estimate
# at the far end of its one-sided 80 % t interval (docs/theory.md §14).
FUTILITY_FROM = 2
FUTILITY_OPTIMISM = 0.8
SPENDING_SUM = math.pi**2 / 6 - 1  # Σ_{j ≥ 1} 1/(j + 1)²


def schedule(limit: int) -> list[int]:
    """The look schedule up to `limit`: 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, …"""
    out = [6] if limit >= 6 else []
    a = 8
    while a <= limit:
        out += [a] + ([a * 3 // 2] if a * 3 // 2 <= limit else [])
        a *= 2
    return out


@dataclass(frozen=True)
class Look:
    """One look: the prompts it rests on and its one-sided level (each side)."""

    n: int
    alpha: float


@lru_cache(maxsize=256)
def design(n_max: int | None, side_alpha: float) -> tuple[Look, ...]:
    """The looks of a cell capped at n_max prompts (module docstring); empty when not even n_max
    prompts could reject at α_side (fewer than 6 at 2.5 %)."""
    if n_max is not None:
        ns = [n for n in schedule(n_max) if n < n_max] + [n_max]
        while ns:
            keep = [n for n in ns if n >= signflip.min_prompts(side_alpha / len(ns))]
            if keep == ns:
                return tuple(Look(n, side_alpha / len(ns)) for n in ns)
            ns = keep
        return ()
    ns = schedule(MORE_CAP)
    while ns:
        alphas = [side_alpha / ((j + 2) ** 2 * SPENDING_SUM) for j in range(len(ns))]
        if ns[0] >= signflip.min_prompts(alphas[0]):
            return tuple(Look(n, a) for n, a in zip(ns, alphas, strict=True))
        ns = ns[1:]
    return ()


@dataclass(frozen=True)
class SequenceSettings:
    """The design's inputs: the decision margin, the plan's cap on candidates (reported; the test's
    K is the candidates measured), the two-sided level and the cell's prompt cap (None: unknown,
    α-spending over the whole schedule)."""

    margin: float = 0.05
    candidates: int = 1
    alpha: float = ALPHA
    n_max: int | None = None

    @property
    def side_alpha(self) -> float:
        """Each side's one-sided level over all looks: α / 2."""
        return self.alpha / 2

    @property
    def looks(self) -> tuple[Look, ...]:
        return design(self.n_max, self.side_alpha)

    def look_at(self, m: int) -> Look | None:
        """The last look at or before m prompts (None before the first)."""
        done = [lk for lk in self.looks if lk.n <= m]
        return done[-1] if done else None


@dataclass(frozen=True)
class CandidateBound:
    """One candidate now: n prompts its speedup and interval rest on (the last look's, or every
    common prompt before the first look, with the interval [0, ∞)); log Ŝ and the per-prompt sd of
    log Ŝ over every common prompt (NaN before 2), which the projections use."""

    label: str
    n: int
    speedup: float
    lo: float
    hi: float
    log_s: float = math.nan
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
    n: int = 0  # the prompts common to every candidate
    look: int | None = None  # the look the verdict rests on (None: before the first)
    looks: tuple[int, ...] = field(default=())  # the design's looks


@lru_cache(maxsize=4096)
def reach(n: int, alpha: float, k: int, power: bool = True) -> float:
    """The true |log S − log(1 + margin)| decided at a look of n prompts, per unit of per-prompt
    sd of log Ŝ: (t_c + z_0.8)/√n with 80 % power (`signflip.detectable_ratio`'s formula, t_c the
    one-sided Student-t critical value at α/K), or t_c/√n — the effect at which an estimate that
    stayed put would clear the look's bound (about 50 % power) — with `power` False. ∞ below the
    test's resolution."""
    if n < signflip.min_prompts(alpha):
        return math.inf
    z = float(sps.norm.ppf(signflip.POWER)) if power else 0.0
    return (float(sps.t.ppf(1.0 - alpha / max(k, 1), n - 1)) + z) / math.sqrt(n)


def _reach_table(s: SequenceSettings, k: int, power: bool = True) -> tuple[np.ndarray, np.ndarray]:
    looks = s.looks
    ns = np.asarray([lk.n for lk in looks], float)
    return ns, np.asarray([reach(lk.n, lk.alpha, k, power) for lk in looks], float)


def optimism_shift(sd: np.ndarray, m: np.ndarray) -> np.ndarray:
    """How far the futility projection moves an estimate's distance from the line (Ŝ/(1 +
    margin) − 1, in the units of the per-prompt sd at the line), either way: t_{m−1}(0.8)·sd/√m."""
    m = np.maximum(np.asarray(m, float), 2.0)
    return np.asarray(sps.t.ppf(FUTILITY_OPTIMISM, m - 1) * np.asarray(sd, float) / np.sqrt(m))


def futile(
    log_s: np.ndarray,
    sd: np.ndarray,
    m: np.ndarray | int,
    remaining: np.ndarray | int,
    s: SequenceSettings,
) -> np.ndarray:
    """Whether a cell with m common prompts and `remaining` left cannot be decided even
    optimistically (module docstring); candidates along the last axis of log_s and sd (per-prompt
    sd of log Ŝ), m and remaining broadcast over the leading axes. A candidate could end ON if its
    estimate moved up lies above the line by more than a look in (m, m + remaining] needs — the
    estimate, were it to stay there, would clear that look's bound (`reach` without the power
    term, as the confidence sequence's rule did). The distance is taken as the sign-flip
    statistic at the line sees it, Ŝ/(1 + margin) − 1 in units of the per-prompt sd at the line,
    and the critical value of a single test (the max-T one lies between it and Bonferroni's over
    K): both optimistic, since a projection too pessimistic gives up cells the test would
    decide. OFF likewise moved down, below the line. One without an sd (fewer than 2
    prompts) could end either way if such a look exists. Futile when no candidate could end ON and
    not every one could end OFF."""
    log_s, sd = np.asarray(log_s, float), np.asarray(sd, float)
    m = np.asarray(m, float)[..., None]
    end = m + np.asarray(remaining, float)[..., None]
    ns, r = _reach_table(s, 1, power=False)
    window = (ns > m[..., None]) & (ns <= end[..., None])
    best = np.where(window, r, np.inf).min(axis=-1, initial=np.inf)  # (…, 1)
    shift = optimism_shift(sd, m)
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.exp(log_s - math.log1p(s.margin)) - 1.0  # Ŝ/(1 + margin) − 1
        up, down = gap + shift, shift - gap
        can_on = (up > 0) & (sd * best <= up)
        can_off = (down > 0) & (sd * best <= down)
    unknown = ~np.isfinite(sd) & np.isfinite(best)
    return ~(can_on | unknown).any(axis=-1) & ~(can_off | unknown).all(axis=-1)


def prompts_to_settle(effect: float, sd: float, m: int, s: SequenceSettings, k: int) -> int:
    """About how many more prompts until a true effect (|log S − log(1 + margin)|) would be
    decided with 80 % power: the first look after m at which it is, minus m; beyond the last
    look, `signflip.prompts_for_power` at the last look's α; MORE_CAP when not within it."""
    if not (math.isfinite(effect) and effect > 0 and math.isfinite(sd) and sd > 0):
        return MORE_CAP
    ns, r = _reach_table(s, k)
    hit = (ns > m) & (sd * r <= effect)
    if hit.any():
        return int(ns[np.argmax(hit)]) - m
    alpha = s.looks[-1].alpha if s.looks else s.side_alpha
    need = signflip.prompts_for_power(effect, sd, alpha, k)
    return MORE_CAP if need is None else max(need - m, 1)


def _stack(candidates: Mapping[str, Sequence[np.ndarray]], m: int) -> RatioPivots:
    arrs = [[np.asarray(a, float)[:m] for a in arrays] for arrays in candidates.values()]
    tn, mn, tb, mb = (np.stack([a[j] for a in arrs]) for j in range(4))
    return throughput_pivots(tn, mn, tb, mb)


def _now(piv: RatioPivots, line: float) -> tuple[np.ndarray, np.ndarray]:
    """log Ŝ of each candidate and the per-prompt sd of log Ŝ (`signflip.se_log` at the line ×
    √m) over every common prompt."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_s = np.log(piv.estimates)
    sd = np.asarray(
        [signflip.se_log(piv, k, line) * math.sqrt(piv.n) for k in range(piv.y.shape[0])]
    )
    return log_s, sd


def decide(
    candidates: Mapping[str, Sequence[np.ndarray]],
    s: SequenceSettings,
    remaining: int | None = None,
) -> SequentialDecision:
    """The verdict over the candidates measured so far (module docstring): each candidate's
    arrays (tok_new, ms_new, tok_base, ms_base per prompt, in the order measured, paired on the
    same prompts), of which the first m common to all are used. With `remaining` (the prompts
    the cell has left), an undecided verdict is marked `futile` when they cannot settle it even
    optimistically (`futile`)."""
    looks = tuple(lk.n for lk in s.looks)
    labels = list(candidates)
    m = min((len(np.asarray(arr[0])) for arr in candidates.values()), default=0)
    if not labels or m == 0:
        # nothing measured in common yet (the pilot): the caller knows the usable prompts the
        # candidates will be paired on, and whether a look is reachable (`adaptive_summary`)
        bounds = [CandidateBound(lab, 0, math.nan, 0.0, math.inf) for lab in labels]
        return SequentialDecision("undecided", None, bounds, None, False, remaining, 0, None, looks)
    line = 1.0 + s.margin
    piv = _stack(candidates, m)
    log_s, sd = _now(piv, line)
    look = s.look_at(m)
    if look is None:
        bounds = [
            CandidateBound(lab, m, math.exp(log_s[i]), 0.0, math.inf, log_s[i], sd[i])
            for i, lab in enumerate(labels)
        ]
    else:
        sub = RatioPivots(piv.y[:, : look.n], piv.x[:, : look.n])
        d = signflip.decide(sub, line, look.alpha)
        est = sub.estimates
        bounds = [
            CandidateBound(
                lab,
                look.n,
                float(est[i]),
                float(d.lower[i]) if math.isfinite(d.lower[i]) else 0.0,
                float(d.upper[i]) if math.isfinite(d.upper[i]) else math.inf,
                float(log_s[i]),
                float(sd[i]),
            )
            for i, lab in enumerate(labels)
        ]
        if d.outcome in ("on", "off"):
            chosen = labels[d.chosen] if d.chosen is not None else None
            return SequentialDecision(
                d.outcome, chosen, bounds, None, False, remaining, m, look.n, looks
            )
    more = more_prompts(log_s, sd, m, s)
    stop = False
    if remaining is not None and remaining > 0:
        stop = bool(futile(log_s, sd, m, remaining, s))
    return SequentialDecision(
        "undecided", None, bounds, more, stop, remaining, m, look.n if look else None, looks
    )


def more_prompts(log_s: np.ndarray, sd: np.ndarray, m: int, s: SequenceSettings) -> int | None:
    """The "needs about N more prompts": ON needs one candidate above the line to clear it (the
    nearest of those, at α/K), OFF every candidate below it (the farthest, at α each). None
    before two prompts."""
    k = len(log_s)
    line = math.log1p(s.margin)
    known = [i for i in range(k) if math.isfinite(sd[i]) and math.isfinite(log_s[i])]
    if m < 2 or not known:
        return None
    above = [i for i in known if log_s[i] > line]
    if above:
        return min(prompts_to_settle(log_s[i] - line, sd[i], m, s, k) for i in above)
    return max(prompts_to_settle(line - log_s[i], sd[i], m, s, 1) for i in known)
