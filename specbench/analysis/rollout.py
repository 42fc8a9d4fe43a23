"""From teacher-forced β to a rollout plan: per-bucket α with intervals, its drift along the
response, and the γ / speedup / ON-OFF verdict it implies (docs/theory.md §2–4). Pure numpy, no models.

`specbench accept` feeds it per-request β arrays; every interval resamples requests (tokens of
one request are correlated) through `analysis.stats`, in blocks so that memory stays
O(block × requests) on large traffic logs.

Speedup model (the one in `analysis.roi`, docs/theory.md §3–4), per request r with α_r and L_r
scored tokens, pooled by tokens because a deployment spends L_r / ā(γ, α_r) rounds on request r:
    ā_pool(γ) = Σ L_r / Σ (L_r / ā(γ, α_r)),   ā(γ, α) = (1 − α^{γ+1}) / (1 − α),
    round(γ) = γ·T_d + verify_base + slope·γ,    speedup(γ) = T_ar · ā_pool(γ) / round(γ).
(ā at the pooled α instead is optimistic whenever α varies across requests: ā is concave in α.)
Timings are taken as exact; the interval of ā_pool(γ) is a ratio of sums over requests. The
verdict is selection-aware like `run`'s (docs/theory.md §8): ON only if some γ's simultaneous
(max-T over γ = 1..γ_max) lower bound exceeds 1 + margin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from specbench.analysis import roi
from specbench.analysis.stats import (
    DEFAULT_SEED,
    Estimate,
    log_linear_replicates,
    prompts_needed,
    proportion_ci,
    ratio_ci,
    simultaneous_lower,
)
from specbench.analysis.timing_model import TimingModel, linear_fit
from specbench.errors import SpecbenchError

ESTIMATOR = "exact_beta_teacher_forced"  # docs/theory.md §2 (a), over every response position
DRIFT_WARN = 0.05  # |α(last bin) − α(first bin)| worth a warning when its CI excludes 0
DRIFT_MIN_REQUESTS = 5  # a position bin enters the drift only when this many requests reach it


class Scored(Protocol):
    """One request's scored positions (`engine.teacher_forced.RequestScores` fits)."""

    positions: np.ndarray  # (n,) position in the response
    beta: np.ndarray  # (S, n) β per setting; NaN where a setting does not apply
    agree: np.ndarray  # (n,) greedy agreement
    target_nll: np.ndarray  # (n,)


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
    """α per setting (pooled Σβ / positions, bootstrap over requests), its profile over the
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
    agree = proportion_ci(
        np.asarray([r.agree.sum() for r in scored], float),
        counts_all.sum(axis=1),
        n_boot,
        level,
        seed,
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
        alpha = proportion_ci(sums.sum(axis=1), counts.sum(axis=1), n_boot, level, seed)
        profile = [
            ProfileBin(
                edges[j],
                edges[j + 1],
                proportion_ci(sums[:, j], counts[:, j], n_boot, level, seed),
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


# --------------------------------------------------------------------------------------------
# timings


@dataclass(frozen=True)
class TimeModel:
    """round(γ) = γ·T_d + verify_base + slope·γ against plain decoding at T_ar per token.

    `units` is "ms", or "t_target" when only a cost ratio is known (then T_ar = 1).
    """

    t_target_ms: float
    t_draft_ms: float
    verify_base_ms: float
    verify_slope_ms: float
    units: str
    source: str  # "flags" | "run" | "measured" | "default"
    detail: str = ""

    @property
    def cost_ratio(self) -> float:
        return self.t_draft_ms / self.t_target_ms

    @property
    def provisional(self) -> bool:
        """No measured timing: the draft cost is an assumed ratio (the default or --cost-ratio),
        so verdicts built on it are provisional (α and ā(γ) are not: they need no timing)."""
        return self.source == "default" or self.units != "ms"

    @property
    def timing(self) -> TimingModel:
        """The same costs as the one timing model (`analysis.timing_model`)."""
        return TimingModel(
            self.t_target_ms, self.t_draft_ms, self.verify_base_ms, self.verify_slope_ms
        )


def time_model_from_flags(t_target_ms: float, t_draft_ms: float, slope_ms: float) -> TimeModel:
    """--t-target/--t-draft/--verify-slope: the verify at γ costs T_ar + slope·γ."""
    return TimeModel(t_target_ms, t_draft_ms, t_target_ms, slope_ms, "ms", "flags")


def time_model_relative(cost_ratio: float, slope: float, source: str) -> TimeModel:
    """Times in units of T_ar: T_d = c, verify = 1 + slope·γ."""
    return TimeModel(1.0, cost_ratio, 1.0, slope, "t_target", source)


def time_model_from_measurement(measured: dict[str, Any]) -> TimeModel:
    """`engine.teacher_forced.measure_forward_latency` output; T_t(k) = t0 + t1·k fitted over k."""
    ks = np.asarray(sorted(measured["verify_ms"]), float)
    ts = np.asarray([measured["verify_ms"][int(k)] for k in ks], float)
    t0, t1, _ = linear_fit(ks, ts)
    return TimeModel(
        float(measured["t_target_ms"]),
        float(measured["t_draft_ms"]),
        t0,
        max(t1, 0.0),
        "ms",
        "measured",
        f"batch-1 forwards on {measured.get('device')}, context {measured.get('context_len')} "
        "tokens; harness overhead not included",
    )


def _results_timing_row(e: dict[str, Any]) -> tuple[str, list[float]] | None:
    """(kind, [T_ar, T_d, verify_base, slope]) of one results.json entry, or None when it has no
    complete timing. specbench's own engine splits the round into draft steps and a verify fit;
    an engine backend (vLLM, a served endpoint) only sees whole rounds, fitted as r0 + r1·γ
    (`timing.engine_round_fit`), which is the same model with T_d = 0 (analysis.serving_results)."""
    t = e.get("timing") or {}
    t_ar = e.get("baseline_step_ms")
    own = (
        t_ar,
        (t.get("t_draft_ms") or {}).get("mean"),
        (t.get("verify_fit") or {}).get("t0_ms"),
        (t.get("verify_fit") or {}).get("t1_ms_per_token"),
        (t.get("overhead_fit") or {}).get("o0_ms") or 0.0,
        (t.get("overhead_fit") or {}).get("o1_ms_per_token") or 0.0,
    )
    if all(isinstance(v, int | float) for v in own):
        t_ar_, t_d, t0, t1, o0, o1 = (float(v) for v in own)  # type: ignore[arg-type]
        return "run", [t_ar_, t_d, t0 + o0, t1 + o1]
    fit = t.get("engine_round_fit") or {}
    eng = (t_ar, fit.get("r0_ms"), fit.get("r1_ms_per_token"))
    if all(isinstance(v, int | float) and math.isfinite(v) for v in eng):
        t_ar_, r0, r1 = (float(v) for v in eng)  # type: ignore[arg-type]
        return "engine", [t_ar_, 0.0, r0, r1]
    return None


def time_model_from_results(results: dict[str, Any], bucket: str | None, source: str) -> TimeModel:
    """Mean timing of a run's results.json entries (those of workload `bucket` when it has any).
    specbench's engine: T_ar = baseline_step_ms, T_d = t_draft_ms.mean, verify_base = t0 + o0,
    slope = t1 + o1. An engine backend's run: T_ar = baseline_step_ms, T_d = 0 and the whole
    round r0 + r1·γ as the verify (`timing.engine_round_fit`)."""
    entries = [e for e in results.get("workloads") or [] if isinstance(e, dict)]
    mine = [e for e in entries if e.get("workload") == bucket] or entries
    found = [r for r in (_results_timing_row(e) for e in mine) if r is not None]
    if not found:
        raise SpecbenchError(
            f"{source} has no workload with complete timing (baseline_step_ms with "
            "timing.t_draft_ms and timing.verify_fit, or timing.engine_round_fit); pass the "
            "results.json of a finished `specbench run`"
        )
    kinds = {k for k, _ in found}
    rows = [r for k, r in found if k == ("run" if "run" in kinds else "engine")]
    t_ar, t_d, base, slope = np.asarray(rows).mean(axis=0)
    which = f"workload {bucket}" if mine is not entries else f"mean of {len(rows)} entries"
    fit = "" if "run" in kinds else "; engine round fit r0 + r1·γ"
    return TimeModel(
        float(t_ar),
        float(t_d),
        float(base),
        float(max(slope, 0.0)),
        "ms",
        "run",
        f"{source} ({which}{fit})",
    )


# --------------------------------------------------------------------------------------------
# the plan


def predicted_speedup(gamma: int, alpha: float, tm: TimeModel) -> float:
    """T_ar / ITL_eff(γ) under iid acceptance α; γ = 0 is 1."""
    return tm.timing.speedup_iid(gamma, alpha)


def break_even_alpha(gamma: int, tm: TimeModel) -> float | None:
    """α at which speedup(γ) = 1: ā(γ, α) = round(γ) / T_ar; None when no α reaches it."""
    needed = tm.timing.round_ms(gamma) / tm.t_target_ms
    if needed > gamma + 1:
        return None
    return 0.0 if needed <= 1.0 else roi.alpha_from_accepted(needed, gamma)


def _clip(a: float) -> float:
    return min(max(a, 0.0), 1.0)


def _map(alpha: Estimate, fn: Any) -> Estimate:
    """fn applied to the value and both ends (fn increasing in α)."""
    ends = [
        fn(_clip(x)) if math.isfinite(x) else math.nan for x in (alpha.value, alpha.lo, alpha.hi)
    ]
    return Estimate(*ends)


@dataclass(frozen=True)
class GammaOption:
    gamma: int
    expected_tokens: Estimate
    speedup: Estimate
    itl_ms: Estimate  # in the time model's units


@dataclass(frozen=True)
class RolloutPlan:
    verdict: str  # "on" | "off"
    gamma: int  # γ to deploy; 0 = off
    best_gamma: int  # the speedup-maximising γ (0 when none beats plain decoding)
    speedup: Estimate  # at best_gamma (1 when it is 0)
    itl_baseline_ms: float
    itl_ms: Estimate  # at best_gamma
    break_even_alpha: float | None  # at best_gamma (or at γ = 1 when it is 0)
    reason: str
    options: list[GammaOption]
    warnings: list[str] = field(default_factory=list)


def _pooled_options(
    alphas: np.ndarray,
    tokens: np.ndarray,
    tm: TimeModel,
    gamma_max: int,
    level: float,
    n_boot: int,
    seed: int,
) -> tuple[list[GammaOption], np.ndarray]:
    """Per γ: ā_pool(γ) = Σ L_r / Σ (L_r / ā(γ, α_r)) with its interval, the speedup and ITL it
    implies, and the simultaneous (max-T over γ) lower bounds of the speedups."""
    a = np.clip(alphas, 0.0, 1.0)
    per_gamma = [
        [tokens, tokens / np.asarray([roi.expected_tokens(g, float(x)) for x in a])]
        for g in range(1, gamma_max + 1)
    ]
    rep = log_linear_replicates(per_gamma, (1.0, -1.0), n_boot, seed)
    bounds, _ = simultaneous_lower(rep, level)
    options, speed_bounds = [], []
    for g in range(1, gamma_max + 1):
        expected = ratio_ci(per_gamma[g - 1][0], per_gamma[g - 1][1], n_boot, level, seed)
        per_token = tm.t_target_ms / tm.timing.round_ms(g)
        speed = Estimate(*(x * per_token for x in (expected.value, expected.lo, expected.hi)))
        itl = Estimate(
            *(tm.t_target_ms / x if x > 0 else math.nan for x in (speed.value, speed.hi, speed.lo))
        )
        options.append(GammaOption(g, expected, speed, itl))
        speed_bounds.append(bounds[g - 1] * per_token)
    return options, np.asarray(speed_bounds)


def plan_rollout(
    alpha: Estimate,
    tm: TimeModel,
    gamma_max: int,
    margin: float,
    per_request: tuple[np.ndarray, np.ndarray] | None = None,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = DEFAULT_SEED,
) -> RolloutPlan:
    """Tabulate γ = 1..gamma_max, pick the point-optimal γ (off is a candidate), and decide.

    With `per_request` = (α_r, L_r) the prediction pools ā per request and the verdict uses the
    simultaneous lower bound over γ (module docstring). With α alone (no request detail) the iid
    model is applied to α's value and ends, and the verdict uses the chosen γ's interval.
    """
    if gamma_max < 1:
        raise ValueError("gamma_max must be >= 1")
    decision_bounds: np.ndarray | None = None
    if per_request is not None and len(per_request[0]) >= 2:
        options, decision_bounds = _pooled_options(
            np.asarray(per_request[0], float),
            np.asarray(per_request[1], float),
            tm,
            gamma_max,
            level,
            n_boot,
            seed,
        )
    else:
        options = []
        for g in range(1, gamma_max + 1):
            speed = _map(alpha, lambda a, g=g: predicted_speedup(g, a, tm))
            itl = Estimate(
                *(
                    tm.t_target_ms / s if s > 0 else math.nan
                    for s in (speed.value, speed.hi, speed.lo)
                )
            )
            options.append(
                GammaOption(g, _map(alpha, lambda a, g=g: roi.expected_tokens(g, a)), speed, itl)
            )
    top = max(options, key=lambda o: o.speedup.value if math.isfinite(o.speedup.value) else -1.0)
    warnings = []
    if math.isfinite(alpha.value) and alpha.value < 0.4:
        warnings.append(
            f"α = {alpha.value:.2f} < 0.4: speculation often costs latency at such rates"
        )
    if not math.isfinite(top.speedup.value) or top.speedup.value <= 1.0:
        sp = top.speedup
        reason = (
            f"no γ ≤ {gamma_max} beats plain decoding: the best, γ={top.gamma}, predicts "
            f"{sp.value:.2f}×; off avoids a {(1 / sp.value - 1) * 100:.0f} % longer ITL"
            if math.isfinite(sp.value) and sp.value > 0
            else "α is undefined (no scored positions)"
        )
        return RolloutPlan(
            "off",
            0,
            0,
            Estimate(1.0, 1.0, 1.0),
            tm.t_target_ms,
            Estimate(tm.t_target_ms, tm.t_target_ms, tm.t_target_ms),
            break_even_alpha(1, tm),
            reason,
            options,
            warnings,
        )
    if top.expected_tokens.value < 1.5:
        warnings.append(
            f"ā = {top.expected_tokens.value:.2f} tokens per round at γ={top.gamma} (< 1.5)"
        )
    if decision_bounds is not None:
        clearing = [o for o, b in zip(options, decision_bounds, strict=True) if b > 1.0 + margin]
        if clearing:
            chosen = max(clearing, key=lambda o: o.speedup.value)
            bound = decision_bounds[chosen.gamma - 1]
            verdict, gamma = "on", chosen.gamma
            reason = (
                f"simultaneous lower bound {bound:.3f} over γ = 1..{gamma_max} > 1 + margin "
                f"{margin:g}"
            )
            top = chosen
        else:
            bound = decision_bounds[top.gamma - 1]
            verdict, gamma = "off", 0
            reason = (
                f"γ={top.gamma} predicts {top.speedup.value:.2f}× but its simultaneous lower bound "
                f"{bound:.3f} is not above 1 + margin {margin:g}"
            )
    else:
        lo = top.speedup.lo
        if math.isfinite(lo) and lo > 1.0 + margin:
            verdict, gamma = "on", top.gamma
            reason = f"speedup CI low end {lo:.3f} > 1 + margin {margin:g}"
        else:
            verdict, gamma = "off", 0
            reason = (
                f"γ={top.gamma} predicts {top.speedup.value:.2f}× but its CI low end {lo:.3f} is "
                f"not above 1 + margin {margin:g}"
                if math.isfinite(lo)
                else f"γ={top.gamma} predicts {top.speedup.value:.2f}× but one request gives no "
                "confidence interval"
            )
    return RolloutPlan(
        verdict,
        gamma,
        top.gamma,
        top.speedup,
        tm.t_target_ms,
        top.itl_ms,
        break_even_alpha(top.gamma, tm),
        reason,
        options,
        warnings,
    )


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
    """What `specbench accept` measured and planned; `report/accept.py` renders it."""

    meta: dict[str, Any]  # pair, data source, options (see report.accept.to_json)
    labels: list[str]  # the sampling settings, in the order of every per-setting list
    buckets: list[BucketResult]
    overall: BucketResult  # every request as one bucket
    warnings: list[str] = field(default_factory=list)
    skipped_rows: list[dict[str, str]] = field(default_factory=list)
