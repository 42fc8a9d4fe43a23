"""The engine report's "γ schedule by concurrency" section: per measured concurrency the throughput
ratio of each γ with its interval and simultaneous lower bound, the chosen k, the ranges, the
step-cost model and its leave-one-out error, and the throughput plot (docs/theory.md §15)."""

from __future__ import annotations

from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_engine import (
    BatchModel,
    EngineSection,
    GammaSchedule,
)
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.report.render.blocks import Block, Bullets, Heading, Image, Para, TableBlock
from specbench.report.sections.text import entry_slug, num_text


def _ratio(est: EstimateJSON | None) -> str:
    if est is None or est.value is None:
        return "–"
    lo, hi = est.ci95
    ci = f" [{num_text(lo, '{:.2f}')}, {num_text(hi, '{:.2f}')}]"
    return f"{est.value:.2f}×{ci}"


def ranges_text(ranges: list[tuple[int, int, int]], measured_up_to: int) -> str:
    """ "1–3: γ=4; 4–7: γ=2; 8+: off" (the open end written as +)."""
    parts = []
    for lo, hi, k in ranges:
        span = (
            f"{lo}+" if hi > measured_up_to and (lo, hi, k) == tuple(ranges[-1]) else f"{lo}–{hi}"
        )
        parts.append(f"{span}: {'off' if k == 0 else f'γ={k}'}")
    return "; ".join(parts)


def _table(s: GammaSchedule) -> TableBlock:
    gammas = sorted({int(g) for r in s.concurrencies for g in r.throughput_ratio})
    header = ["concurrency", "off tok/s"]
    for g in gammas:
        header += [f"γ={g} throughput ratio [CI]", f"γ={g} simult. lower"]
    header += ["chosen", "chosen ÷ best fixed γ [CI]"]
    rows = []
    for r in s.concurrencies:
        line = [str(r.concurrency), num_text(r.throughput_tok_s.get("0"), "{:.1f}")]
        for g in gammas:
            line += [
                _ratio(r.throughput_ratio.get(str(g))),
                num_text(r.decision_lower_bound.get(str(g)), "{:.3f}"),
            ]
        line.append("off" if r.gamma == 0 else f"γ={r.gamma}")
        line.append(
            "–"
            if r.best_fixed_gamma is None
            else (
                f"γ={r.best_fixed_gamma} itself"
                if r.vs_best_fixed is None
                else f"{_ratio(r.vs_best_fixed)} vs γ={r.best_fixed_gamma}"
            )
        )
        rows.append(line)
    return TableBlock(header, rows)


def model_text(m: BatchModel | None) -> list[str]:
    if m is None:
        return []
    if not m.fitted:
        return [f"step-cost model not fitted: {m.reason}"]
    p = m.params_ms or {}
    knee = (
        "the verify stays memory-bound over the measured cells"
        if m.knee_tokens is None
        else f"compute-bound from {m.knee_tokens:g} tokens a step"
    )
    worst = (
        f"median |error| {m.loo_median_abs_rel_error:.1%}, worst {m.loo_max_abs_rel_error:.1%}"
        if m.loo_median_abs_rel_error is not None and m.loo_max_abs_rel_error is not None
        else "not measurable (too few cells)"
    )
    return [
        f"step-cost model {m.form}: v0 {num_text(p.get('v0'))}, vb {num_text(p.get('vb'))}, "
        f"vc {num_text(p.get('vc'))}, d0 {num_text(p.get('d0'))}, db {num_text(p.get('db'))} "
        f"ms; {knee}",
        f"its error, measured leave-one-out over this run's {m.n_cells} measured cells (each "
        f"cell predicted by the fit to the others): {worst}",
    ]


def _model_table(m: BatchModel) -> TableBlock:
    return TableBlock(
        ["b", "γ", "τ", "step ms (TPOT × τ)", "fit ms", "leave-one-out ms", "error"],
        [
            [
                str(c.b),
                str(c.gamma),
                num_text(c.tau, "{:.2f}"),
                num_text(c.step_ms, "{:.2f}"),
                num_text(c.fitted_ms, "{:.2f}"),
                num_text(c.loo_ms, "{:.2f}"),
                num_text(c.loo_rel_error, "{:+.1%}"),
            ]
            for c in m.cells or []
        ],
    )


def schedule_blocks(e: WorkloadResult, eng: EngineSection, images: dict[str, str]) -> list[Block]:
    s = eng.schedule
    if s is None:
        return []
    notes = [
        f"schedule [lo, hi, k]: {ranges_text(s.ranges, s.measured_up_to)} "
        f"(measured up to concurrency {s.measured_up_to}; beyond it the last k is extrapolated)",
        *(
            f"switch between {b.between[0]} and {b.between[1]} at {b.at} ("
            + ("the model's crossing" if b.rule == "model" else "geometric midpoint, no model")
            + ")"
            for b in s.boundaries
        ),
        f"decision: {s.rule}; family: {s.family}; P(ON anywhere when no γ beats 1 + margin) "
        f"≤ {num_text(s.false_on_rate, '{:.1%}')}",
        *model_text(eng.batch_model),
        f"export: `specbench schedule RUN_DIR --format vllm|trtllm|json --workload {e.workload} "
        f"--temperature {e.temperature:g}`",
    ]
    blocks: list[Block] = [
        Heading(f"γ schedule by concurrency: {e.workload} (T = {e.temperature:g})", 3),
        Para(
            f"Throughput = {s.throughput}; ratio to the engine without speculation at that concurrency."
        ),
        _table(s),
        Bullets(notes),
    ]
    if eng.batch_model is not None and eng.batch_model.cells:
        blocks.append(_model_table(eng.batch_model))
    key = f"schedule_{entry_slug(e)}"
    if images.get(key):
        blocks.append(Image(images[key], f"throughput against concurrency, {entry_slug(e)}"))
    return blocks
