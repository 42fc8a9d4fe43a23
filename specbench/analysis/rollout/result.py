"""What `specbench accept` measured and planned: per bucket, its acceptance, one rollout plan per
sampling setting, its time model and the warnings a reader should see (`report/accept/accept.py`
renders it; `rollout.document` turns it into the accept.json document).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from specbench.analysis.rollout.acceptance import DRIFT_WARN, BucketAcceptance
from specbench.analysis.rollout.plan import RolloutPlan, plan_rollout
from specbench.analysis.rollout.timing import TimeModel


@dataclass(frozen=True)
class BucketResult:
    """One bucket's acceptance, its plan per setting (same order) and its timing."""

    acceptance: BucketAcceptance
    plans: list[RolloutPlan]
    time_model: TimeModel
    warnings: list[str]


def bucket_result(
    acceptance: BucketAcceptance,
    tm: TimeModel,
    gamma_max: int,
    margin: float,
    target_halfwidth: float,
) -> BucketResult:
    """Plan every setting of a bucket and collect the warnings a reader should see."""
    plans = [
        plan_rollout(
            s.alpha,
            tm,
            gamma_max,
            margin,
            (s.request_alpha, s.request_tokens) if len(s.request_tokens) else None,
        )
        for s in acceptance.settings
    ]
    notes: list[str] = []
    for s, plan in zip(acceptance.settings, plans, strict=True):
        notes += [f"{s.label}: {w}" for w in plan.warnings]
        if s.requests_needed is not None:
            notes.append(
                f"{s.label}: too few requests: α CI half-width {s.alpha.halfwidth:.3f} > "
                f"{target_halfwidth:g} with {s.requests}; about {s.requests_needed} would reach it"
            )
        d = s.drift
        if (
            d is not None
            and math.isfinite(d.lo)
            and abs(d.value) > DRIFT_WARN
            and (d.lo > 0 or d.hi < 0)
        ):
            assert s.drift_bins is not None
            first, last = s.drift_bins
            notes.append(
                f"{s.label}: acceptance drifts along the response: α {first.alpha.value:.3f} at "
                f"positions {first.start}–{first.stop - 1} vs {last.alpha.value:.3f} at "
                f"{last.start}–{last.stop - 1} (Δ {d.value:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}])"
            )
    return BucketResult(acceptance, plans, tm, notes)


@dataclass
class AcceptResult:
    """What `specbench accept` measured and planned; `report/accept/accept.py` renders it."""

    meta: dict[str, Any]  # pair, data source, options (see rollout.document.accept_results)
    labels: list[str]  # the sampling settings, in the order of every per-setting list
    buckets: list[BucketResult]
    overall: BucketResult  # every request as one bucket
    warnings: list[str] = field(default_factory=list)
    skipped_rows: list[dict[str, str]] = field(default_factory=list)


def is_provisional(result: AcceptResult) -> bool:
    """Some verdict rests on an assumed draft cost (no measured timing)."""
    return any(b.time_model.provisional for b in [*result.buckets, result.overall])
