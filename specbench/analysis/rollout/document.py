"""The accept.json document (`analysis.documents.accept_model.AcceptResults`) of an `AcceptResult`: the
acceptance, plans and time models as typed, validated fields, with the break-even draft cost each
plan implies."""

from __future__ import annotations

from specbench.analysis.documents.accept_model import (
    AcceptResults,
    Bucket,
    BucketSetting,
    Data,
    GammaRow,
    Interval,
    Itl,
    Options,
    Pair,
    Plan,
    ProfileBin,
    Timing,
)
from specbench.analysis.rollout.plan import RolloutPlan, break_even_cost
from specbench.analysis.rollout.result import AcceptResult, BucketResult, is_provisional
from specbench.analysis.rollout.timing import TimeModel
from specbench.analysis.stats.resampling import Estimate

OPTION_KEYS = tuple(Options.model_fields)


def interval(e: Estimate) -> Interval:
    return Interval(value=e.value, ci95=(e.lo, e.hi))


def timing_doc(tm: TimeModel) -> Timing:
    return Timing.model_validate(
        {
            "source": tm.source,
            "provisional": tm.provisional,
            "detail": tm.detail or None,
            "units": tm.units,
            "t_target_ms": tm.t_target_ms,
            "t_draft_ms": tm.t_draft_ms,
            "verify_base_ms": tm.verify_base_ms,
            "verify_slope_ms": tm.verify_slope_ms,
            "cost_ratio": tm.cost_ratio,
        }
    )


def plan_doc(plan: RolloutPlan, tm: TimeModel) -> Plan:
    best = next((o for o in plan.options if o.gamma == plan.best_gamma), None)
    be = break_even_cost(plan, tm)
    return Plan.model_validate(
        {
            "verdict": plan.verdict,
            "provisional": tm.provisional,
            "gamma": plan.gamma,
            "best_gamma": plan.best_gamma,
            "speedup": interval(plan.speedup),
            "expected_tokens": interval(best.expected_tokens) if best else None,
            "itl_ms": Itl(baseline=plan.itl_baseline_ms, speculative=interval(plan.itl_ms)),
            "break_even_alpha": plan.break_even_alpha,
            "break_even_cost_ratio": (
                None
                if be is None
                else {"gamma": be[0], "value": be[1].value, "ci95": (be[1].lo, be[1].hi)}
            ),
            "reason": plan.reason,
            "detectable_speedup": plan.detectable_speedup,
            "requests_needed": plan.requests_needed,
            "gammas": [
                GammaRow(
                    gamma=o.gamma,
                    expected_tokens=interval(o.expected_tokens),
                    speedup=interval(o.speedup),
                    itl_ms=interval(o.itl_ms),
                )
                for o in plan.options
            ],
        }
    )


def bucket_doc(b: BucketResult) -> Bucket:
    acc = b.acceptance
    settings = [
        BucketSetting(
            setting=s.label,
            alpha=interval(s.alpha),
            tokens=s.tokens,
            requests=s.requests,
            requests_needed=s.requests_needed,
            profile=[
                ProfileBin(
                    positions=(p.start, p.stop),
                    alpha=interval(p.alpha),
                    tokens=p.tokens,
                    requests=p.requests,
                )
                for p in s.profile
            ],
            drift=None if s.drift is None else interval(s.drift),
            drift_positions=[(p.start, p.stop) for p in s.drift_bins] if s.drift_bins else None,
            plan=plan_doc(plan, b.time_model),
        )
        for s, plan in zip(acc.settings, b.plans, strict=True)
    ]
    return Bucket(
        bucket=acc.bucket,
        requests=acc.requests,
        tokens=acc.tokens,
        greedy_agreement=interval(acc.greedy_agreement),
        target_nll_per_token=acc.target_nll,
        timing=timing_doc(b.time_model),
        settings=settings,
        warnings=list(b.warnings),
    )


def accept_results(result: AcceptResult) -> AcceptResults:
    """The validated accept.json document of `result` (its `meta` as filled by `accept`)."""
    m = result.meta
    return AcceptResults.model_validate(
        {
            "estimator": m["estimator"],
            "pair": Pair.model_validate({k: m.get(k) for k in Pair.model_fields}),
            "data": Data.model_validate(
                {
                    "source": m["source"],
                    "bucket_by": m.get("bucket_by"),
                    "requests": m["requests"],
                    "positions": m["positions"],
                    "skipped_rows": result.skipped_rows,
                }
            ),
            "settings": m["settings"],
            "options": Options.model_validate({k: m.get(k) for k in OPTION_KEYS}),
            "timing": timing_doc(result.overall.time_model),
            "provisional": is_provisional(result),
            "measured_timing": m.get("measured_timing"),
            "buckets": [bucket_doc(b) for b in result.buckets],
            "overall": bucket_doc(result.overall),
            "warnings": list(result.warnings),
        }
    )
