"""Rendering of `specbench accept`: the JSON document, the rich console tables, and the
Markdown/HTML report (same blocks and renderers as `run`'s report) with an α-by-position plot.

JSON document (schema 1), `kind: "accept"`: `pair`, `data` (source, requests, positions,
bucket_by, skipped_rows), `settings`, `options`, `timing`, `provisional`, `buckets` (one per
bucket, each with `settings` holding α, its position profile, drift and the rollout `plan`),
`overall` (every request as one bucket) and `warnings`. Every interval is
`{"value", "ci95": [lo, hi]}`.

With no measured timing (`timing.source` "default", or a bare --cost-ratio) the draft cost is
assumed, so `provisional` is true, every verdict is labelled provisional (the exit code is
unaffected), and the console and reports lead with what needs no timing: α, ā(γ), and the
break-even cost ratio, the largest T_d / T_ar at which some γ still pays
(`roi.break_even_cost_ratio` at the α that gives the plan's pooled ā(γ)).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from specbench.analysis import roi
from specbench.analysis.rollout import AcceptResult, BucketResult, RolloutPlan, TimeModel
from specbench.analysis.stats import Estimate
from specbench.report.blocks import (
    Block,
    Bullets,
    Heading,
    Image,
    Para,
    TableBlock,
    to_html,
    to_markdown,
)

SCHEMA = 1


def _f(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def _est(e: Estimate | None) -> dict[str, Any] | None:
    return None if e is None else {"value": _f(e.value), "ci95": [_f(e.lo), _f(e.hi)]}


def _ci(e: Estimate | None, fmt: str = "{:.3f}", ends: str | None = None) -> str:
    """ "value [lo, hi]"; `ends` formats the interval ends (default: like the value)."""
    if e is None or not math.isfinite(e.value):
        return "–"
    if not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return fmt.format(e.value)
    end = ends or fmt
    return f"{fmt.format(e.value)} [{end.format(e.lo)}, {end.format(e.hi)}]"


def _unit(tm: TimeModel) -> str:
    return "ms" if tm.units == "ms" else "×T_ar"


def is_provisional(result: AcceptResult) -> bool:
    """Some verdict rests on an assumed draft cost (no measured timing)."""
    return any(b.time_model.provisional for b in [*result.buckets, result.overall])


PROVISIONAL = (
    "PROVISIONAL: no measured timing, the draft cost is assumed; trust α, ā(γ) and the "
    "break-even cost ratio, and measure the timing (--timings RUN/results.json, "
    "--measure-timing or --t-target/--t-draft) before acting on a verdict"
)


def timing_to_dict(tm: TimeModel) -> dict[str, Any]:
    return {
        "source": tm.source,
        "provisional": tm.provisional,
        "detail": tm.detail or None,
        "units": tm.units,
        "t_target_ms": _f(tm.t_target_ms),
        "t_draft_ms": _f(tm.t_draft_ms),
        "verify_base_ms": _f(tm.verify_base_ms),
        "verify_slope_ms": _f(tm.verify_slope_ms),
        "cost_ratio": _f(tm.cost_ratio),
    }


def timing_line(tm: TimeModel) -> str:
    u = _unit(tm)
    what = {
        "default": f"no timing given: assuming T_d / T_ar = {tm.cost_ratio:g} (times in units of "
        "T_ar); pass --measure-timing, --timings RUN/results.json or --t-target/--t-draft",
        "flags": "from the command line",
        "run": f"from {tm.detail}",
        "measured": f"measured here ({tm.detail})",
    }[tm.source]
    return (
        f"timing: T_ar = {tm.t_target_ms:.3g} {u}, T_d = {tm.t_draft_ms:.3g} {u} (c = "
        f"{tm.cost_ratio:.3f}), T_t(γ) = {tm.verify_base_ms:.3g} + {tm.verify_slope_ms:.3g}·γ {u}; "
        f"{what}"
    )


def break_even_cost(plan: RolloutPlan, tm: TimeModel) -> tuple[int, Estimate] | None:
    """(γ, c*): the largest draft cost ratio T_d / T_ar at which speculation still pays, at the γ
    that tolerates the most, with the interval that ā(γ)'s interval implies (c* rises with ā).
    None when the verify is not priced as T_ar + slope·γ (the break-even model of `roi`)."""
    if not plan.options or not math.isclose(tm.verify_base_ms, tm.t_target_ms):
        return None
    slope = tm.verify_slope_ms / tm.t_target_ms

    def c(gamma: int, tokens: float) -> float:
        if not math.isfinite(tokens):
            return math.nan
        tau = min(max(tokens, 1.0), gamma + 1.0)
        return roi.break_even_cost_ratio(gamma, roi.alpha_from_accepted(tau, gamma), slope)

    def point(o: Any) -> float:
        v = c(o.gamma, o.expected_tokens.value)
        return v if math.isfinite(v) else -math.inf

    best = max(plan.options, key=point)
    e = best.expected_tokens
    return best.gamma, Estimate(c(best.gamma, e.value), c(best.gamma, e.lo), c(best.gamma, e.hi))


def plan_to_dict(plan: RolloutPlan, tm: TimeModel) -> dict[str, Any]:
    best = next((o for o in plan.options if o.gamma == plan.best_gamma), None)
    be = break_even_cost(plan, tm)
    return {
        "verdict": plan.verdict,
        "provisional": tm.provisional,
        "gamma": plan.gamma,
        "best_gamma": plan.best_gamma,
        "speedup": _est(plan.speedup),
        "expected_tokens": _est(best.expected_tokens) if best else None,
        "itl_ms": {"baseline": _f(plan.itl_baseline_ms), "speculative": _est(plan.itl_ms)},
        "break_even_alpha": _f(plan.break_even_alpha),
        "break_even_cost_ratio": (None if be is None else {"gamma": be[0], **(_est(be[1]) or {})}),
        "reason": plan.reason,
        "gammas": [
            {
                "gamma": o.gamma,
                "expected_tokens": _est(o.expected_tokens),
                "speedup": _est(o.speedup),
                "itl_ms": _est(o.itl_ms),
            }
            for o in plan.options
        ],
    }


def bucket_to_dict(b: BucketResult) -> dict[str, Any]:
    acc = b.acceptance
    return {
        "bucket": acc.bucket,
        "requests": acc.requests,
        "tokens": acc.tokens,
        "greedy_agreement": _est(acc.greedy_agreement),
        "target_nll_per_token": _f(acc.target_nll),
        "timing": timing_to_dict(b.time_model),
        "settings": [
            {
                "setting": s.label,
                "alpha": _est(s.alpha),
                "tokens": s.tokens,
                "requests": s.requests,
                "requests_needed": s.requests_needed,
                "profile": [
                    {
                        "positions": [p.start, p.stop],
                        "alpha": _est(p.alpha),
                        "tokens": p.tokens,
                        "requests": p.requests,
                    }
                    for p in s.profile
                ],
                "drift": _est(s.drift),
                "drift_positions": (
                    [[p.start, p.stop] for p in s.drift_bins] if s.drift_bins else None
                ),
                "plan": plan_to_dict(plan, b.time_model),
            }
            for s, plan in zip(acc.settings, b.plans, strict=True)
        ],
        "warnings": b.warnings,
    }


def to_json(result: AcceptResult) -> dict[str, Any]:
    m = result.meta
    return {
        "schema": SCHEMA,
        "kind": "accept",
        "estimator": m["estimator"],
        "pair": {k: m.get(k) for k in ("target", "draft", "device", "dtype")},
        "data": {
            "source": m["source"],
            "bucket_by": m.get("bucket_by"),
            "requests": m["requests"],
            "positions": m["positions"],
            "skipped_rows": result.skipped_rows,
        },
        "settings": m["settings"],
        "options": {
            k: m.get(k)
            for k in (
                "max_context",
                "overflow",
                "chat_template",
                "gamma_max",
                "margin",
                "ci_level",
                "bootstrap",
                "target_halfwidth",
                "position_edges",
            )
        },
        "timing": timing_to_dict(result.overall.time_model),
        "provisional": is_provisional(result),
        "measured_timing": m.get("measured_timing"),
        "buckets": [bucket_to_dict(b) for b in result.buckets],
        "overall": bucket_to_dict(result.overall),
        "warnings": result.warnings,
    }


# --------------------------------------------------------------------------------------------
# console


def _summary_rows(result: AcceptResult, greedy: bool = True) -> list[list[str]]:
    """One row per bucket × setting (the overall bucket last); `greedy` adds the greedy
    agreement column."""
    rows = []
    for b in [*result.buckets, result.overall]:
        acc = b.acceptance
        for i, (s, plan) in enumerate(zip(acc.settings, b.plans, strict=True)):
            best = next((o for o in plan.options if o.gamma == plan.best_gamma), None)
            rows.append(
                [
                    acc.bucket if i == 0 else "",
                    s.label,
                    str(s.requests),
                    str(s.tokens),
                    _ci(s.alpha, "{:.3f}", "{:.2f}"),
                    *([_ci(acc.greedy_agreement) if i == 0 else ""] if greedy else []),
                    str(plan.best_gamma) if plan.best_gamma else "–",
                    f"{best.expected_tokens.value:.2f}" if best else "–",
                    _ci(plan.speedup, "{:.2f}×", "{:.2f}") if plan.best_gamma else "1×",
                    plan.verdict.upper()
                    + (f" γ={plan.gamma}" if plan.gamma else "")
                    + (" (provisional)" if b.time_model.provisional else ""),
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


def _lead_rows(result: AcceptResult) -> list[list[str]]:
    """α, ā(γ) and the break-even cost ratio per bucket × setting: what needs no timing."""
    rows = []
    for b in [*result.buckets, result.overall]:
        for i, (s, plan) in enumerate(zip(b.acceptance.settings, b.plans, strict=True)):
            be = break_even_cost(plan, b.time_model)
            opt = plan.options[be[0] - 1] if be else None
            rows.append(
                [
                    b.acceptance.bucket if i == 0 else "",
                    s.label,
                    _ci(s.alpha, "{:.3f}", "{:.2f}"),
                    str(be[0]) if be else "–",
                    _ci(opt.expected_tokens, "{:.2f}") if opt else "–",
                    (_ci(be[1], "{:.3f}") if be[1].value > 0 else "never pays") if be else "–",
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


def _profile_header(result: AcceptResult) -> list[str]:
    edges = result.meta["position_edges"]
    return ["bucket", "setting"] + [f"{a}–{b - 1}" for a, b in itertools.pairwise(edges)]


def _profile_rows(result: AcceptResult) -> list[list[str]]:
    edges = result.meta["position_edges"]
    rows = []
    for b in result.buckets:
        for s in b.acceptance.settings:
            by_start = {p.start: p for p in s.profile}
            cells = [
                f"{by_start[a].alpha.value:.3f} ({by_start[a].tokens})" if a in by_start else "–"
                for a in edges[:-1]
            ]
            rows.append([b.acceptance.bucket, s.label, *cells])
    return rows


def render_console(console: Console, result: AcceptResult) -> None:
    m = result.meta
    console.print(
        f"specbench accept: {m['target']} ← {m['draft']} on {m['source']}: {m['requests']} "
        f"requests, {m['positions']} response positions ({m['estimator']})"
    )
    provisional = is_provisional(result)
    if provisional:
        console.print(f"[bold yellow]{PROVISIONAL}[/bold yellow]")
        lead = Table(
            title="α, ā(γ) and break-even draft cost per bucket (no timing needed)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for col in LEAD_HEADER:
            lead.add_column(col, justify="left" if col in ("bucket", "setting") else "right")
        for row in _lead_rows(result):
            lead.add_row(*row)
        console.print(lead)
    title = "α and rollout plan per bucket" + (" (provisional verdicts)" if provisional else "")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for col in SUMMARY_HEADER:
        if col != "greedy agreement":
            table.add_column(col, justify="left" if col in ("bucket", "setting") else "right")
    for row in _summary_rows(result, greedy=False):
        verdict = row[-1]
        row[-1] = (
            f"[green]{verdict}[/green]" if verdict.startswith("ON") else f"[red]{verdict}[/red]"
        )
        table.add_row(*row)
    console.print(table)
    prof = Table(
        title="α by position in the response (tokens in brackets)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for col in _profile_header(result):
        prof.add_column(col, justify="left" if col in ("bucket", "setting") else "right")
    for row in _profile_rows(result):
        prof.add_row(*row)
    console.print(prof)
    for b in result.buckets:
        acc = b.acceptance
        console.print(
            f"{acc.bucket}: greedy agreement {_ci(acc.greedy_agreement)}, target NLL "
            f"{acc.target_nll:.3f} nats/token"
        )
        for s, plan in zip(acc.settings, b.plans, strict=True):
            label = " (provisional)" if b.time_model.provisional else ""
            console.print(f"  {s.label}: {plan.verdict.upper()}{label}: {plan.reason}")
    lines = {timing_line(b.time_model) for b in [*result.buckets, result.overall]}
    for line in sorted(lines):
        console.print(line)
    for w in result.warnings:
        console.print(f"[yellow]warning[/yellow] {w}")
    for b in [*result.buckets, result.overall]:
        for w in b.warnings:
            console.print(f"[yellow]warning[/yellow] {b.acceptance.bucket} {w}")
    if result.skipped_rows:
        first = result.skipped_rows[0]
        console.print(
            f"[yellow]skipped {len(result.skipped_rows)} malformed row(s)[/yellow]; first: "
            f"{first['row']}: {first['reason']}"
        )


# --------------------------------------------------------------------------------------------
# Markdown / HTML


def build_blocks(result: AcceptResult, plot: str | None) -> list[Block]:
    m = result.meta
    blocks: list[Block] = [Heading("specbench accept: offline acceptance and rollout plan", 1)]
    if is_provisional(result):
        blocks += [
            Para(f"**{PROVISIONAL}.**"),
            Heading("α, ā(γ) and break-even draft cost"),
            TableBlock(LEAD_HEADER, _lead_rows(result)),
        ]
    blocks += [
        Para(
            f"Target `{m['target']}`, draft `{m['draft']}` on {m['device']} ({m['dtype']}); "
            f"{m['requests']} logged requests from `{m['source']}`, {m['positions']} response "
            f"positions, bucketed by `{m.get('bucket_by') or '(none)'}`."
        ),
        Para(
            "α is the mean exact β = Σ min(p, q) over every response position, teacher-forced "
            "(one forward of each model over prompt + logged response; docs/theory.md §2 (a)); intervals "
            "are 95 % percentile bootstrap over requests. The plan predicts ā(γ) and the speedup "
            "under iid acceptance; the speedup interval carries α's interval (timings taken as "
            f"exact). ON only if the low end of the speedup interval at the best γ exceeds 1 + "
            f"{m['margin']:g}."
        ),
        Heading("Summary (provisional verdicts)" if is_provisional(result) else "Summary"),
        TableBlock(SUMMARY_HEADER, _summary_rows(result)),
        Bullets(sorted({timing_line(b.time_model) for b in [*result.buckets, result.overall]})),
        Heading("α by position in the response"),
        TableBlock(_profile_header(result), _profile_rows(result)),
    ]
    if plot:
        blocks.append(Image(plot, "α by position in the response"))
    for b in result.buckets:
        acc = b.acceptance
        blocks.append(Heading(f"{acc.bucket}"))
        items = [
            f"{acc.requests} requests, {acc.tokens} positions; greedy agreement "
            f"{_ci(acc.greedy_agreement)}; target NLL {acc.target_nll:.3f} nats/token",
        ]
        for s, plan in zip(acc.settings, b.plans, strict=True):
            verdict = f"**ON, γ = {plan.gamma}**" if plan.verdict == "on" else "**OFF**"
            if b.time_model.provisional:
                verdict += " (provisional)"
            drift = f"; drift along the response {_ci(s.drift, '{:+.3f}')}" if s.drift else ""
            items.append(f"{s.label}: α {_ci(s.alpha)}{drift}. {verdict}: {plan.reason}.")
        blocks.append(Bullets(items))
        u = _unit(b.time_model)
        header = ["γ"] + [h for s in acc.settings for h in (f"ā {s.label}", f"speedup {s.label}")]
        rows = (
            [
                [str(g)]
                + [
                    cell
                    for plan in b.plans
                    for cell in (
                        _ci(plan.options[g - 1].expected_tokens, "{:.2f}"),
                        _ci(plan.options[g - 1].speedup, "{:.2f}×"),
                    )
                ]
                for g in range(1, len(b.plans[0].options) + 1)
            ]
            if b.plans
            else []
        )
        blocks.append(TableBlock(header, rows))
        blocks.append(Para(f"Baseline ITL {b.time_model.t_target_ms:.3g} {u}."))
        if b.warnings:
            blocks.append(Bullets([f"⚠ {w}" for w in b.warnings]))
    if result.warnings:
        blocks += [Heading("Warnings"), Bullets(result.warnings)]
    if result.skipped_rows:
        blocks += [
            Heading("Skipped rows"),
            Bullets([f"{r['row']}: {r['reason']}" for r in result.skipped_rows]),
        ]
    return blocks


def plot_profile(path: Path, result: AcceptResult) -> None:
    """α against position bin, one panel per setting, one line per bucket, with CI bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = result.labels
    fig, axes = plt.subplots(
        1, len(labels), figsize=(4.2 * len(labels), 3.6), dpi=100, squeeze=False
    )
    for ax, label in zip(axes[0], labels, strict=True):
        for b in result.buckets:
            s = next((x for x in b.acceptance.settings if x.label == label), None)
            if s is None or not s.profile:
                continue
            xs = [(p.start + p.stop - 1) / 2 for p in s.profile]
            ys = [p.alpha.value for p in s.profile]
            err = [
                [
                    max(p.alpha.value - p.alpha.lo, 0) if math.isfinite(p.alpha.lo) else 0
                    for p in s.profile
                ],
                [
                    max(p.alpha.hi - p.alpha.value, 0) if math.isfinite(p.alpha.hi) else 0
                    for p in s.profile
                ],
            ]
            ax.errorbar(xs, ys, yerr=err, marker="o", ms=3, capsize=2, label=b.acceptance.bucket)
        ax.set_xscale("log", base=2)
        ax.set_title(label)
        ax.set_xlabel("position in the response")
        ax.set_ylabel("α (exact β)")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(out_dir: Path, result: AcceptResult, doc: dict[str, Any]) -> None:
    """accept.json, report.md, report.html and plots/accept_profile.png in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "accept.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    (out_dir / "plots").mkdir(exist_ok=True)
    plot_profile(out_dir / "plots" / "accept_profile.png", result)
    blocks = build_blocks(result, "plots/accept_profile.png")
    (out_dir / "report.md").write_text(to_markdown(blocks))
    (out_dir / "report.html").write_text(to_html(blocks, out_dir, "specbench accept"))
