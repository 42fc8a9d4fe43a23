"""α of one bucket of logged requests from teacher-forced β: pooled per sampling setting with a
request-resampled interval, its profile over response-position bins, and its drift from the first
bin to the last well-filled one (docs/theory.md §2 (a)). Pure numpy.

Tokens of one request are correlated, so every interval resamples requests (`analysis.stats.resampling`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from specbench.analysis.stats.resampling import (
    DEFAULT_SEED,
    Estimate,
    log_linear_replicates,
    prompts_needed,
)
from specbench.analysis.stats.signflip import rate_estimate

ESTIMATOR = "exact_beta_teacher_forced"  # docs/theory.md §2 (a), over every response position
DRIFT_WARN = 0.05  # |α(last bin) − α(first bin)| worth a warning when its CI excludes 0
DRIFT_MIN_REQUESTS = 5  # a position bin enters the drift only when this many requests reach it


class Scored(Protocol):
    """One request's scored positions, read-only (`spec.teacher_forced.RequestScores` fits)."""

    @property
    def positions(self) -> np.ndarray: ...  # (n,) position in the response

    @property
    def beta(self) -> np.ndarray: ...  # (S, n) β per setting; NaN where a setting does not apply

    @property
    def agree(self) -> np.ndarray: ...  # (n,) greedy agreement

    @property
    def target_nll(self) -> np.ndarray: ...  # (n,)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    d = den.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d > 0, num.sum(axis=-1) / d, np.nan)


def drift_ci(
    num_first: np.ndarray,
    den_first: np.ndarray,
    num_last: np.ndarray,
    den_last: np.ndarray,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """α(last bin) − α(first bin), resampling requests jointly for both bins (percentile
    interval of the replicate differences: the drift only decides a warning)."""
    value = float(_ratio(num_last, den_last) - _ratio(num_first, den_first))
    n = len(num_first)
    if n < 2 or not math.isfinite(value):
        return Estimate(value, math.nan, math.nan)
    rep = log_linear_replicates(
        [[num_first, den_first], [num_last, den_last]], (1.0, -1.0), n_boot, seed
    )
    diff = np.exp(rep.boot_log[:, 1]) - np.exp(rep.boot_log[:, 0])
    diff = diff[np.isfinite(diff)]
    if len(diff) == 0:
        return Estimate(value, math.nan, math.nan)
    tail = (1.0 - level) / 2
    lo, hi = np.quantile(diff, [tail, 1 - tail])
    return Estimate(value, float(lo), float(hi))


def position_edges(max_len: int, first: int = 16) -> list[int]:
    """Bin edges 0, first, 2·first, 4·first, … covering positions up to max_len − 1."""
    edges = [0, first]
    while edges[-1] < max_len:
        edges.append(edges[-1] * 2)
    return edges


@dataclass(frozen=True)
class ProfileBin:
    start: int  # positions [start, stop) of the response
    stop: int
    alpha: Estimate
    tokens: int
    requests: int  # requests with at least one position in the bin


@dataclass(frozen=True)
class SettingAcceptance:
    """α of one bucket under one sampling setting."""

    label: str
    alpha: Estimate
    tokens: int
    requests: int
    profile: list[ProfileBin]
    drift: Estimate | None  # α(drift_bins[1]) − α(drift_bins[0]); None with one such bin
    requests_needed: int | None  # for the target CI half-width; None when it is already met
    drift_bins: tuple[ProfileBin, ProfileBin] | None = None  # first bin, last well-filled bin
    request_alpha: np.ndarray = field(default_factory=lambda: np.empty(0))  # α_r per request
    request_tokens: np.ndarray = field(default_factory=lambda: np.empty(0))  # L_r scored tokens


@dataclass(frozen=True)
class BucketAcceptance:
    bucket: str
    requests: int
    tokens: int
    greedy_agreement: Estimate
    target_nll: float  # mean −log p_target(response token) at T = 1, nats per token
    settings: list[SettingAcceptance]


def summarize_bucket(
    bucket: str,
    scored: Sequence[Scored],
    labels: Sequence[str],
    edges: Sequence[int],
    n_boot: int = 2000,
    level: float = 0.95,
    target_halfwidth: float = 0.02,
    seed: int = DEFAULT_SEED,
) -> BucketAcceptance:
    """α per setting (pooled Σβ / positions, sign-flip interval over requests), its profile over the
    response-position bins `edges`, drift, and the requests needed for `target_halfwidth`."""
    if not scored:
        raise ValueError(f"bucket {bucket!r} has no scored requests")
    n_bins = len(edges) - 1
    # (R, bins) positions and (S, R, bins) β sums; a position beyond the last edge joins the last bin
    bins = [
        np.clip(np.searchsorted(edges, r.positions, side="right") - 1, 0, n_bins - 1)
        for r in scored
    ]
    counts_all = np.stack([np.bincount(b, minlength=n_bins) for b in bins]).astype(float)
    # rates pooled over requests, each interval the sign-flip test of the ratio-of-sums pivot
    # inverted, requests the units (docs/theory.md §7; [0, 1] below 6 requests)
    agree = rate_estimate(
        np.asarray([r.agree.sum() for r in scored], float), counts_all.sum(axis=1), level
    )
    tokens = int(counts_all.sum())
    nll = float(sum(r.target_nll.sum() for r in scored) / tokens)
    settings = []
    for s, label in enumerate(labels):
        valid = [np.isfinite(r.beta[s]) for r in scored]
        counts = np.stack(
            [np.bincount(b[v], minlength=n_bins) for b, v in zip(bins, valid, strict=True)]
        ).astype(float)
        sums = np.stack(
            [
                np.bincount(b[v], weights=r.beta[s][v], minlength=n_bins)
                for b, v, r in zip(bins, valid, scored, strict=True)
            ]
        )
        keep = counts.sum(axis=1) > 0
        counts, sums = counts[keep], sums[keep]
        if not keep.any():
            continue
        alpha = rate_estimate(sums.sum(axis=1), counts.sum(axis=1), level)
        profile = [
            ProfileBin(
                edges[j],
                edges[j + 1],
                rate_estimate(sums[:, j], counts[:, j], level),
                int(counts[:, j].sum()),
                int((counts[:, j] > 0).sum()),
            )
            for j in range(n_bins)
            if counts[:, j].sum() > 0
        ]
        # Drift: the first bin against the last one that a quarter of the requests (at least
        # DRIFT_MIN_REQUESTS) reach, so a handful of very long answers cannot decide it.
        drift, drift_bins = None, None
        reached = (counts > 0).sum(axis=0)
        enough = max(DRIFT_MIN_REQUESTS, math.ceil(keep.sum() / 4))
        filled = [j for j in range(n_bins) if reached[j] >= enough]
        if len(filled) >= 2:
            f, last = filled[0], filled[-1]
            drift = drift_ci(
                sums[:, f], counts[:, f], sums[:, last], counts[:, last], n_boot, level, seed
            )
            by_start = {p.start: p for p in profile}
            drift_bins = (by_start[edges[f]], by_start[edges[last]])
        need = prompts_needed(int(keep.sum()), alpha.halfwidth, target_halfwidth)
        settings.append(
            SettingAcceptance(
                label,
                alpha,
                int(counts.sum()),
                int(keep.sum()),
                profile,
                drift,
                need
                if math.isfinite(alpha.halfwidth) and alpha.halfwidth > target_halfwidth
                else None,
                drift_bins,
                sums.sum(axis=1) / counts.sum(axis=1),
                counts.sum(axis=1),
            )
        )
    return BucketAcceptance(bucket, len(scored), tokens, agree, nll, settings)
