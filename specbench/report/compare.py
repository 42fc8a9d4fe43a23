"""Render a run comparison (`analysis.compare.Comparison`): console table, Markdown for a PR
comment, JUnit XML for CI test reports, and a JSON document.

Rows marked "unchanged" collapse into one line in the console and Markdown outputs (JSON and JUnit
keep every row). Changes are absolute for α and relative (%) for everything else, matching how the
minimum effects are set.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from specbench.analysis.compare import (
    IMPROVED,
    INFORMATIONAL,
    METRICS,
    MISSING,
    NOT_COMPARABLE,
    NOT_SIGNIFICANT,
    REGRESSED,
    UNCHANGED,
    Comparison,
    Row,
)
from specbench.analysis.serialize import json_safe

# 1 — first version; 2 — rows carry raw_p_value (p_value is Holm-adjusted), mde, needs; kinds
#     acceptance/speedup/timing; status "informational"; failures, strict, subject, runs, tested
COMPARE_JSON_SCHEMA = 2
_FORMATS = {
    "alpha": "{:.3f}",
    "accepted_length": "{:.2f}",
    "baseline_itl_ms": "{:.2f}",
    "itl_ms": "{:.2f}",
    "baseline_tokens_per_s": "{:.1f}",
    "tokens_per_s": "{:.1f}",
    "speedup": "{:.3f}×",
    "speedup_recommended": "{:.3f}×",
}
_STYLE = {
    REGRESSED: "bold red",
    IMPROVED: "green",
    NOT_SIGNIFICANT: "yellow",
    NOT_COMPARABLE: "dim",
    INFORMATIONAL: "dim",
    UNCHANGED: "dim",
}


def fmt_value(row: Row, value: float | str | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return "–"
    return _FORMATS.get(row.metric.split("@")[0], "{:.3f}").format(value)


def fmt_change(row: Row) -> str:
    if row.change is None or not math.isfinite(row.change):
        return "–"
    metric = METRICS.get(row.metric.split("@")[0])
    if metric is not None and metric.relative and row.relative_change is not None:
        return f"{100 * row.relative_change:+.1f} %"
    return f"{row.change:+.3f}"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def fmt_mde(row: Row) -> str:
    """The minimum detectable effect: ± relative (%) or absolute (α)."""
    if row.method.startswith("exact"):
        return "exact"
    if row.mde is None or not math.isfinite(row.mde):
        return "–"
    metric = METRICS.get(row.metric.split("@")[0])
    if metric is not None and metric.relative:
        return f"±{100 * row.mde:.1f} %"
    return f"±{row.mde:.3f}"


def _group(row: Row) -> str:
    return f"{row.workload} T={row.temperature:g}"


def headline(c: Comparison) -> str:
    n = len(c.regressions)
    counts = c.counts()
    kinds = (IMPROVED, NOT_SIGNIFICANT, NOT_COMPARABLE, INFORMATIONAL, UNCHANGED)
    parts = [f"{counts[s]} {s}" for s in kinds]
    lead = f"{n} regression{'s' if n != 1 else ''}" if n else "no regression"
    if c.failures:
        k = len(c.failures)
        lead += f", {k} failed/missing" + (" (--strict: counts)" if c.strict else "")
    return f"{lead} ({', '.join(parts)})"


def thresholds_line(c: Comparison) -> str:
    t = c.thresholds
    return (
        f"significance {t.significance:g} family-wise (Holm over {c.tested} tested rows); "
        f"run-to-run CV of speedup {100 * t.run_to_run_cv:g} %; runs {c.runs[0]} vs {c.runs[1]}; "
        f"subject {c.subject}; minimum effects: α −{t.alpha_drop:g}, accepted length "
        f"−{100 * t.accepted_length_drop:g} %, speedup −{100 * t.speedup_drop:g} %, latency "
        f"+{100 * t.latency_rise:g} %, tokens/s −{100 * t.throughput_drop:g} %"
    )


def _unchanged_line(rows: list[Row]) -> str:
    per_group = Counter(_group(r) for r in rows)
    detail = ", ".join(f"{g} ({k})" for g, k in per_group.items())
    return f"{len(rows)} rows unchanged (within the minimum effect): {detail}"


def _blocked_lines(rows: list[Row]) -> list[str]:
    """One line per reason for the rows folded away (informational absolute timing), with the
    workload × temperature groups (and row counts) it applies to."""
    per: dict[tuple[str, str], Counter[str]] = {}
    for r in rows:
        per.setdefault((r.status, r.reason), Counter())[_group(r)] += 1
    return [
        f"{sum(c.values())} timing rows {status} in "
        f"{', '.join(f'{g} ({k})' for g, k in c.items())} — {why}"
        for (status, why), c in per.items()
    ]


def power_lines(c: Comparison) -> list[str]:
    """Per metric class, the largest minimum detectable effect among the gated rows (80 % power
    at Holm's strictest level) and what the minimum effect needs where it is out of reach."""
    out = []
    for kind in ("acceptance", "speedup", "timing"):
        rows = [r for r in c.rows if r.kind == kind and r.mde is not None]
        if not rows:
            continue
        worst = max(rows, key=lambda r: r.mde or 0.0)
        short = [r for r in rows if r.needs and not r.needs.startswith("enough")]
        line = (
            f"power ({100 * c.thresholds.power:g} %): {kind} rows detect changes of "
            f"{fmt_mde(worst)} or more (worst: {_group(worst)} {worst.label})"
        )
        if short:
            line += (
                f"; {len(short)} of {len(rows)} cannot see their minimum effect, e.g. "
                f"{_group(short[0])} {short[0].label} needs {short[0].needs}"
            )
        else:
            line += "; every row can see its minimum effect"
        out.append(line)
    return out


def _collapsed(r: Row) -> bool:
    """Rows folded into summary lines: unchanged ones, and timing rows blocked for a stated
    reason (a verdict flip is always listed on its own line)."""
    if r.status in (UNCHANGED, INFORMATIONAL):
        return r.status == UNCHANGED or bool(r.reason)
    flip = r.metric == "verdict" and "flip" in r.note
    return r.status == NOT_COMPARABLE and bool(r.reason) and r.reason != MISSING and not flip


def _shown(c: Comparison, show_all: bool) -> tuple[list[Row], list[Row], list[Row]]:
    """(rows listed, unchanged rows folded, not-comparable rows folded)."""
    if show_all:
        return list(c.rows), [], []
    shown = [r for r in c.rows if not _collapsed(r)]
    unchanged = [r for r in c.rows if r.status == UNCHANGED]
    blocked = [r for r in c.rows if _collapsed(r) and r.status != UNCHANGED]
    return shown, unchanged, blocked


def _note(r: Row) -> str:
    needs = f"needs {r.needs}" if r.status == NOT_SIGNIFICANT and r.needs else ""
    return "; ".join(x for x in (r.note, r.reason, needs) if x)


def render_console(console: Console, c: Comparison, show_unchanged: bool = False) -> None:
    shown, unchanged, blocked = _shown(c, show_unchanged)
    table = Table(title=f"specbench compare: {c.base_label} → {c.new_label}", title_justify="left")
    for col in (
        "workload",
        "T",
        "metric",
        "base",
        "new",
        "change",
        "p (Holm)",
        "MDE",
        "status",
        "note",
    ):
        table.add_column(
            col,
            justify="right" if col in ("T", "base", "new", "change", "p (Holm)", "MDE") else "left",
        )
    for r in shown:
        style = _STYLE.get(r.status, "")
        table.add_row(
            r.workload,
            f"{r.temperature:g}",
            r.label,
            fmt_value(r, r.base),
            fmt_value(r, r.new),
            fmt_change(r),
            fmt_p(r.p_value),
            fmt_mde(r),
            f"[{style}]{r.status}[/{style}]",
            _note(r),
        )
    if shown:
        console.print(table)
    else:
        console.print(f"specbench compare: {c.base_label} → {c.new_label}")
    if unchanged:
        console.print(_unchanged_line(unchanged))
    for line in _blocked_lines(blocked):
        console.print(f"[dim]{line}[/dim]")
    console.print(f"tests: {c.mode}; {thresholds_line(c)}")
    for line in power_lines(c):
        console.print(line)
    for d in c.env_differences:
        console.print(f"environment differs: {d.field}: {d.base} vs {d.new}")
    for f in c.failures:
        style = "bold red" if c.strict else "yellow"
        console.print(f"[{style}]failed/missing[/{style}] {f}")
    for d in c.forced_differences:
        console.print(f"[yellow]forced[/yellow] {d.field} differs: {d.base} vs {d.new}")
    for key in c.only_in_base:
        console.print(f"only in base: {key[0]} T={key[1]:g} (not compared)")
    for key in c.only_in_new:
        console.print(f"only in new: {key[0]} T={key[1]:g} (not compared)")
    for note in c.notes:
        console.print(f"[yellow]note[/yellow] {note}")
    style = "bold red" if c.exit_code else "green"
    console.print(f"[{style}]{headline(c)}[/{style}] → exit code {c.exit_code}")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(c: Comparison, show_unchanged: bool = False) -> str:
    """A PR comment: headline, the table of changed rows, one line for the unchanged ones."""
    shown, unchanged, blocked = _shown(c, show_unchanged)
    mark = "❌" if c.exit_code else "✅"
    lines = [
        f"## {mark} specbench compare: {headline(c)}",
        "",
        f"`{c.base_label}` → `{c.new_label}` · tests: {c.mode} · {thresholds_line(c)}",
        "",
    ]
    if shown:
        lines += [
            "| workload | T | metric | base | new | change | p (Holm) | MDE | status | note |",
            "|---|---:|---|---:|---:|---:|---:|---:|---|---|",
        ]
        for r in shown:
            status = f"**{r.status}**" if r.status == REGRESSED else r.status
            cells = [
                r.workload,
                f"{r.temperature:g}",
                r.label,
                fmt_value(r, r.base),
                fmt_value(r, r.new),
                fmt_change(r),
                fmt_p(r.p_value),
                fmt_mde(r),
                status,
                _note(r),
            ]
            lines.append("| " + " | ".join(_md_cell(x) for x in cells) + " |")
        lines.append("")
    if unchanged:
        lines += [_unchanged_line(unchanged), ""]
    if blocked:
        lines += [*[f"- {_md_cell(x)}" for x in _blocked_lines(blocked)], ""]
    extra = [f"failed/missing: {f}" for f in c.failures]
    extra += power_lines(c)
    extra += [f"environment differs: {d.field}: {d.base} vs {d.new}" for d in c.env_differences]
    extra += [f"forced: {d.field} differs ({d.base} vs {d.new})" for d in c.forced_differences]
    extra += [f"only in base: {k[0]} T={k[1]:g}" for k in c.only_in_base]
    extra += [f"only in new: {k[0]} T={k[1]:g}" for k in c.only_in_new]
    extra += c.notes
    if extra:
        lines += ["Notes:", *[f"- {_md_cell(x)}" for x in extra], ""]
    lines.append(
        f"Exit code {c.exit_code}: 0 no regression, 1 regression (or failed/missing rows under "
        "--strict), 2 bad input (a regression is significant after Holm's adjustment AND beyond "
        "the minimum effect; a verdict flip is always listed, and ON → OFF counts when the "
        "speedup behind it regressed)."
    )
    return "\n".join(lines) + "\n"


def to_junit(c: Comparison) -> str:
    """JUnit XML: one suite per workload × temperature, one test case per metric; regressions
    are failures, not-comparable rows are skipped."""
    root = ET.Element("testsuites", name="specbench compare")
    suites: dict[str, ET.Element] = {}
    totals: Counter[tuple[str, str]] = Counter()
    for r in c.rows:
        name = _group(r)
        suite = suites.get(name)
        if suite is None:
            suite = ET.SubElement(root, "testsuite", name=name)
            suites[name] = suite
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"specbench.compare.{r.workload}.T{r.temperature:g}",
            name=r.label,
        )
        summary = (
            f"{r.label}: {fmt_value(r, r.base)} → {fmt_value(r, r.new)} ({fmt_change(r)}, "
            f"p={fmt_p(r.p_value)}) {r.status}" + (f"; {_note(r)}" if _note(r) else "")
        )
        totals[(name, "tests")] += 1
        if r.status == REGRESSED:
            fail = ET.SubElement(case, "failure", message=summary, type="regression")
            fail.text = f"{r.method}\n{thresholds_line(c)}"
            totals[(name, "failures")] += 1
        elif r.status in (NOT_COMPARABLE, INFORMATIONAL):
            ET.SubElement(case, "skipped", message=summary)
            totals[(name, "skipped")] += 1
        else:
            ET.SubElement(case, "system-out").text = summary
    if c.failures:
        suite = ET.SubElement(root, "testsuite", name="failed or missing")
        suites["failed or missing"] = suite
        for f in c.failures:
            case = ET.SubElement(suite, "testcase", classname="specbench.compare.missing", name=f)
            totals[("failed or missing", "tests")] += 1
            if c.strict:
                ET.SubElement(case, "failure", message=f, type="failed or missing")
                totals[("failed or missing", "failures")] += 1
            else:
                ET.SubElement(case, "skipped", message=f)
                totals[("failed or missing", "skipped")] += 1
    for name, suite in suites.items():
        for k in ("tests", "failures", "skipped"):
            suite.set(k, str(totals[(name, k)]))
        suite.set("errors", "0")
    root.set("tests", str(sum(totals[(n, "tests")] for n in suites)))
    root.set("failures", str(sum(totals[(n, "failures")] for n in suites)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def to_dict(c: Comparison) -> dict[str, Any]:
    """The `--json` document (schema COMPARE_JSON_SCHEMA)."""
    doc = {
        "schema": COMPARE_JSON_SCHEMA,
        "base": c.base_label,
        "new": c.new_label,
        "mode": c.mode,
        "exit_code": c.exit_code,
        "regressions": len(c.regressions),
        "counts": c.counts(),
        "thresholds": c.thresholds.model_dump(),
        "rows": [asdict(r) for r in c.rows],
        "environment_differences": [asdict(d) for d in c.env_differences],
        "forced_differences": [asdict(d) for d in c.forced_differences],
        "only_in_base": [{"workload": w, "temperature": t} for w, t in c.only_in_base],
        "only_in_new": [{"workload": w, "temperature": t} for w, t in c.only_in_new],
        "notes": c.notes,
        "failures": c.failures,
        "strict": c.strict,
        "subject": c.subject,
        "runs": {"base": c.runs[0], "new": c.runs[1]},
        "tested_rows": c.tested,
        "power_summary": power_lines(c),
    }
    cleaned: dict[str, Any] = json_safe(doc)
    return cleaned
