"""The `schedule` and `batch_model` parts of an engine entry's `engine` section: the step-cost
model fitted to this run's cells with its leave-one-out error (`batch_model`), and the γ schedule
by concurrency (`gamma_schedule`) with each concurrency's measured and predicted throughput
(docs/theory.md §15).

    eng["batch_model"], eng["schedule"] = schedule_parts(base, specs, metrics, per_gamma, s)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from specbench.analysis.arithmetic.batch_model import (
    StepCell,
    StepCostModel,
    fit_step_costs,
    leave_one_out,
    predicted_throughput,
)
from specbench.analysis.decide.gamma_schedule import (
    OPEN_END,
    CellDecision,
    accept_lengths,
    decide_schedule,
    family_rate,
    model_switch,
    schedule_ranges,
)
from specbench.analysis.documents.results_model_base import EstimateJSON, est_model
from specbench.analysis.documents.results_model_engine import (
    BatchModel,
    EngineGammaCounters,
    GammaSchedule,
    StepCellFit,
)
from specbench.analysis.documents.settings import AnalysisSettings
from specbench.analysis.estimators.latency import decode_tokens_ms, pair, speedup_of
from specbench.analysis.serving.serving_acceptance import concurrency_of
from specbench.analysis.serving.serving_concurrency import output_throughput
from specbench.analysis.serving.spec_counters import SpecCounters
from specbench.analysis.stats.serialize import json_num
from specbench.record_line import RecordLine

Record = RecordLine
MODEL_FORM = "T(b,γ) = v0 + vb·b + vc·max(0, b(γ+1) − knee) + γ·(d0 + db·b)"


def _cell_tau(recs: Sequence[Record], metrics: Sequence[Record], gamma: int, c: int) -> float:
    """τ of one cell: its batches' counters summed, else its requests' (NaN when neither)."""
    if gamma == 0:
        return 1.0
    units = [
        SpecCounters.from_dict(x)
        for m in metrics
        if int(m["gamma"]) == gamma and concurrency_of(m) == c and (x := m.get("spec_counters"))
    ] or [SpecCounters.from_dict(x) for r in recs if (x := r.get("spec_counters"))]
    drafts = sum(u.drafts for u in units)
    return 1.0 + sum(u.accepted for u in units) / drafts if drafts > 0 else math.nan


def in_flight(recs: Sequence[Record], c: int) -> int:
    """Sequences in flight at concurrency c: c, or fewer when a batch held fewer requests."""
    per_repeat = len(recs) / max(len({int(r.get("repeat", 0)) for r in recs}), 1)
    return max(1, int(min(c, per_repeat)))


def step_cells(
    base: Sequence[Record], specs: Mapping[int, Sequence[Record]], metrics: Sequence[Record]
) -> list[StepCell]:
    """Every measured (c, γ): b = min(c, requests measured), step ms = pooled TPOT × τ."""
    out = []
    for g, recs in [(0, base), *sorted(specs.items())]:
        for c in sorted({concurrency_of(r) for r in recs}):
            here = [r for r in recs if concurrency_of(r) == c]
            pairs = [m for m in map(decode_tokens_ms, here) if m is not None]
            tau = _cell_tau(here, metrics, g, c)
            if not pairs or not math.isfinite(tau):
                continue
            itl = sum(ms for _, ms in pairs) / sum(t for t, _ in pairs)
            out.append(StepCell(in_flight(here, c), g, itl * tau, tau))
    return out


def _model_json(model: StepCostModel | None, cells: list[StepCell]) -> BatchModel:
    if model is None:
        return BatchModel(
            form=MODEL_FORM,
            n_cells=len(cells),
            fitted=False,
            reason="fewer than 4 measured cells or one batch size: no fit",
        )
    errors = leave_one_out(cells, model)
    loo = [abs(e.loo_rel_error) for e in errors if e.loo_rel_error is not None]
    return BatchModel(
        form=MODEL_FORM,
        n_cells=len(cells),
        fitted=True,
        params_ms={
            "v0": json_num(model.v0_ms),
            "vb": json_num(model.vb_ms),
            "vc": json_num(model.vc_ms),
            "d0": json_num(model.d0_ms),
            "db": json_num(model.db_ms),
        },
        knee_tokens=json_num(model.knee_tokens),
        error_measured="leave-one-out over this run's measured cells (b, γ)",
        cells=[
            StepCellFit(
                b=e.cell.b,
                gamma=e.cell.gamma,
                tau=json_num(e.cell.tau),
                step_ms=json_num(e.cell.step_ms),
                fitted_ms=json_num(e.fitted_ms),
                loo_ms=json_num(e.loo_ms),
                loo_rel_error=json_num(e.loo_rel_error),
            )
            for e in errors
        ],
        loo_median_abs_rel_error=json_num(float(np.median(loo))) if loo else None,
        loo_max_abs_rel_error=json_num(max(loo)) if loo else None,
    )


def _throughput(
    recs: Sequence[Record], metrics: Sequence[Record], gamma: int, c: int
) -> float | None:
    """Measured output tokens/s at c: the batches' own, else c·Σ tokens / Σ e2e (Little's law)."""
    tp = output_throughput(metrics, gamma, c)
    if tp is not None:
        return tp
    here = [r for r in recs if concurrency_of(r) == c and r.get("wall_ms")]
    if not here:
        return None
    tok = sum(float(r.get("new_tokens") or 0) for r in here)
    return json_num(min(c, len(here)) * tok / sum(float(r["wall_ms"]) for r in here) * 1000.0)


def _against_best_fixed(
    d: CellDecision,
    base: Sequence[Record],
    specs: Mapping[int, Sequence[Record]],
    s: AnalysisSettings,
) -> tuple[int | None, EstimateJSON | None]:
    """The schedule's choice at d.concurrency (off, or a measured fixed γ) against the fixed γ
    with the highest point throughput ratio there: (that γ, the throughput ratio paired by
    prompt (and engine start)), from this run's records — the schedule's range at a measured
    concurrency runs exactly that setting. No ratio when the choice is that best γ itself."""
    c = d.concurrency
    valued = {g: e.value for g, e in d.ratios.items() if e is not None and e.value is not None}
    if not valued:
        return None, None
    best = max(valued, key=lambda g: valued[g])
    if d.gamma == best:
        return best, None
    at_c = lambda recs: [r for r in recs if concurrency_of(r) == c]  # noqa: E731
    chosen = at_c(base if d.gamma == 0 else specs[d.gamma])
    est = speedup_of(pair(at_c(specs[best]), chosen, end_to_end=True), s.n_boot, s.ci_level)
    return best, est_model(est)


def schedule_parts(
    base: Sequence[Record],
    specs: Mapping[int, Sequence[Record]],
    metrics: Sequence[Record],
    per_gamma: Mapping[str, EngineGammaCounters],
    s: AnalysisSettings,
) -> tuple[BatchModel, GammaSchedule | None]:
    """(batch_model, schedule) of one workload × temperature; schedule None without a baseline
    or without a γ measured at some concurrency."""
    cells = step_cells(base, specs, metrics)
    model = fit_step_costs(cells)
    model_json = _model_json(model, cells)
    decisions, how = decide_schedule(base, specs, s.margin, s.ci_level, s.n_boot)
    if not decisions or not any(d.ratios for d in decisions):
        return model_json, None
    tau = accept_lengths(per_gamma)
    ranges, boundaries = schedule_ranges(
        [(d.concurrency, d.gamma) for d in decisions], model_switch(model, tau), OPEN_END
    )
    rows = []
    for d in decisions:
        gammas = [0, *sorted(d.ratios)]
        b = in_flight([r for r in base if concurrency_of(r) == d.concurrency], d.concurrency)
        row = d.row(
            {
                str(g): _throughput(base if g == 0 else specs[g], metrics, g, d.concurrency)
                for g in gammas
            },
            {
                str(g): json_num(predicted_throughput(model, b, g, tau[g]))
                if model is not None and g in tau
                else None
                for g in gammas
            },
        )
        row.best_fixed_gamma, row.vs_best_fixed = _against_best_fixed(d, base, specs, s)
        rows.append(row)
    return model_json, GammaSchedule(
        rule=(
            "per concurrency: ON with the γ of highest throughput ratio among those whose "
            "simultaneous lower bound > 1 + margin, else off (k = 0)"
        ),
        family=how,
        false_on_rate=json_num(family_rate(s.ci_level)),
        margin=s.margin,
        throughput="closed-loop output tokens/s: ratio of Σ tokens / Σ e2e paired by prompt",
        concurrencies=rows,
        ranges=ranges,
        boundaries=boundaries,
        measured_up_to=max(d.concurrency for d in decisions),
        extrapolated_from=max(d.concurrency for d in decisions) + 1,
    )
