"""Render a run comparison (`analysis.compare.verdict.Comparison`): console table, Markdown for a
PR comment, JUnit XML for CI test reports, and a JSON document.

Rows marked "unchanged" collapse into one line in the console and Markdown outputs (JSON and JUnit
keep every row). Changes are absolute for α and relative (%) for everything else, matching how the
minimum effects are set.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict
from typing import Any

from pydantic import JsonValue
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.analysis.compare.metrics import (
    IMPROVED,
    INCONCLUSIVE,
    INFORMATIONAL,
    METRICS,
    NOT_COMPARABLE,
    NOT_SIGNIFICANT,
    REGRESSED,
    UNCHANGED,
)
from specbench.analysis.compare.rows import MISSING, Row
from specbench.analysis.compare.verdict import Comparison
from specbench.analysis.stats.serialize import json_safe
from specbench.report.render.terminal import compact_box

# 1 — first version; 2 — rows carry raw_p_value (p_value is Holm-adjusted), mde, needs; kinds
#     acceptance/speedup/timing; status "informational"; failures, strict, subject, runs, tested
# 3 — rows carry `gating`; status "inconclusive"; `verdict` (pass / regression / inconclusive),
#     `inconclusive`, `allow_inconclusive`; p_value is Holm-adjusted over the gating rows only;
#     mde is the harmful direction's (a relative drop ≤ 1 for higher-is-better ratios)
COMPARE_JSON_SCHEMA = 3
UNBOUNDED_REL = 10.0  # a relative figure above 1000 % says nothing a number would: "unbounded"
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
_COLUMNS = ("workload", "T", "metric", "base", "new", "change", "p (Holm)", "MDE", "status", "note")
_NUMERIC = ("T", "base", "new", "change", "p (Holm)", "MDE")
_STYLE = {
    REGRESSED: "bold red",
    INCONCLUSIVE: "bold yellow",
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


def _metric(row: Row) -> Any:
    name = row.metric.split("@")[0]
    return METRICS.get("speedup" if name.startswith("speedup[") else name)


def fmt_change(row: Row) -> str:
    """The change, bounded to its quantity's range: relative ones above +1000 % print as
    "> +1000 %" (a relative change cannot fall below −100 %)."""
    if row.change is None or not math.isfinite(row.change):
        return "–"
    metric = _metric(row)
    if metric is not None and metric.relative and row.relative_change is not None:
        if row.relative_change > UNBOUNDED_REL:
            return f"> +{100 * UNBOUNDED_REL:.0f} %"
        return f"{100 * max(row.relative_change, -1.0):+.1f} %"
    return f"{row.change:+.3f}"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def fmt_mde(row: Row) -> str:
    """The minimum detectable effect in the harmful direction, bounded to its quantity's range:
    α (in [0, 1]) and relative drops (in [0, 100 %)) print "unbounded" when no change of the
    quantity could be detected; a relative rise above 1000 % too."""
    if row.method.startswith("exact"):
        return "exact"
    if row.mde is None or math.isnan(row.mde):
        return "–"
    metric = _metric(row)
    if metric is None or not metric.relative:
        return "unbounded" if row.mde >= 1.0 else f"±{row.mde:.3f}"
    if metric.higher_is_better:  # a drop: 100 % would be the whole quantity
        return "unbounded" if row.mde >= 0.995 else f"−{100 * row.mde:.1f} %"
    return "unbounded" if row.mde > UNBOUNDED_REL else f"+{100 * row.mde:.1f} %"


def group_label(row: Row) -> str:
    return f"{row.workload} T={row.temperature:g}"


def headline(c: Comparison) -> str:
    n = len(c.regressions)
    counts = c.counts()
    kinds = (IMPROVED, NOT_SIGNIFICANT, NOT_COMPARABLE, INFORMATIONAL, UNCHANGED)
    parts = [f"{counts[s]} {s}" for s in kinds]
    gating = len(c.gating_rows)
    lead = f"{n} regression{'s' if n != 1 else ''}" if n else "no regression"
    if not n and c.is_inconclusive:
        k = len(c.inconclusive)
        lead = (
            f"inconclusive: {k} of {gating} gating rows cannot detect their minimum effect"
            if gating
            else "inconclusive: no gating row was measured"
        )
        if c.allow_inconclusive:
            lead += " (--allow-inconclusive: passes)"
    elif not n:
        lead += f" (every one of {gating} gating rows can detect its minimum effect)"
    if c.failures:
        k = len(c.failures)
        lead += f", {k} failed/missing" + (" (--strict: counts)" if c.strict else "")
    return f"{lead} ({', '.join(parts)})"


def thresholds_line(c: Comparison) -> str:
    t = c.thresholds
    return (
        f"gating rows: {', '.join(t.gate)}; "
        f"significance {t.significance:g} family-wise (Holm over {c.tested} tested gating rows); "
        f"run-to-run CV of speedup {100 * t.run_to_run_cv:g} %; runs {c.runs[0]} vs {c.runs[1]}; "
        f"subject {c.subject}; minimum effects: α −{t.alpha_drop:g}, accepted length "
        f"−{100 * t.accepted_length_drop:g} %, speedup −{100 * t.speedup_drop:g} %, latency "
        f"+{100 * t.latency_rise:g} %, tokens/s −{100 * t.throughput_drop:g} %"
    )


def _unchanged_line(rows: list[Row]) -> str:
    per_group = Counter(group_label(r) for r in rows)
    detail = ", ".join(f"{g} ({k})" for g, k in per_group.items())
    return f"{len(rows)} rows unchanged (within the minimum effect): {detail}"


def _blocked_lines(rows: list[Row]) -> list[str]:
    """One line per reason for the rows folded away (informational absolute timing), with the
    workload × temperature groups (and row counts) it applies to."""
    per: dict[tuple[str, str], Counter[str]] = {}
    for r in rows:
        per.setdefault((r.status, r.reason), Counter())[group_label(r)] += 1
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
        short = [r for r in rows if r.needs and not r.needs.startswith("enough") and r.gating]
        line = (
            f"power ({100 * c.thresholds.power:g} %): {kind} rows detect changes of "
            f"{fmt_mde(worst)} or more (worst: {group_label(worst)} {worst.label})"
        )
        if short:
            line += (
                f"; {len(short)} gating rows of {len(rows)} cannot see their minimum effect, e.g. "
                f"{group_label(short[0])} {short[0].label} needs {short[0].needs}"
            )
        else:
            line += "; every gating row can see its minimum effect"
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


def row_note(r: Row) -> str:
    short = r.status in (NOT_SIGNIFICANT, INCONCLUSIVE) and not r.needs.startswith("enough")
    needs = f"needs {r.needs}" if short and r.needs else ""
    return "; ".join(x for x in (r.note, r.reason, needs) if x)


def status_text(r: Row) -> str:
    """The row's status, marked when the row does not gate (reported at its own level)."""
    return r.status if r.gating else f"{r.status} (not gated)"


