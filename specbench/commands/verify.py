"""`specbench verify CONFIG`: the losslessness check for a pair and its sampling settings.

    specbench verify configs/tiny.yaml                       # greedy identity + sampled tests
    specbench verify configs/tiny.yaml --temperature 1 --top-p 0.9 --contexts 8 --samples 2000
    specbench verify configs/tiny.yaml --temperature 1 --lossy-epsilon 0.1   # LOSSY rule's cost
    specbench verify configs/tiny.yaml --json

Every drafter of the config is checked (plus n-gram prompt lookup unless --no-ngram). Greedy (T = 0):
speculative tokens vs target-only tokens for every prompt × γ, listing each prompt that differs
and where. Sampling (T > 0): at real contexts, one round sampled many times through the
speculative path; every emitted position (1..γ+1, the bonus token included) tested against the
target's distribution at its own prefix, Bonferroni over all tests. See docs/verify.md.

Exit codes: 0 lossless (every check passes, and at least one ran), 1 a check failed or nothing
was checked, 2 bad input.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from specbench.analysis.serialize import json_safe
from specbench.cli import app, user_errors
from specbench.errors import SpecbenchError

if TYPE_CHECKING:  # the engine (torch) is imported only when the command runs
    from specbench.harness.verify import VerifyReport


def _num(x: float | None, fmt: str = "{:.3f}") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return fmt.format(x)


def _p(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2e}" if x < 1e-3 else f"{x:.3f}"


def report_to_dict(rep: VerifyReport) -> dict[str, Any]:
    """The verify report as one JSON document."""
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
    cleaned: dict[str, Any] = json_safe(doc)
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


@app.command()
def verify(
    config: Annotated[
        Path, typer.Argument(help="Run configuration (YAML), e.g. configs/tiny.yaml.")
    ],
    contexts: Annotated[
        int, typer.Option("--contexts", help="Contexts for the sampled test (per temperature).")
    ] = 8,
    samples: Annotated[
        int, typer.Option("--samples", help="Speculative rounds sampled per context.")
    ] = 800,
    gamma: Annotated[
        int | None,
        typer.Option(
            "--gamma",
            help="γ to check (default: greedy at every γ of the config, sampling at min(γ_max, 4)).",
        ),
    ] = None,
    temperature: Annotated[
        list[float] | None,
        typer.Option(
            "--temperature", help="Temperature (repeatable; 0 = greedy; default: config)."
        ),
    ] = None,
    top_p: Annotated[float | None, typer.Option("--top-p", help="Nucleus mass in (0, 1].")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", help="Top-k (0 = off).")] = None,
    max_prompts: Annotated[
        int | None, typer.Option("--max-prompts", help="At most N prompts per workload.")
    ] = None,
    lossy_epsilon: Annotated[
        float | None,
        typer.Option(
            "--lossy-epsilon",
            help="Use the LOSSY rule 'accept when p(y) ≥ q(y) − ε' and measure its drift.",
        ),
    ] = None,
    significance: Annotated[
        float,
        typer.Option("--significance", help="Family-wise significance (Bonferroni)."),
    ] = 0.001,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda or auto.")] = None,
    no_ngram: Annotated[
        bool,
        typer.Option(
            "--no-ngram",
            help="Do not add an n-gram prompt-lookup drafter when the config has none.",
        ),
    ] = False,
    no_memo: Annotated[
        bool, typer.Option("--no-memo", help="Run every forward (no memoized logits).")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")
    ] = False,
) -> None:
    """Check that speculative decoding is lossless for the pair and its sampling settings.

    Exit codes: 0 lossless (every check passes), 1 a check failed or nothing was checked,
    2 bad input.
    """
    from specbench.config import deep_merge, parse_config, read_yaml
    from specbench.harness.verify import VerifyOptions, run_verify

    with user_errors():
        checks: list[tuple[bool, str]] = [
            (1 <= contexts <= 1000, f"--contexts must be in [1, 1000], got {contexts}"),
            (50 <= samples <= 10**6, f"--samples must be in [50, 1000000], got {samples}"),
            (gamma is None or 1 <= gamma <= 64, f"--gamma must be in [1, 64], got {gamma}"),
            (top_p is None or 0 < top_p <= 1, f"--top-p must be in (0, 1], got {top_p}"),
            (top_k is None or top_k >= 0, f"--top-k must be >= 0, got {top_k}"),
            (
                max_prompts is None or 1 <= max_prompts <= 100_000,
                f"--max-prompts must be in [1, 100000], got {max_prompts}",
            ),
            (
                lossy_epsilon is None or 0 < lossy_epsilon < 1,
                f"--lossy-epsilon must be in (0, 1), got {lossy_epsilon}",
            ),
            (0 < significance < 1, f"--significance must be in (0, 1), got {significance}"),
        ]
        for t in temperature or []:
            checks.append(
                (
                    math.isfinite(t) and 0 <= t <= 100,
                    f"--temperature must be a finite number in [0, 100] (0 = greedy), got {t:g}",
                )
            )
        for ok, message in checks:
            if not ok:
                raise SpecbenchError(message)
        data = read_yaml(config)
        over: dict[str, Any] = {}
        if device is not None:
            over = {"target": {"device": device}, "draft": {"device": device}}
        cfg = parse_config(deep_merge(data, over), str(config))
        options = VerifyOptions(
            contexts=contexts,
            samples=samples,
            gamma=gamma,
            temperatures=list(temperature) if temperature else None,
            top_p=top_p,
            top_k=top_k,
            max_prompts=max_prompts,
            lossy_epsilon=lossy_epsilon,
            significance=significance,
            seed=seed,
            memoize=not no_memo,
            ngram=not no_ngram,
        )
        err = Console(stderr=True)
        if as_json:
            rep = run_verify(cfg, options, config.parent)
            typer.echo(json.dumps(report_to_dict(rep), indent=2))
        else:
            with err.status("verifying…") as status:
                rep = run_verify(cfg, options, config.parent, progress=status.update)
            render(Console(), rep)
    raise typer.Exit(0 if rep.passed else 1)
