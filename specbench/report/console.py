"""The console summary of a run: the recommendation table printed at the end of `run`/`report`."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from specbench.report.documents import _ci, _setting
from specbench.report.text import pool_sentence


def render_summary(console: Console, results: dict[str, Any]) -> None:
    table = Table(title="specbench: recommendation per workload", title_justify="left")
    for col in (
        "workload",
        "T",
        "α (exact β) [95% CI]",
        "best γ",
        "speedup [95% CI]",
        "ITL ms",
        "verdict",
    ):
        table.add_column(col, justify="left" if col == "workload" else "right")
    for e in results["workloads"]:
        rec = e["recommendation"]
        itl = rec.get("itl_ms") or {}
        b, s = itl.get("baseline"), itl.get("speculative")
        itl_txt = f"{b:.2f} → {s:.2f}" if b is not None and s is not None else "–"
        verdict = rec["verdict"].upper()
        speed = (
            rec["speedup"]
            if rec["verdict"] == "on"
            else (rec.get("best_measured") or {}).get("speedup")
        )
        table.add_row(
            e["workload"],
            f"{e['temperature']:g}",
            _ci(e.get("alpha")),
            _setting(rec)
            if rec["verdict"] == "on"
            else f"off (best {rec.get('best_measured', {}).get('gamma', '–')})",
            _ci(speed, "{:.2f}×"),
            itl_txt,
            f"[green]{verdict}[/green]" if verdict == "ON" else f"[red]{verdict}[/red]",
        )
    console.print(table)
    for e in results["workloads"]:
        for w in e.get("warnings", []):
            console.print(f"[yellow]warning[/yellow] {e['workload']} T={e['temperature']:g}: {w}")
    for e in results["workloads"]:
        if e.get("request_sampling"):
            console.print(request_mix_line(e))
    for g in results.get("global", {}).get("by_temperature", []):
        console.print(pool_sentence(g))
    if results.get("failures"):
        console.print(f"[red]{len(results['failures'])} prompt(s) failed:[/red]")
        for f in results["failures"][:20]:
            console.print(
                f"  {f['workload']} T={f['temperature']:g} γ={f['gamma']} {f['prompt_id']}: {f['error']}"
            )


def request_mix_line(e: dict[str, Any]) -> str:
    """One line on how a logged workload's requests were sampled (`dataset.sampling: logged`)."""
    m = e["request_sampling"]
    temps = ", ".join(f"{t}×{n}" for t, n in m["temperature"].items())
    top_p = ", ".join(f"{p}×{n}" for p, n in m["top_p"].items())
    mt = m["max_tokens"]
    capped = (
        f", {m['max_tokens_capped']} capped at max_new_tokens" if m["max_tokens_capped"] else ""
    )
    return (
        f"{e['workload']}: {m['prompts']} requests as logged (T={e['temperature']:g} is their mean): "
        f"T {temps}; top_p {top_p}; max tokens {mt['min']}–{mt['max']} (median {mt['median']:g})"
        f"{capped}"
    )
