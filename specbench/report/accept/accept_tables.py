"""The cells and rows of `specbench accept`'s tables, shared by the console and the Markdown/HTML
report: α and the plan per bucket × setting, the timing line, α by response position, and the
lead table of what needs no timing (α, ā(γ), the break-even draft cost ratio).

They read the accept.json document (`analysis.documents.accept_model.AcceptResults`).
"""

from __future__ import annotations

import itertools
import math

from specbench.analysis.documents.accept_model import (
    AcceptResults,
    BreakEvenCost,
    Bucket,
    Interval,
    Timing,
)

PROVISIONAL = (
    "PROVISIONAL: no measured timing, the draft cost is assumed; trust α, ā(γ) and the "
    "break-even cost ratio, and measure the timing (--timings RUN/results.json, "
    "--measure-timing or --t-target/--t-draft) before acting on a verdict"
)


def ci_cell(
    e: Interval | BreakEvenCost | None, fmt: str = "{:.3f}", ends: str | None = None
) -> str:
    """ "value [lo, hi]"; `ends` formats the interval ends (default: like the value)."""
    if e is None or not math.isfinite(e.value):
        return "–"
    lo, hi = e.ci95
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return fmt.format(e.value)
    end = ends or fmt
    return f"{fmt.format(e.value)} [{end.format(lo)}, {end.format(hi)}]"


def unit(tm: Timing) -> str:
    return "ms" if tm.units == "ms" else "×T_ar"


def all_buckets(doc: AcceptResults) -> list[Bucket]:
    """Every bucket, the overall one last."""
    return [*doc.buckets, doc.overall]


def timing_line(tm: Timing) -> str:
    u = unit(tm)
    what = {
        "default": f"no timing given: assuming T_d / T_ar = {tm.cost_ratio:g} (times in units of "
        "T_ar); pass --measure-timing, --timings RUN/results.json or --t-target/--t-draft",
        "flags": "from the command line",
        "run": f"from {tm.detail or ''}",
        "measured": f"measured here ({tm.detail or ''})",
    }[tm.source]
    return (
        f"timing: T_ar = {tm.t_target_ms:.3g} {u}, T_d = {tm.t_draft_ms:.3g} {u} (c = "
        f"{tm.cost_ratio:.3f}), T_t(γ) = {tm.verify_base_ms:.3g} + {tm.verify_slope_ms:.3g}·γ {u}; "
        f"{what}"
    )


def timing_lines(doc: AcceptResults) -> list[str]:
    """The distinct timing lines of every bucket, sorted."""
    return sorted({timing_line(b.timing) for b in all_buckets(doc)})


def summary_rows(doc: AcceptResults, greedy: bool = True) -> list[list[str]]:
    """One row per bucket × setting (the overall bucket last); `greedy` adds the greedy
    agreement column."""
    rows = []
    for b in all_buckets(doc):
        for i, s in enumerate(b.settings):
            plan = s.plan
            best = next((o for o in plan.gammas if o.gamma == plan.best_gamma), None)
            rows.append(
                [
                    b.bucket if i == 0 else "",
                    s.setting,
                    str(s.requests),
                    str(s.tokens),
                    ci_cell(s.alpha, "{:.3f}", "{:.2f}"),
                    *([ci_cell(b.greedy_agreement) if i == 0 else ""] if greedy else []),
                    str(plan.best_gamma) if plan.best_gamma else "–",
                    f"{best.expected_tokens.value:.2f}" if best else "–",
                    ci_cell(plan.speedup, "{:.2f}×", "{:.2f}") if plan.best_gamma else "1×",
                    plan.verdict.upper()
                    + (f" γ={plan.gamma}" if plan.gamma else "")
                    + (" (provisional)" if b.timing.provisional else ""),
                ]
            )
    return rows


LEAD_HEADER = [
    "bucket",
    "setting",
    "α [95% CI]",
    "γ",
    "ā(γ)",
    "pays while T_d/T_ar <",
]


def lead_rows(doc: AcceptResults) -> list[list[str]]:
    """α, ā(γ) and the break-even cost ratio per bucket × setting: what needs no timing."""
    rows = []
    for b in all_buckets(doc):
        for i, s in enumerate(b.settings):
            be = s.plan.break_even_cost_ratio
            opt = s.plan.gammas[be.gamma - 1] if be else None
            rows.append(
                [
                    b.bucket if i == 0 else "",
                    s.setting,
                    ci_cell(s.alpha, "{:.3f}", "{:.2f}"),
                    str(be.gamma) if be else "–",
                    ci_cell(opt.expected_tokens, "{:.2f}") if opt else "–",
                    (ci_cell(be, "{:.3f}") if be.value > 0 else "never pays") if be else "–",
                ]
            )
    return rows


SUMMARY_HEADER = [
    "bucket",
    "setting",
    "req",
    "tokens",
    "α [95% CI]",
    "greedy agreement",
    "best γ",
    "ā(γ)",
    "speedup [95% CI]",
    "verdict",
]


def profile_header(doc: AcceptResults) -> list[str]:
    edges = doc.options.position_edges
    return ["bucket", "setting"] + [f"{a}–{b - 1}" for a, b in itertools.pairwise(edges)]


def profile_rows(doc: AcceptResults) -> list[list[str]]:
    """α (tokens) per response-position bin, one row per bucket × setting (no overall bucket)."""
    edges = doc.options.position_edges
    rows = []
    for b in doc.buckets:
        for s in b.settings:
            by_start = {p.positions[0]: p for p in s.profile}
            cells = [
                f"{by_start[a].alpha.value:.3f} ({by_start[a].tokens})" if a in by_start else "–"
                for a in edges[:-1]
            ]
            rows.append([b.bucket, s.setting, *cells])
    return rows
