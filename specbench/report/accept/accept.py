"""Rendering of `specbench accept`: the JSON document (accept.json), the rich console tables, and
the report files (report.md, report.html, plots/accept_profile.png; `report.accept.accept_document`).

The JSON document is `analysis.documents.accept_model.AcceptResults` (schema 1, `kind: "accept"`; its JSON
Schema is docs/schema/accept.schema.json): `pair`, `data` (source, requests, positions,
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

import json
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from specbench.analysis.documents.accept_model import AcceptResults
from specbench.analysis.rollout import AcceptResult, accept_results
from specbench.report.accept.accept_document import build_blocks, plot_profile
from specbench.report.accept.accept_tables import (
    LEAD_HEADER,
    PROVISIONAL,
    SUMMARY_HEADER,
    all_buckets,
    ci_cell,
    lead_rows,
    profile_header,
    profile_rows,
    summary_rows,
    timing_lines,
)
from specbench.report.render.blocks import to_html, to_markdown


def as_document(result: AcceptResult | AcceptResults) -> AcceptResults:
    """The accept.json document of an analysis result (a document is returned as it is)."""
    return result if isinstance(result, AcceptResults) else accept_results(result)


def render_console(console: Console, result: AcceptResult | AcceptResults) -> None:
    doc = as_document(result)
    console.print(
        f"specbench accept: {doc.pair.target} ← {doc.pair.draft} on {doc.data.source}: "
        f"{doc.data.requests} requests, {doc.data.positions} response positions "
        f"({doc.estimator})"
    )
    if doc.provisional:
        console.print(f"[bold yellow]{PROVISIONAL}[/bold yellow]")
        lead = Table(
            title="α, ā(γ) and break-even draft cost per bucket (no timing needed)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for col in LEAD_HEADER:
            lead.add_column(col, justify="left" if col in ("bucket", "setting") else "right")
        for row in lead_rows(doc):
            lead.add_row(*row)
        console.print(lead)
    title = "α and rollout plan per bucket" + (" (provisional verdicts)" if doc.provisional else "")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for col in SUMMARY_HEADER:
        if col != "greedy agreement":
            table.add_column(col, justify="left" if col in ("bucket", "setting") else "right")
    for row in summary_rows(doc, greedy=False):
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
    for col in profile_header(doc):
        prof.add_column(col, justify="left" if col in ("bucket", "setting") else "right")
    for row in profile_rows(doc):
        prof.add_row(*row)
    console.print(prof)
    for b in doc.buckets:
        console.print(
            f"{b.bucket}: greedy agreement {ci_cell(b.greedy_agreement)}, target NLL "
            f"{b.target_nll_per_token:.3f} nats/token"
        )
        for s in b.settings:
            label = " (provisional)" if b.timing.provisional else ""
            console.print(f"  {s.setting}: {s.plan.verdict.upper()}{label}: {s.plan.reason}")
    for line in timing_lines(doc):
        console.print(line)
    for w in doc.warnings:
        console.print(f"[yellow]warning[/yellow] {w}")
    for b in all_buckets(doc):
        for w in b.warnings:
            console.print(f"[yellow]warning[/yellow] {b.bucket} {w}")
    if doc.data.skipped_rows:
        first = doc.data.skipped_rows[0]
        console.print(
            f"[yellow]skipped {len(doc.data.skipped_rows)} malformed row(s)[/yellow]; first: "
            f"{first.row}: {first.reason}"
        )


def write_report(out_dir: Path, result: AcceptResult | AcceptResults) -> None:
    """accept.json (`AcceptResults.to_json`), report.md, report.html and
    plots/accept_profile.png in `out_dir`."""
    results = as_document(result)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results.to_json(), indent=2, allow_nan=False)
    (out_dir / "accept.json").write_text(text + "\n")
    (out_dir / "plots").mkdir(exist_ok=True)
    plot_profile(out_dir / "plots" / "accept_profile.png", results)
    blocks = build_blocks(results, "plots/accept_profile.png")
    (out_dir / "report.md").write_text(to_markdown(blocks))
    (out_dir / "report.html").write_text(to_html(blocks, out_dir, "specbench accept"))
