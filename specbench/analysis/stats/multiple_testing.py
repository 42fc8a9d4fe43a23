"""Multiple testing: Holm's step-down adjustment and the power arithmetic of a z-test.

`specbench compare` tests many rows at once (α, τ and speedup per workload × temperature × γ);
testing each at 0.05 makes a false alarm on *some* row likely (16 independent rows: 1 − 0.95¹⁶ =
56 %). Holm's method keeps the family-wise error rate — the probability of flagging any row when
nothing changed — at the stated level under any dependence between the rows (the rows of one run
share the baseline, so they are correlated; Benjamini–Hochberg's FDR guarantee needs positive
dependence, which two-sided tests of correlated ratios do not promise). See docs/compare.md.

Holm is a few lines of arithmetic on sorted p-values; it is written here rather than adding
statsmodels (`multipletests(method="holm")`) as a dependency for it. The unit tests check it
against the definition on hand-computed cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values: reject H_i at level a iff adjusted_i < a (a ≤ 1).

    Sorted ascending p_(1) ≤ … ≤ p_(m): adjusted_(k) = max_{j ≤ k} min(1, (m − j + 1)·p_(j)).
    """
    p = np.asarray(p_values, float)
    m = len(p)
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.maximum.accumulate(scaled)
    out = np.empty(m)
    out[order] = adjusted
    return [float(x) for x in out]


def z_two_sided(level: float, df: float = math.inf) -> float:
    """The critical value with P(|T| > z) = level, T ~ Student t with df degrees of freedom
    (df = ∞: the normal)."""
    return float(sps.t.isf(level / 2, df))


def normal_p_value(change: float, se: float, df: float = math.inf) -> float:
    """Two-sided p of a t-test (z-test when df = ∞) of change = 0 with standard error se."""
    if se <= 0 or not math.isfinite(se):
        return 0.0 if change else 1.0
    return float(2 * sps.t.sf(abs(change) / se, df))


def satterthwaite_df(parts: Sequence[tuple[float, float]]) -> float:
    """Welch–Satterthwaite degrees of freedom of se² = Σ se_i² from (se_i, df_i) pairs; a part
    with df = ∞ (a variance taken as known) adds no uncertainty of its own."""
    total = sum(se * se for se, _ in parts)
    den = sum(se**4 / df for se, df in parts if math.isfinite(df) and df > 0)
    return total * total / den if den > 0 else math.inf


def min_detectable_effect(
    se: float, level: float, power: float = 0.8, df: float = math.inf
) -> float:
    """Smallest true change a two-sided test at `level` detects with probability `power`:
    (t_{1−level/2} + t_{power})·se (the far tail neglected)."""
    return (z_two_sided(level, df) + float(sps.t.ppf(power, df))) * se
