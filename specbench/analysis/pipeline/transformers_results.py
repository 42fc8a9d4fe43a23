"""The results entry of one workload × temperature measured by specbench's own decoding
(`backend: transformers`): every speculative round is recorded, so acceptance is estimated
exactly (docs/theory.md §2) and the round cost is fitted from measured steps (§4).

- α: exact β at the largest γ of the primary drafter's fixed-γ runs (the most positions), beside
  accepted / tested, accepted / proposed and α from the accepted length (`analysis.estimators.acceptance`);
- the γ table (`analysis.estimators.predictions`): ā(γ) per prompt of the γ_max run, pooled by tokens
  (docs/theory.md §3), from its truncation ("empirical") or the iid model at each prompt's α;
- `methods`: every drafter × policy × γ ranked by its measured speedup;
- the verdict (`analysis.decide.recommend`) rests on the non-degenerate prompts (docs/theory.md §13,
  `analysis.decide.validity`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from specbench.analysis.arithmetic.timing_model import TimingFit, fit_from_records
from specbench.analysis.decide.recommend import decide_entry
from specbench.analysis.decide.validity import assess, compare_clean, restrict_verdict
from specbench.analysis.documents.results_model_base import AlphaJSON, est_model
from specbench.analysis.documents.results_model_workload import (
    AlphaEstimators,
    DraftStepTiming,
    MethodRow,
    OverheadFit,
    Timing,
    VerifyFit,
    WorkloadResult,
)
from specbench.analysis.documents.settings import AnalysisSettings
from specbench.analysis.estimators.acceptance import (
    accepted_histogram,
    all_rounds,
    estimate_alpha,
    iid_curve,
    per_position_acceptance,
    truncation_curve,
)
from specbench.analysis.estimators.entry_warnings import (
    low_acceptance,
    too_few_prompts,
    unstable_timing,
)
from specbench.analysis.estimators.groups import Group, Record
from specbench.analysis.estimators.latency import measured_latency, pooled_itl, tokens_per_s
from specbench.analysis.estimators.predictions import GammaAcceptance, gamma_table
from specbench.analysis.estimators.tables import rounds_frame
from specbench.analysis.pipeline.acceptance_detail import acceptance_detail
from specbench.analysis.pipeline.cell_figures import (
    BaselineSummary,
    CellFigures,
    MeasuredAcceptance,
    TransformersDetail,
    alpha_json,
)
from specbench.analysis.pipeline.prompt_basis import figures_basis
from specbench.analysis.stats.resampling import coefficient_of_variation, mean_ci
from specbench.analysis.stats.serialize import json_num
from specbench.setting import SettingKey


def baseline_summary(base: list[Record], n_boot: int, level: float) -> BaselineSummary:
    """The baseline's ITL, TTFT and decode throughput (pooled over prompts)."""
    itl = pooled_itl(base, n_boot, level)
    ttft = [(r["ttft_ms"][0], str(r["prompt_id"])) for r in base if r.get("ttft_ms")]
    return BaselineSummary(
        itl_ms=est_model(itl),
        ttft_ms=est_model(
            mean_ci(np.asarray([t for t, _ in ttft]), n_boot, level, clusters=[c for _, c in ttft])
        )
        if ttft
        else None,
        tokens_per_s=est_model(tokens_per_s(itl)),
    )


def _peak_memory(recs: list[Record]) -> float | None:
    peaks = [x for r in recs if (x := r.get("peak_memory_mb")) is not None]
    return json_num(max(peaks, default=math.nan))


def timing_section(fit: TimingFit) -> Timing:
    """results.json's `timing`: the draft step's spread and the verify and overhead fits."""
    model, steps = fit.model, fit.draft_steps_ms
    return Timing(
        t_draft_ms=DraftStepTiming(
            mean=json_num(model.t_draft_ms) if len(steps) else None,
            median=json_num(float(np.median(steps))) if len(steps) else None,
            p10=json_num(float(np.percentile(steps, 10))) if len(steps) else None,
            p90=json_num(float(np.percentile(steps, 90))) if len(steps) else None,
        ),
        verify_fit=VerifyFit(
            t0_ms=json_num(fit.verify_t0_ms),
            t1_ms_per_token=json_num(fit.verify_t1_ms),
            mean_residual_ms_by_drafted={
                k: json_num(v) for k, v in fit.residual_by_drafted.items()
            },
        ),
        overhead_fit=OverheadFit(
            o0_ms=json_num(fit.overhead_o0_ms), o1_ms_per_token=json_num(fit.overhead_o1_ms)
        ),
        cost_ratio=json_num(model.t_draft_ms / model.t_ar_ms) if model.t_ar_ms else None,
    )


