"""The console summary of a run (printed at the end of `run` / `report`): the same first screen as
the documents — the pool-wide decision per temperature, each workload's own optimum, counts of
failed and unmeasured cells — and the console every command prints through.

The console itself, and plain mode, live in report/terminal.py (light enough for every command
module to import at start-up); they are re-exported here.
"""

from __future__ import annotations

from rich.box import Box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.report.render.terminal import (
    compact_box,
    make_console,
    plain_mode,
    set_plain,
    table_box,
)
from specbench.report.sections.load_sections import steady_lines
from specbench.report.sections.mix_sections import mix_lines
from specbench.report.sections.paste import paste_line
from specbench.report.sections.profile_box import profile_box
from specbench.report.sections.text import (
    BATCH_ONE_TITLE,
    cost_change,
    counts_line,
    decision_warnings,
    engine_header,
    num_text,
    pool_decision,
    routing_note,
    setting_label,
    shown_setting,
)

__all__ = ["compact_box", "make_console", "plain_mode", "render_summary", "set_plain", "table_box"]


def _bold(text: str) -> str:
    """The documents' **bold** as rich markup; the rest escaped (an interval such as
    "[unbounded, unbounded]" would otherwise be read as a markup tag and vanish)."""
    parts = [escape(p) for p in text.split("**")]
    return "".join(f"[bold]{p}[/bold]" if i % 2 else p for i, p in enumerate(parts))


def render_summary(console: Console, results: RunResults) -> None:
    run = results.run
    engine = engine_header(results)
    if engine:
        console.print(engine, markup=False)
    profile = profile_box(results)
    if profile is not None:  # the decision at the deployment profile comes first
        console.print(f"[bold]{escape(profile.title)}[/bold]")
        for item in profile.items:
            console.print(f"  {_bold(item)}", soft_wrap=item.startswith("paste"))
        console.print(f"  {escape(profile.note)}", highlight=False)
    console.print(f"[bold]{BATCH_ONE_TITLE}[/bold]")
    for g in results.global_.by_temperature:
        tail = "." if g.verdict == "not_measured" else f"; {escape(routing_note(g))}."
        console.print(f"  {_bold(pool_decision(g, run.margin))}{tail}")
        paste = paste_line(results, g)
        if paste:
            console.print(f"    paste (T={g.temperature:g}): {paste}", markup=False, soft_wrap=True)
    console.print(f"  {escape(counts_line(results))}.")
    for w in decision_warnings(results):
        text = escape(w)
        console.print(f"  [yellow]{text}[/yellow]" if w.startswith("⚠") else f"  {text}")
    for line in steady_lines(results) + mix_lines(
        results
    ):  # open-loop steady states: achieved vs offered, kept up
        console.print(f"  [yellow]{escape(line)}[/yellow]" if "⚠" in line else f"  {escape(line)}")
    console.print(_own_pool_table(results, compact_box(console)))
    console.print(_own_pool_legend(results.run.ci_level), markup=False, highlight=False)
    for e in results.workloads:
        if e.adaptive:  # an adaptive run: the sequential verdict each cell stopped on (§14)
            console.print(f"  adaptive {e.workload} T={e.temperature:g}: {e.adaptive.summary}")
    for e in results.workloads:
        if e.request_sampling:
            console.print(request_mix_line(e), markup=False)
    _print_costs(console, results)
    if results.failures:
        console.print(f"[red]{len(results.failures)} prompt(s) failed:[/red]")
        for f in results.failures[:20]:
            console.print(
                f"  {f.workload} T={f.temperature:g} γ={f.gamma} {f.prompt_id}: {f.error}",
                markup=False,
            )


def _own_pool_legend(ci_level: float) -> str:
    return (
        "  setting: the workload's own; (γ=k) and (speedup): speculation stays off, γ=k the "
        "best measured over the verdict's prompts (its speedup in parentheses: not shown to "
        f"clear the margin, not a result); CI: the speedup's {ci_level:.0%} interval; "
        "ITL ms: baseline → speculative."
    )


def _own_pool_table(results: RunResults, rules: Box) -> Table:
    """Each workload's own optimum, one line per workload at 80 columns: short cells, the long
    words in the legend printed below it (only the workload name, the user's, may wrap)."""
    table = Table(
        title="If you route a workload to its own pool",
        title_justify="left",
        box=rules,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("workload", overflow="fold")
    for col in ("T", "setting", "speedup", "CI", "ITL ms", "verdict"):
        table.add_column(col, justify="right", no_wrap=True)
    for e in results.workloads:
        rec = e.recommendation
        b = rec.itl_ms.baseline if rec.itl_ms else None
        s = rec.itl_ms.speculative if rec.itl_ms else None
        itl_txt = f"{b:.1f}→{s:.1f}" if b is not None and s is not None else "–"
        verdict = rec.verdict.upper().replace("_", " ")
        best, est = shown_setting(rec)  # as the documents' table
        on = rec.verdict == "on"
        table.add_row(
            e.workload,
            f"{e.temperature:g}",
            setting_label(rec)
            if on
            else f"({setting_label(best)})"
            if best
            else "–"
            if rec.verdict == "not_measured"
            else "off",
            _speedup_cell(est, on),
            _ci_range(est),
            itl_txt,
            f"[green]{verdict}[/green]"
            if verdict == "ON"
            else f"[yellow]{verdict}[/yellow]"
            if verdict == "UNDECIDED"
            else f"[red]{verdict}[/red]",
        )
    return table


def _speedup_cell(est: EstimateJSON | None, on: bool) -> str:
    """ "1.33×" for an ON cell; "(1.12×)" for the best measured setting of a cell that stays off:
    the verdict's own figure, not a result to deploy."""
    text = num_text(est.value if est else None, "{:.2f}×")
    return text if on or text == "–" else f"({text})"


def _ci_range(est: EstimateJSON | None) -> str:
    """ "1.07–1.44": a speedup's 95% interval, compact; "–" where it has none."""
    if est is None or est.value is None or est.ci95 == (None, None):
        return "–"
    lo, hi = est.ci95
    return f"{num_text(lo, '{:.2f}')}–{num_text(hi, '{:.2f}')}"


def _print_costs(console: Console, results: RunResults) -> None:
    """One line of cost per 10⁶ output tokens, off → on, where a GPU-hour price was given."""
    econ = results.economics
    if econ.gpu_hour_usd is None:
        return
    parts = [
        f"{r.workload} T={r.temperature:g} c={load.concurrency}: {cost_change(r, load)}"
        for r in econ.by_workload
        for load in r.loads
        if load.usd_per_million_off is not None
    ]
    console.print(
        f"Cost per 10⁶ output tokens (${econ.gpu_hour_usd:g}/GPU-hour × {econ.gpus}, "
        f"off → each workload's setting): {'; '.join(parts) or '–'}",
        markup=False,
    )


def request_mix_line(e: WorkloadResult) -> str:
    """One line on how a logged workload's requests were sampled (`dataset.sampling: logged`)."""
    m = e.request_sampling
    if m is None:
        return ""
    temps = ", ".join(f"{t}×{n}" for t, n in m.temperature.items())
    top_p = ", ".join(f"{p}×{n}" for p, n in m.top_p.items())
    mt = m.max_tokens
    capped = f", {m.max_tokens_capped} capped at max_new_tokens" if m.max_tokens_capped else ""
    return (
        f"{e.workload}: {m.prompts} requests as logged (T={e.temperature:g} is their mean): "
        f"T {temps}; top_p {top_p}; max tokens {mt.min}–{mt.max} (median {mt.median:g})"
        f"{capped}"
    )
