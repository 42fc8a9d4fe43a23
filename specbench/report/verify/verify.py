"""`specbench verify`'s report: the console tables (greedy identity, the per-context sampled
tests, the verdict) and the `--json` document, from a `harness.verify.verify.VerifyReport`.
See docs/verify.md for what each test is.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue
from rich.console import Console
from rich.table import Table

from specbench.analysis.stats.serialize import json_safe

if TYPE_CHECKING:  # the engine (torch) is imported only when the command runs
    from specbench.analysis.verify.verify_results import VerifyReport


def _num(x: float | None, fmt: str = "{:.3f}") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return fmt.format(x)


def _p(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2e}" if x < 1e-3 else f"{x:.3f}"


def report_to_dict(rep: VerifyReport) -> dict[str, JsonValue]:
    """The verify report as one JSON document (`--json`, written as is)."""
    doc = asdict(rep)
    doc["passed"] = rep.passed
    doc["exit_code"] = 0 if rep.passed else 1
    doc["checks_run"] = rep.checks_run
    doc["multiple_testing"] = {
        "correction": "bonferroni",
        "tests": rep.tests,
        "family_significance": rep.significance,
        # the verdict's false-alarm rate: an exact sampler fails the sampled tests with at most
        # this probability (greedy identity is exact: no false alarm in fp32)
        "false_fail_rate_at_most": rep.significance,
        "min_adjusted_p_value": rep.min_adjusted_p,
        "passed": rep.sampling_passed,
    }
    for g_doc, g in zip(doc["greedy"], rep.greedy, strict=True):
        g_doc.update(
            identity_rate=g.identity_rate,
            token_identity_rate=g.token_identity_rate,
            near_tie_flips=g.near_tie_flips,
            passed=g.passed,
        )
    for s_doc, s in zip(doc["sampling"], rep.sampling, strict=True):
        s_doc["summary"] = s.summary()
    cleaned: dict[str, JsonValue] = json_safe(doc)
    return cleaned


def _later(c: Any) -> str:
    """Positions 2..γ+1 of a context: the smallest p-value and where, with the rounds tested."""
    tested = [t for t in c.positions if t.tested]
    if not tested:
        return "–"
    worst = min(tested, key=lambda t: t.p_value)
    n = sum(t.n for t in tested)
    return f"{_p(worst.p_value)} @{worst.position} ({len(tested)} pos, {n} tok)"


def render(console: Console, rep: VerifyReport) -> None:
    """The console report: greedy identity, the per-context tables, the overall verdict."""
    console.print(
        f"specbench verify: {rep.config_name} (target {rep.target}, drafters "
        f"{', '.join(rep.drafters)}); acceptance rule: "
        f"{'exact' if rep.lossless_rule else f'[bold red]{rep.rule}[/bold red]'}"
    )
    for note in rep.notes:
        console.print(f"[yellow]note[/yellow] {note}")
    for g in rep.greedy:
        status = "[green]PASS[/green]" if g.passed else "[red]FAIL[/red]"
        console.print(
            f"greedy (T=0, {g.dtype}, {g.drafter}): {g.prompts} prompts × γ {g.gammas}: "
            f"{g.identical_runs}/{g.runs} runs identical ({100 * g.identity_rate:.1f} %), "
            f"{100 * g.token_identity_rate:.2f} % of tokens before the first difference; "
            f"{g.near_tie_flips} near-tie flip(s) (margin ≤ {g.near_tie_tolerance:g}) — {status}"
        )
        if g.mismatches:
            t = Table(
                title=f"greedy, {g.drafter}: prompts whose speculative tokens differ",
                title_justify="left",
            )
            for col in ("workload", "prompt", "γ", "first diff at", "baseline", "spec", "margin"):
                t.add_column(col, justify="left" if col in ("workload", "prompt") else "right")
            t.add_column("kind")
            for m in g.mismatches:
                t.add_row(
                    m.workload, m.prompt_id, str(m.gamma), str(m.position), str(m.baseline_token),
                    str(m.speculative_token), _num(m.logit_margin, "{:.4f}"),
                    "near-tie flip" if m.near_tie else "[red]mismatch[/red]",
                )  # fmt: skip
            console.print(t)
    for s in rep.sampling:
        t = Table(
            title=(
                f"sampling, {s.drafter}: T={s.temperature:g} top_p={s.top_p:g} top_k={s.top_k}, "
                f"γ={s.gamma}: {s.samples} rounds per context; position 1: χ² on tokens, "
                f"positions 2..{s.gamma + 1} (γ+1 = bonus): pooled PIT"
            ),
            title_justify="left",
        )
        cols = ["context", "tokens", "drafted", "β", "p max", "acc y₁ (exp)", "χ² (dof)", "p"]
        cols += ["TV [bound]", "pos 2..γ+1: min p @pos"]
        if not rep.lossless_rule:
            cols.append("drift TV (exact)")
        for col in cols:
            t.add_column(col, justify="left" if col == "context" else "right")
        for c in s.contexts:
            row = [
                c.label,
                str(c.context_tokens),
                f"{c.drafted:.2f}",
                _num(c.beta),
                _num(c.p_max),
                f"{c.accept_rate:.3f} ({_num(c.accept_expected)})",
                f"{_num(c.first.chi2, '{:.1f}')} ({c.first.dof})",
                _p(c.first.p_value) if c.first.dof else "degenerate",
                f"{_num(c.first.tv)} [{_num(c.first.tv_bound)}]",
                _later(c),
            ]
            if not rep.lossless_rule:
                row.append(_num(c.drift_tv_exact, "{:.4f}"))
            t.add_row(*row)
        console.print(t)
        if not rep.lossless_rule:
            sm = s.summary()
            console.print(
                f"[bold red]LOSSY[/bold red] rule cost at T={s.temperature:g}: acceptance of y₁ "
                f"{_num(sm['accept_rate'])} vs exact β {_num(sm['beta'])} (extra "
                f"{_num(sm['extra_acceptance_measured'], '{:+.3f}')} measured, "
                f"{_num(sm['extra_acceptance_exact'], '{:+.3f}')} closed form); drift from the "
                f"target: TV {_num(sm['drift_tv_exact'], '{:.4f}')} (closed form, mean over "
                f"contexts), measured TV {_num(sm['tv_measured'])} vs sampling bound "
                f"{_num(sm['tv_bound'])}"
            )
    if rep.sampling:
        status = "[green]PASS[/green]" if rep.sampling_passed else "[red]FAIL[/red]"
        console.print(
            f"sampling: {rep.tests} tests, Bonferroni-adjusted smallest p = "
            f"{_p(rep.min_adjusted_p)} vs family-wise significance {rep.significance:g} — {status}"
        )
    if rep.checks_run == 0:
        console.print("[red]verdict: FAILED[/red] — nothing was checked (no greedy run, no test)")
    elif rep.passed:
        console.print(
            "[green]verdict: LOSSLESS[/green] — no check detects a departure from p (an exact "
            f"sampler is called FAILED by chance with probability ≤ {rep.significance:g})"
        )
    else:
        console.print("[red]verdict: FAILED[/red] — the speculative output departs from the target")
