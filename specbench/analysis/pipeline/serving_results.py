"""The results entry of one workload × temperature of an engine run (`backend: vllm` / `openai`):
acceptance from the engine's spec-decode counters instead of per-round data
(`analysis.serving.serving_acceptance`), and latency against concurrency (`analysis.serving.serving_concurrency`).

The entry has the transformers entry's shape (so the report, CSV and console render it), with:
- latency, speedup and the recommendation at the lowest measured concurrency (usually 1);
  speedup = pooled decode throughput of speculation ÷ baseline, paired by prompt;
- α = accepted / tested (the iid MLE, docs/theory.md §2 (c)) pooled over γ, beside accepted /
  proposed, α from the mean acceptance length τ, and the per-position conditional curve at the
  largest γ;
- the γ table (`analysis.estimators.predictions`): round time = TPOT × τ per measured γ, fitted r0 + r1·γ,
  over ā(γ) from the iid model or from the per-position counters' truncation curve
  (docs/theory.md §3);
- `engine`: per-γ counter estimators, and per concurrency the TPOT, TTFT, e2e latency, output
  throughput and speedup, with the concurrency at which speculation stops paying.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from specbench.analysis.arithmetic import roi
from specbench.analysis.arithmetic.timing_model import TimingModel, linear_fit
from specbench.analysis.decide.engine_ranking import engine_ranking, primary_keys
from specbench.analysis.decide.recommend import decide_entry
from specbench.analysis.decide.validity import engine_validity
from specbench.analysis.documents.results_model_base import AlphaJSON, est_model
from specbench.analysis.documents.results_model_engine import EngineGammaCounters, EngineSection
from specbench.analysis.documents.results_model_workload import (
    AlphaEstimators,
    DraftStepTiming,
    EngineRoundFit,
    OverheadFit,
    Timing,
    VerifyFit,
    WorkloadResult,
)
from specbench.analysis.documents.settings import AnalysisSettings
from specbench.analysis.estimators.entry_warnings import low_acceptance, too_few_prompts
from specbench.analysis.estimators.groups import Group, Record
from specbench.analysis.estimators.latency import pooled_itl, tokens_per_s
from specbench.analysis.estimators.predictions import GammaAcceptance, gamma_table
from specbench.analysis.pipeline.cell_figures import (
    BaselineSummary,
    CellFigures,
    MeasuredAcceptance,
    alpha_json,
)
from specbench.analysis.pipeline.prompt_basis import (
    engine_counter_figures,
    figures_basis,
    set_aside,
    without_prompts,
)
from specbench.analysis.pipeline.schedule_section import schedule_parts
from specbench.analysis.serving.serving_acceptance import (
    concurrency_of,
    counter_estimators,
    counter_units,
    polluted_batches,
    pooled_alpha,
)
from specbench.analysis.serving.serving_concurrency import concurrency_table
from specbench.analysis.serving.serving_schedule import schedule_rows, split_schedule
from specbench.analysis.stats.resampling import NAN_ESTIMATE, mean_ci
from specbench.analysis.stats.serialize import json_num
from specbench.setting import SettingKey

Settings = dict[SettingKey, list[Record]]


def engine_round_fit(
    tau: dict[int, float | None], specs: dict[int, list[Record]]
) -> tuple[float, float, int]:
    """(r0, r1, points): the engine's whole round (draft + verify) as r0 + r1·γ, a round's time
    being TPOT × τ at each measured γ (`tau`: the mean accepted length by γ, from the counters)."""
    points = []
    for g in sorted(specs):
        itl = [x for r in specs[g] if (x := r.get("tpot_ms"))]
        if (t := tau.get(g)) is not None and itl:
            points.append((g, float(np.mean(itl)) * t))
    if not points:
        return math.nan, math.nan, 0
    r0, r1, _ = linear_fit(np.asarray([p[0] for p in points]), np.asarray([p[1] for p in points]))
    return r0, r1, len(points)


def analyse_engine_group(
    base: list[Record], settings: Settings, metrics: list[Record], s: AnalysisSettings
) -> tuple[CellFigures, list[Record], Settings]:
    """The figures of one workload × temperature of an engine run, with the baseline and
    settings at the reference concurrency (`serving_entry` decides on those)."""
    n_boot, level = s.n_boot, s.ci_level
    settings, metrics, sched, sched_metrics = split_schedule(settings, metrics)  # vllm schedule
    warnings: list[str] = []
    primary, shown = primary_keys(settings)  # several methods at one γ: one method's sections
    if shown is not None:
        warnings.append(
            f"several methods share a γ: the per-γ tables show {shown}; the ranking covers "
            f"all {len(settings)} settings"
        )
    specs: dict[int, list[Record]] = defaultdict(list)
    for key in primary:
        specs[key[2]] += settings[key]
    if len(primary) < len(settings):  # the batches of the other methods are theirs alone
        drafters = {k[0] for k in primary}
        metrics = [m for m in metrics if int(m["gamma"]) == 0 or m.get("drafter", "") in drafters]
    all_recs = base + [r for rs in specs.values() for r in rs]
    c_ref = min((concurrency_of(r) for r in all_recs), default=1)
    base1 = [r for r in base if concurrency_of(r) == c_ref]
    specs1 = {g: [r for r in rs if concurrency_of(r) == c_ref] for g, rs in specs.items()}
    settings1 = {k: [r for r in rs if concurrency_of(r) == c_ref] for k, rs in settings.items()}
    n_prompts = len({r["prompt_id"] for r in base1})
    base_itl = pooled_itl(base1, n_boot, level) or NAN_ESTIMATE
    baseline = BaselineSummary(
        itl_ms=est_model(base_itl),
        ttft_ms=est_model(mean_ci(np.asarray([r["ttft_ms"][0] for r in base1]), n_boot, level))
        if base1
        else None,
        tokens_per_s=est_model(tokens_per_s(base_itl)),
    )

    # --- acceptance from the counters ---
    per_gamma: dict[str, EngineGammaCounters] = {}
    sources: set[str] = set()
    per_request = []
    for g in sorted(specs):
        keyed, source = counter_units(specs[g], [m for m in metrics if int(m["gamma"]) == g], c_ref)
        sources.add(source)
        n_polluted = polluted_batches([m for m in metrics if int(m["gamma"]) == g])
        if n_polluted:
            warnings.append(
                f"γ={g}: {n_polluted} batch(es) of spec-decode counters showed other traffic on "
                "the server (docs/theory.md §17); their counter acceptance is not used"
            )
        if not keyed:
            warnings.append(
                f"γ={g}: the engine reported no spec-decode counters; acceptance unavailable"
                if source == "unavailable"
                else f"γ={g}: every counter delta was polluted by other traffic; acceptance "
                "unavailable"
            )
            continue
        per_gamma[str(g)] = counter_estimators([u for _, u in keyed], g, n_boot, level, source)
        if source in ("per_request_counters", "per_request_response"):
            per_request.append((keyed, g))
    g_max = max((int(k) for k in per_gamma), default=0)
    top = per_gamma.get(str(g_max))
    pooled = pooled_alpha(per_request, n_boot, level)
    alpha: AlphaJSON | None = None
    measured: MeasuredAcceptance | None = None
    if pooled is not None:
        alpha = alpha_json(pooled, "accepted_tested")
    elif top is not None and top.accepted_tested:
        at = top.accepted_tested  # the counters' estimate (analysis.serving.serving_acceptance)
        alpha = AlphaJSON(value=at.value, ci95=at.ci95, estimator="accepted_tested")
    if top is not None:
        measured = MeasuredAcceptance(
            AlphaEstimators(
                exact_beta=None,
                accepted_tested=top.accepted_tested,
                accepted_proposed=top.accepted_proposed,
                from_accepted_length=top.from_accepted_length,
                mean_accepted_length=top.mean_accepted_length,
                at_gamma=g_max,
            ),
            [p.value if p else None for p in top.per_position],
            top.histogram,
        )
        lo, hi = alpha.ci95 if alpha is not None else (None, None)
        halfwidth = (hi - lo) / 2 if lo is not None and hi is not None else None
        for w in (
            low_acceptance(top.accepted_proposed.value if top.accepted_proposed else None, g_max),
            too_few_prompts(n_prompts, halfwidth, s.target_halfwidth, s.ci_level),
        ):
            warnings += [w] if w else []

    # --- timing model: round time = TPOT × τ per measured γ ---
    tau = {
        g: pg.mean_accepted_length.value
        if (pg := per_gamma.get(str(g))) and pg.mean_accepted_length
        else None
        for g in specs1
    }
    r0, r1, points = engine_round_fit(tau, specs1)
    t_ar = base_itl.value
    timing = Timing(
        t_draft_ms=DraftStepTiming(mean=None, median=None, p10=None, p90=None),
        verify_fit=VerifyFit(t0_ms=None, t1_ms_per_token=None, mean_residual_ms_by_drafted={}),
        overhead_fit=OverheadFit(o0_ms=None, o1_ms_per_token=None),
        cost_ratio=json_num(r1 / t_ar) if math.isfinite(r1) and t_ar else None,
        engine_round_fit=EngineRoundFit(
            r0_ms=json_num(r0), r1_ms_per_token=json_num(r1), points=points
        ),
    )
    if points == 1:
        warnings.append(
            "one measured γ: predictions for other γ assume round time does not grow with γ"
        )

    # the one speed model, with the engine's whole round (draft + verify) as r0 + r1·γ
    alpha_v = alpha.value if alpha is not None else None
    curves = {
        "iid": {g: roi.expected_tokens(g, min(max(alpha_v, 0.0), 1.0)) for g in range(1, g_max + 1)}
        if alpha_v is not None
        else {},
        "empirical": {
            int(k): v for k, v in (top.truncation if top else {}).items() if v is not None
        },
    }

    def acceptance(g: int) -> GammaAcceptance:
        pg = per_gamma.get(str(g))
        return GammaAcceptance(
            alpha_exact_beta=None,
            accepted_proposed=pg.accepted_proposed if pg else None,
            mean_tokens_per_round=pg.mean_accepted_length if pg else None,
            t_verify_ms_median=None,
            peak_memory_mb=None,
            tokens_per_round=pg.mean_accepted_length.value
            if pg and pg.mean_accepted_length
            else None,
        )

    model = TimingModel(t_ar, 0.0, r0, r1)
    table = gamma_table(g_max, curves, model, base1, specs1, acceptance, n_boot, level)
    warnings += table.warnings
    if not base1:
        warnings.append(
            "no baseline measured: add a setting without speculation (a server with gamma: 0)"
        )

    conc_rows, stops = concurrency_table(base, specs, metrics, s.margin, n_boot, level)
    # the step-cost model and the γ schedule by concurrency (docs/theory.md §15)
    batch_model, schedule = schedule_parts(base, specs, metrics, per_gamma, s)
    engine = EngineSection(
        backend=next((r.get("backend") for r in all_recs if r.get("backend")), None),
        reference_concurrency=c_ref,
        acceptance_source=sorted(sources)[0] if len(sources) == 1 else sorted(sources),
        counters_polluted_batches=polluted_batches(metrics),
        per_gamma=per_gamma,
        accept_length_gauge=_mean_gauge(metrics),
        concurrency=conc_rows,
        stops_paying=stops,
        metrics_available=all(m.get("metrics_available", True) for m in metrics),
        # the chosen setting's: set by `serving_entry` once the verdict is known
        chosen_gamma=None,
        chosen_stops_paying_at=None,
        batch_model=batch_model,
        schedule=schedule,
    )
    if sched:  # the schedule setting beside off and the best fixed γ, per concurrency
        engine.measured_schedule = schedule_rows(
            base, specs, sched, sched_metrics, conc_rows, n_boot, level
        )
    if metrics and not engine.metrics_available:
        warnings.append("the server has no /metrics: acceptance unavailable, latency measured")
    figures = CellFigures(
        n_prompts=n_prompts,
        baseline=baseline,
        baseline_step_ms=json_num(base_itl.value),
        baseline_peak_memory_mb=None,
        timing=timing,
        alpha=alpha,
        measured=measured,
        table=table,
        warnings=list(dict.fromkeys(warnings)),
        engine=engine,
    )
    return figures, base1, settings1


def _mean_gauge(metrics: list[Record]) -> float | None:
    gauges = [x for m in metrics if (x := m.get("accept_length_gauge")) is not None]
    return json_num(float(np.mean(gauges))) if gauges else None


def serving_entry(
    cell: tuple[str, float], grp: Group, s: AnalysisSettings
) -> tuple[WorkloadResult, list[Record], Settings]:
    """The analysed and decided entry of one group of an engine run (`cell`: its workload and
    temperature), with the ranking of every setting (method × γ), the concurrency at which the
    chosen one stops paying, and the baseline and settings its verdict rests on."""
    figures, base1, settings1 = analyse_engine_group(
        grp["baseline"], grp["spec"], grp["metrics"], s
    )
    quoted = figures.quoted()
    rec = decide_entry(quoted, base1, settings1, grp["failed"], s.margin, s.ci_level, s.n_boot)
    # content validity from the stored answers (docs/theory.md §13); may remake the decision
    checked = engine_validity(
        rec, quoted, base1, settings1, grp["failed"], s.margin, s.ci_level, s.n_boot
    )
    rec, base1, settings1 = checked.recommendation, checked.base, checked.settings
    restricted = bool(rec.basis is not None and rec.basis.prompts == "non_degenerate" and base1)
    basis = figures_basis(figures.n_prompts, restricted)
    if restricted:  # every figure over the verdict's prompts, every concurrency (prompt_basis)
        clean = without_prompts(grp, set_aside(basis, checked.content))
        own, _, _ = analyse_engine_group(clean["baseline"], clean["spec"], clean["metrics"], s)
        # the content checks' warnings after the figures' own
        own.warnings = list(dict.fromkeys([*own.warnings, *checked.warnings]))
        figures = own
        assert own.engine is not None  # an engine group's figures hold its section
        basis = figures_basis(
            own.n_prompts,
            True,
            engine_counter_figures(
                own.engine.acceptance_source,
                bool(own.engine.per_gamma),
                bool(own.engine.concurrency),
            ),
        )
    else:
        figures.warnings += checked.warnings
    eng = figures.engine
    assert eng is not None  # an engine group's figures hold its section
    # the ranking rests on the prompts the verdict used (degenerate answers left out, §13);
    # when none is left it shows every prompt, and no row clears: there is no verdict
    used = {r["prompt_id"] for r in base1}
    every = {r["prompt_id"] for r in grp["baseline"]}
    keep = used if used else every
    ranking = engine_ranking(
        [r for r in grp["baseline"] if r["prompt_id"] in keep],
        {k: [r for r in rs if r["prompt_id"] in keep] for k, rs in grp["spec"].items()},
        grp["metrics"], eng.reference_concurrency, s.margin, s.ci_level, s.n_boot,
    )  # fmt: skip
    eng.ranking_basis = (
        "all prompts"
        if used == every
        else f"{len(used)} non-degenerate of {len(every)} prompts"
        if used
        else "all prompts (degenerate output: no verdict)"
    )
    if not used:
        for r in ranking:
            r.clears = False
    on = rec.verdict == "on"
    pick = rec if on else rec.best_measured
    key = (pick.drafter, pick.policy, pick.gamma) if pick is not None else (None, None, None)
    for r in ranking:
        r.chosen = on and (r.drafter, r.policy, r.gamma) == key
    eng.ranking = ranking
    chosen = rec.gamma or (pick.gamma if pick is not None else None)
    row = next((r for r in ranking if (r.drafter, r.policy, r.gamma) == key), None)
    eng.chosen_gamma = chosen
    eng.chosen_setting = row.label if row is not None and chosen else None
    if row is not None and chosen:
        eng.chosen_stops_paying_at = row.stops_paying_at
    else:
        eng.chosen_stops_paying_at = (
            sp.stops_paying_at if chosen and (sp := eng.stops_paying.get(str(chosen))) else None
        )
    entry = figures.entry(cell, s, rec, checked.content, basis, grp)
    return entry, base1, settings1