def analyse_group(
    base: list[Record], specs: dict[int, list[Record]], s: AnalysisSettings
) -> CellFigures:
    """Everything for one workload × temperature of one drafter's fixed-γ runs (the
    recommendation over every setting is made by `transformers_entry`)."""
    n_boot, level = s.n_boot, s.ci_level
    warnings: list[str] = []
    n_prompts = len({r["prompt_id"] for r in base})

    # --- baseline ---
    step_means = np.asarray([np.mean(r["step_ms"]) for r in base if r.get("step_ms")])
    cv = unstable_timing(coefficient_of_variation(step_means), "baseline per-token latency")
    warnings += [cv] if cv else []

    # --- timing model from every speculative round (docs/theory.md §4) ---
    all_spec = [r for rs in specs.values() for r in rs]
    fit = fit_from_records(base, all_spec)
    model = fit.model
    per_prompt_draft = np.asarray(
        [
            np.mean([t for ts in r["rounds"]["draft_ms"] for t in ts])
            for r in all_spec
            if any(r["rounds"]["draft_ms"])
        ]
    )
    cv = unstable_timing(coefficient_of_variation(per_prompt_draft), "the mean draft step")
    warnings += [cv] if cv else []

    # --- acceptance (primary: exact β at the largest γ, the most positions) ---
    gamma_max = max(specs, default=0)
    alpha: AlphaJSON | None = None
    measured: MeasuredAcceptance | None = None
    if specs:
        acc_max, dra_max = all_rounds(specs[gamma_max])
        pooled = estimate_alpha(all_spec, gamma_max, n_boot, level)
        at_max = estimate_alpha(specs[gamma_max], gamma_max, n_boot, level)
        alpha_primary = pooled.exact_beta
        alpha = alpha_json(alpha_primary, "exact_beta")
        measured = MeasuredAcceptance(
            AlphaEstimators(
                exact_beta=est_model(pooled.exact_beta),
                accepted_tested=est_model(pooled.accepted_tested),
                accepted_proposed=est_model(at_max.accepted_proposed),
                from_accepted_length=est_model(at_max.from_accepted_length),
                at_gamma=gamma_max,
            ),
            per_position_acceptance(acc_max, dra_max, gamma_max),
            accepted_histogram(acc_max, gamma_max),
        )
        for w in (
            low_acceptance(at_max.accepted_proposed.value, gamma_max),
            too_few_prompts(n_prompts, alpha_primary.halfwidth, s.target_halfwidth, s.ci_level),
        ):
            warnings += [w] if w else []
    # ā(γ) per prompt of the γ_max run, pooled by tokens (docs/theory.md §3)
    curves = {
        "iid": iid_curve(specs[gamma_max], gamma_max) if specs else {},
        "empirical": truncation_curve(specs[gamma_max], gamma_max) if specs else {},
    }
    rounds = rounds_frame(all_spec)

    def acceptance(g: int) -> GammaAcceptance:
        est = estimate_alpha(specs[g], g, n_boot, level)
        verify = rounds.loc[(rounds["setting_gamma"] == g) & (rounds["drafted"] == g), "verify_ms"]
        return GammaAcceptance(
            alpha_exact_beta=est_model(est.exact_beta),
            accepted_proposed=est_model(est.accepted_proposed),
            mean_tokens_per_round=est_model(est.tokens_per_round),
            t_verify_ms_median=json_num(float(verify.median())) if len(verify) else None,
            peak_memory_mb=_peak_memory(specs[g]),
            tokens_per_round=est.tokens_per_round.value,
        )

    table = gamma_table(gamma_max, curves, model, base, specs, acceptance, n_boot, level)
    return CellFigures(
        n_prompts=n_prompts,
        baseline=baseline_summary(base, n_boot, level),
        baseline_step_ms=json_num(model.t_ar_ms),
        baseline_peak_memory_mb=_peak_memory(base),
        timing=timing_section(fit),
        alpha=alpha,
        measured=measured,
        table=table,
        warnings=warnings + table.warnings,
    )