def _cells(r: Row, status: str) -> list[str]:
    """One row of the console and Markdown tables (columns `_COLUMNS`), status as styled."""
    return [
        r.workload,
        f"{r.temperature:g}",
        r.label,
        fmt_value(r, r.base),
        fmt_value(r, r.new),
        fmt_change(r),
        fmt_p(r.p_value),
        fmt_mde(r),
        status,
        row_note(r),
    ]


def render_console(console: Console, c: Comparison, show_unchanged: bool = False) -> None:
    shown, unchanged, blocked = _shown(c, show_unchanged)
    table = Table(
        box=compact_box(console),
        show_edge=False,
        pad_edge=False,
        padding=(0, 0, 0, 1),  # one space between columns: every column counts at 80
    )
    # one section a workload × temperature (its label on a row of its own) instead of two
    # columns repeated on every row, and the notes below the table, numbered (one number per
    # distinct note, the number after the metric), so that a row stays short at 80 columns
    for col in _COLUMNS[2:-1]:
        table.add_column(
            "p" if col == "p (Holm)" else col,  # Holm: said on the "tests:" line below
            justify="right" if col in _NUMERIC else "left",
            # the values may be words (a verdict: "OFF (best measured γ=4)"), so they wrap too
            no_wrap=col not in ("metric", "base", "new", "status"),
            overflow="fold",
            min_width={"metric": 20, "status": 12}.get(col),
            max_width=8 if col in ("base", "new") else None,
        )
    notes: dict[str, int] = {}
    blank = [""] * (len(_COLUMNS) - 4)
    for i, r in enumerate(shown):
        if i == 0 or group_label(shown[i - 1]) != group_label(r):
            if i:
                table.add_section()
            table.add_row(f"[bold]{escape(group_label(r))}[/bold]", *blank)
        style = _STYLE.get(r.status, "")
        # "info": the row's numbered note says why; "*": the footnote below the table
        status = ("info" if r.status == INFORMATIONAL else r.status) + ("" if r.gating else "*")
        _workload, _temperature, metric, *cells, note = _cells(r, f"[{style}]{status}[/{style}]")
        mark = f" [{notes.setdefault(note, len(notes) + 1)}]" if note else ""
        table.add_row(f"  {escape(metric)}{mark}", *cells)
    # the title on a line of its own (a table's title is cut to the table's width; paths are long)
    console.print(f"specbench compare: {c.base_label} → {c.new_label}", markup=False)
    if shown:
        console.print(table)
        if not all(r.gating for r in shown):
            console.print("  * not gated: reported at its own level, outside the gate's correction")
        for note, ref in notes.items():
            console.print(f"  [{ref}] {note}", markup=False, highlight=False)
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
    style = {0: "green", 5: "bold yellow"}.get(c.exit_code, "bold red")
    console.print(f"[{style}]{headline(c)}[/{style}] → exit code {c.exit_code}")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(c: Comparison, show_unchanged: bool = False) -> str:
    """A PR comment: headline, the table of changed rows, one line for the unchanged ones."""
    shown, unchanged, blocked = _shown(c, show_unchanged)
    mark = {0: "✅", 5: "⚠️"}.get(c.exit_code, "❌")
    if c.exit_code == 0 and c.is_inconclusive:
        mark = "⚠️"  # passed only because --allow-inconclusive: never a ✅ that could not fail
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
            status = f"**{status_text(r)}**" if r.status == REGRESSED else status_text(r)
            lines.append("| " + " | ".join(_md_cell(x) for x in _cells(r, status)) + " |")
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
        f"Exit code {c.exit_code}: 0 pass (every gating row could see its minimum effect), "
        "1 regression (or failed/missing rows under --strict), 5 inconclusive (a gating row "
        "cannot detect its minimum effect; --allow-inconclusive passes it), 2 bad input. A "
        "regression is a gating row significant, in the bad direction, after Holm's adjustment "
        "over the gating rows (exact T = 0 rows: beyond the minimum effect); a verdict flip is "
        "always listed, and ON → OFF counts when the speedup behind it regressed."
    )
    return "\n".join(lines) + "\n"


def to_dict(c: Comparison) -> dict[str, JsonValue]:
    """The `--json` document (schema COMPARE_JSON_SCHEMA), written as is."""
    doc = {
        "schema": COMPARE_JSON_SCHEMA,
        "base": c.base_label,
        "new": c.new_label,
        "mode": c.mode,
        "exit_code": c.exit_code,
        "verdict": (
            "regression" if c.exit_code == 1 else "inconclusive" if c.is_inconclusive else "pass"
        ),
        "regressions": len(c.regressions),
        "inconclusive": len(c.inconclusive),
        "allow_inconclusive": c.allow_inconclusive,
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
    cleaned: dict[str, JsonValue] = json_safe(doc)
    return cleaned
