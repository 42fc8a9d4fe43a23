"""The tests of one row's change, new − base: per-prompt bootstrap (paired when both runs ran the
same prompts) with a stated run-to-run term, Welch t over runs, the exact T = 0 comparison, and
the normal approximation from stored intervals (docs/compare.md, "The speedup's standard error").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from specbench.analysis.compare.metrics import Thresholds
from specbench.analysis.compare.samples import Samples, Summary, pooled
from specbench.analysis.stats.multiple_testing import normal_p_value, satterthwaite_df, z_two_sided
from specbench.analysis.stats.resampling import bootstrap


@dataclass(frozen=True)
class DiffTest:
    change: float  # new − base
    p_value: float | None  # unadjusted, two-sided; None: not tested (exact, or untestable)
    ci: tuple[float, float] | None  # (1 − significance) interval of the change (unadjusted)
    method: str
    se: float | None = None  # standard error on the test scale (log for relative metrics)
    se_prompts: float | None = None  # its part from prompt sampling (the bootstrap)
    se_runs: float | None = None  # its part from run-to-run variation (model or runs)
    df: float = math.inf  # degrees of freedom of the t reference (∞: normal)


def _z(level: float) -> float:
    return float(sps.norm.ppf(0.5 + level / 2))


def _bootstrap_se(stat: Any, arrays: list[np.ndarray], n_boot: int, seed: int) -> float | None:
    """Standard error of a statistic from the resampling layer's 95 % interval (width / 2z):
    the one bootstrap of the project (analysis/stats/resampling.py), prompts as the unit."""
    est = bootstrap(stat, arrays, n_boot, 0.95, seed)
    if not (math.isfinite(est.lo) and math.isfinite(est.hi)):
        return None
    return (est.hi - est.lo) / (2 * _z(0.95))


def _stat(arrays: Sequence[np.ndarray], coefs: Sequence[float]) -> np.ndarray:
    """The sample statistic of each resample: arrays (B, n) → (B,)."""
    return np.asarray(pooled([x.sum(axis=-1) for x in arrays], coefs))


def _unbias(se: float | None, n: int) -> float | None:
    """The bootstrap variance of a mean is (n − 1)/n of the unbiased one: scaled back up (it
    matters at the shipped 8 prompts)."""
    return se * math.sqrt(n / (n - 1)) if se is not None and n > 1 else se


def prompt_se(
    base: Samples, new: Samples, log: bool, n_boot: int, seed: int
) -> tuple[float | None, str]:
    """Standard error of Δ = new − base (or log new − log base) of a sample statistic (a product
    of powers of sums) from prompt resampling: paired (prompts resampled jointly) when both sides
    ran the same prompts, else the two sides resampled apart and the variances added."""
    if len(base) < 2 or len(new) < 2:
        return None, "too few prompts to test"
    assert base.coefs == new.coefs, "both sides must measure one statistic"
    coefs, n_arrays = base.coefs, len(base.arrays)
    f = np.log if log else (lambda x: x)
    paired = set(base.keys) == set(new.keys) and len(set(base.keys)) == len(base.keys)
    if paired:
        order = {k: i for i, k in enumerate(base.keys)}
        j = np.asarray([order[k] for k in new.keys])
        aligned = []  # the new side's arrays in the base's prompt order
        for a in new.arrays:
            out = np.empty_like(a)
            out[j] = a
            aligned.append(out)

        def delta(*xs: np.ndarray) -> np.ndarray:
            with np.errstate(invalid="ignore", divide="ignore"):
                return f(_stat(xs[n_arrays:], coefs)) - f(_stat(xs[:n_arrays], coefs))

        se = _bootstrap_se(delta, [*base.arrays, *aligned], n_boot, seed)
        return _unbias(se, len(base)), f"paired bootstrap over {len(base)} prompts"

    def one(*xs: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return f(_stat(xs, coefs))

    sb = _unbias(_bootstrap_se(one, list(base.arrays), n_boot, seed), len(base))
    sn = _unbias(_bootstrap_se(one, list(new.arrays), n_boot, seed + 1), len(new))
    se = math.hypot(sb, sn) if sb is not None and sn is not None else None
    return se, f"two-sample bootstrap ({len(base)} vs {len(new)} prompts)"


def t_test(
    change: float,
    d: float,
    se: float | None,
    base_v: float,
    log: bool,
    level: float,
    method: str,
    se_p: float | None,
    se_r: float | None,
    df: float = math.inf,
) -> DiffTest:
    """p-value and interval of a t-test of d (the change on the test scale) with standard error
    se and df degrees of freedom (∞: a z-test)."""
    if se is None:
        return DiffTest(change, None, None, method)
    p = normal_p_value(d, se, df)
    h = z_two_sided(1 - level, df) * se
    ci = (base_v * math.expm1(d - h), base_v * math.expm1(d + h)) if log else (d - h, d + h)
    return DiffTest(change, p, ci, method, se, se_p, se_r, df)


def model_test(
    base: Samples, new: Samples, log: bool, th: Thresholds, run_cv: float, k_base: int, k_new: int
) -> DiffTest:
    """z-test of a change with se² = se²_prompts + run_cv²·(1/k_base + 1/k_new) (run_cv = 0:
    prompts only, as for acceptance)."""
    bv, nv = base.value, new.value
    change = nv - bv
    if log and not (bv > 0 and nv > 0):
        return DiffTest(change, None, None, "not positive: cannot test")
    d = math.log(nv / bv) if log else change
    se_p, method = prompt_se(base, new, log, th.bootstrap, th.seed)
    se_r = run_cv * math.sqrt(1 / k_base + 1 / k_new) if run_cv else None
    if se_r is not None:
        method += f" + run-to-run CV {100 * run_cv:.1f} % ({k_base} vs {k_new} runs)"
    if se_p is None:
        return DiffTest(change, None, None, method)
    se = math.hypot(se_p, se_r or 0.0)
    # the prompt part is estimated from n prompts (n − 1 df); the run part is a stated constant
    n = min(len(base), len(new))
    df = satterthwaite_df([(se_p, n - 1), (se_r or 0.0, math.inf)])
    return t_test(change, d, se, bv, log, 1 - th.significance, method, se_p, se_r, df)


def runs_test(base_values: list[float], new_values: list[float], level: float) -> DiffTest:
    """Runs as the unit: Welch t-test of the per-run log values (each run's own statistic)."""
    b, n = np.log(base_values), np.log(new_values)
    bv, nv = float(np.exp(b.mean())), float(np.exp(n.mean()))
    d = float(n.mean() - b.mean())
    se = math.sqrt(b.var(ddof=1) / len(b) + n.var(ddof=1) / len(n))
    method = f"Welch t over runs ({len(b)} vs {len(n)} runs)"
    if se == 0:
        return DiffTest(nv - bv, 0.0 if d else 1.0, (d, d), method, 0.0, None, 0.0)
    res = sps.ttest_ind(n, b, equal_var=False)
    df = float(res.df)
    h = z_two_sided(1 - level, df) * se
    ci = (bv * math.expm1(d - h), bv * math.expm1(d + h))
    return DiffTest(nv - bv, float(res.pvalue), ci, method, se, None, se, df)


def exact_test(base: Samples, new: Samples) -> DiffTest:
    """T = 0 on the same prompts: acceptance is deterministic, so any difference is real."""
    order = {k: i for i, k in enumerate(base.keys)}
    j = np.asarray([order[k] for k in new.keys])
    same = all(
        np.allclose(x[j], y, rtol=1e-9, atol=0)
        for x, y in zip(base.arrays, new.arrays, strict=True)
    )
    change = new.value - base.value
    what = "identical" if same else "differs"
    return DiffTest(0.0 if same else change, None, None, f"exact (T=0, same prompts): {what}")


def normal_difference(base: Summary, new: Summary, ci_level: float, level: float) -> DiffTest:
    """Δ = new − base with se from the stored CIs: se = (hi − lo) / (2·z_{(1+ci_level)/2})."""
    assert base.value is not None and new.value is not None
    change = new.value - base.value
    method = "normal approximation from stored CIs"
    if None in (base.lo, base.hi, new.lo, new.hi):
        return DiffTest(change, None, None, method + " (a CI is missing)")
    z = _z(ci_level)
    se = math.hypot((base.hi - base.lo) / (2 * z), (new.hi - new.lo) / (2 * z))  # type: ignore[operator]
    return t_test(change, change, se, base.value, False, level, method, se, None)