def rank_methods(
    base: list[Record], settings: dict[SettingKey, list[Record]], n_boot: int, level: float
) -> list[MethodRow]:
    """Every measured drafter × policy × γ with its speedup (paired with the baseline), best
    first; with the γ its policy used on average and its rounds that drafted nothing."""
    rounds = rounds_frame([r for rs in settings.values() for r in rs])
    per_setting: dict[Any, dict[Any, Any]] = (
        rounds.groupby(["drafter", "policy", "setting_gamma"])
        .agg(
            mean_gamma_used=("gamma", "mean"),
            fallback_rounds=("drafted", lambda d: int((d == 0).sum())),
        )
        .to_dict("index")
    )
    rows: list[MethodRow] = []
    for (drafter, policy, gamma), recs in settings.items():
        est = estimate_alpha(recs, gamma, n_boot, level)
        latency = measured_latency(base, recs, n_boot, level)
        used = per_setting.get((drafter, policy, gamma))
        rows.append(
            MethodRow(
                drafter=drafter,
                policy=policy,
                gamma=gamma,
                mean_gamma_used=json_num(float(used["mean_gamma_used"]))
                if used is not None
                else None,
                fallback_rounds=int(used["fallback_rounds"]) if used is not None else 0,
                mean_tokens_per_round=est_model(est.tokens_per_round),
                accepted_proposed=est_model(est.accepted_proposed),
                itl_ms=latency.itl_ms,
                measured_speedup=latency.measured_speedup,
            )
        )
    rows.sort(key=lambda r: -((r.measured_speedup.value if r.measured_speedup else None) or 0.0))
    return rows


def _primary(
    settings: dict[SettingKey, list[Record]], s: AnalysisSettings
) -> dict[int, list[Record]]:
    """The primary drafter's fixed-γ runs, by γ."""
    return {
        g: recs for (d, p, g), recs in settings.items() if d == s.primary_drafter and p == "fixed"
    }


def transformers_entry(
    cell: tuple[str, float], grp: Group, s: AnalysisSettings
) -> tuple[WorkloadResult, list[Record], dict[SettingKey, list[Record]]] | None:
    """The analysed and decided entry of one group (`cell`: its workload and temperature), with
    the baseline and settings its verdict rests on (the non-degenerate prompts when some answers
    are degenerate); None without a baseline."""
    base, settings = grp["baseline"], grp["spec"]
    if not base:
        return None
    primary = _primary(settings, s)
    # content validity (docs/theory.md §13): the verdict never rests on degenerate answers, and
    # every figure of the cell is over the verdict's prompts (`prompt_basis`)
    validity = assess(base, settings)
    base1, settings1 = base, settings
    if validity.degenerate:
        base1, settings1 = validity.clean_base, validity.clean_settings
    restricted = bool(validity.degenerate and validity.clean_base)
    fig_base, fig_settings = base, settings
    if restricted:
        fig_base = validity.clean_base
        fig_settings = {k: rs for k, rs in validity.clean_settings.items() if rs}
    figures = analyse_group(fig_base, _primary(fig_settings, s), s)
    methods = rank_methods(fig_base, fig_settings, s.n_boot, s.ci_level)
    basis = figures_basis(figures.n_prompts, restricted)
    # the per-prompt α marks the degenerate prompts: it compares the two sets (content section)
    detail = acceptance_detail(primary, validity, s.n_boot, s.ci_level)
    rec = decide_entry(
        figures.quoted(methods), base1, settings1, grp["failed"], s.margin, s.ci_level, s.n_boot
    )
    restrict_verdict(validity, rec, s.n_boot, s.ci_level)
    clean = compare_clean(validity, rec, base, primary, settings, s.margin, s.ci_level, s.n_boot)
    figures.warnings += clean.warnings
    entry = figures.entry(
        cell,
        s,
        rec,
        clean.content,
        basis,
        grp,
        TransformersDetail(methods, detail.per_prompt_alpha, detail.per_position_detail),
    )
    return entry, base1, settings1
