"""The conformance family's one test: a joint paired permutation test with max-T (Westfall–Young
single step) of one-sided shortfalls, engine below reference (docs/verify.md §conformance)."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from specbench.analysis.stats.resampling import DEFAULT_SEED

PERMUTATIONS = 9999  # random swap patterns when the family's prompts are too many to enumerate
EXACT_MAX_UNITS = 12  # up to 2¹² swap patterns are enumerated exactly


@dataclass(frozen=True)
class ShortfallTest:
    """One one-sided test of the family: is the engine's Σ num / Σ den below the reference's?

    Arrays are per prompt unit, aligned with `keys`; a unit's key is shared by every test of the
    same prompt (all temperatures and γ), so a permutation swaps a prompt's data everywhere at once.
    """

    keys: list[Hashable]
    num_e: np.ndarray
    den_e: np.ndarray
    num_r: np.ndarray
    den_r: np.ndarray


def _swap_patterns(n: int, n_perm: int, seed: int) -> tuple[np.ndarray, bool]:
    """(B, n) 0/1 matrix of which units swap sides, and whether it enumerates all 2ⁿ patterns."""
    if n <= EXACT_MAX_UNITS:
        codes = np.arange(2**n)[:, None]
        return ((codes >> np.arange(n)) & 1).astype(float), True
    return np.random.default_rng(seed).integers(0, 2, size=(n_perm, n)).astype(float), False


def family_adjusted_p(
    tests: list[ShortfallTest], n_perm: int = PERMUTATIONS, seed: int = DEFAULT_SEED
) -> list[float]:
    """Family-wise adjusted one-sided p-values (engine below reference), max-T over the family.

    Each test's statistic engine − reference is standardized by its own permutation standard
    deviation (so a noisy deep position cannot dominate the maximum), z = −diff / sd; the
    adjusted p of test j is P(max_k z_k ≥ z_j) over the swap patterns (Westfall & Young 1993,
    single step). scipy.stats.permutation_test tests one statistic at a time, and max-T needs the
    joint permutation distribution of the whole family, hence the few lines here. NaN: not
    testable (a side with no rounds there, or no variation under any swap — identical data).
    """
    keys = sorted({k for t in tests for k in t.keys}, key=repr)
    index = {k: i for i, k in enumerate(keys)}
    n = len(keys)
    if n == 0:
        return [math.nan] * len(tests)
    flips, exact = _swap_patterns(n, n_perm, seed)  # (B, n)
    z_perm = np.full((len(flips), len(tests)), -np.inf)
    z_obs = np.full(len(tests), np.nan)
    for j, t in enumerate(tests):
        idx = np.asarray([index[k] for k in t.keys], int)

        def full(a: np.ndarray, idx: np.ndarray = idx) -> np.ndarray:
            out = np.zeros(n)
            out[idx] = a
            return out

        ne, de, nr, dr = (full(np.asarray(a, float)) for a in (t.num_e, t.den_e, t.num_r, t.den_r))
        with np.errstate(invalid="ignore", divide="ignore"):
            e_den, r_den = de.sum() + flips @ (dr - de), dr.sum() + flips @ (de - dr)
            diff = np.where(
                (e_den > 0) & (r_den > 0),
                (ne.sum() + flips @ (nr - ne)) / e_den - (nr.sum() + flips @ (ne - nr)) / r_den,
                np.nan,
            )  # (B,)
            obs = ne.sum() / de.sum() - nr.sum() / dr.sum() if de.sum() and dr.sum() else np.nan
        sd = float(np.nanstd(diff)) if np.isfinite(diff).any() else math.nan
        if not (math.isfinite(sd) and sd > 1e-12) or not math.isfinite(obs):
            continue
        z_perm[:, j] = np.where(np.isfinite(diff), -diff / sd, -np.inf)
        z_obs[j] = -obs / sd
    largest = z_perm.max(axis=1)  # (B,)
    out = []
    for z in z_obs:
        if not math.isfinite(z):
            out.append(math.nan)
            continue
        hits = int((largest >= z - 1e-9).sum())  # the identity pattern is one of them if exact
        out.append(hits / len(flips) if exact else (hits + 1) / (len(flips) + 1))
    return out
