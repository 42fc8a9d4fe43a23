"""`specbench compare BASE NEW`: did acceptance, speedup or the speculation verdict regress?

    specbench compare reports/main reports/pr --strict             # two run directories
    specbench compare main1 main2 main3 vs pr1 pr2 pr3             # several runs per side
    specbench compare reports/old-driver reports/new-driver --subject env
    specbench compare baseline/results.json reports/pr --markdown comment.md --junit junit.xml
    specbench compare --calibrate aa1 aa2 aa3 aa4 aa5 --thresholds ci/specbench-thresholds.yaml
    specbench compare --plan --thresholds ci/specbench-thresholds.yaml --write-plan

BASE and NEW are run directories (records.jsonl: per-prompt tests) or results.json files (stored
CIs, normal approximation); several run directories per side are separated by the word `vs`.
The thresholds file declares the gating rows in advance (`gate`, default α, the speedup at the
recommended γ and the recommendation); the other rows are reported, not gated. A regression is a
gating row significant, in the bad direction, after Holm's adjustment over the gating rows
(docs/compare.md); the minimum effects size the gate, and a gating row that cannot detect its minimum effect makes the comparison
inconclusive (exit 5). Acceptance and speedup are gated; absolute latency and tokens/s are
informational unless several runs per side are given or `--subject env` declares the environment
change (engine, driver, hardware) the thing under test. Runs of different schema versions, models
or sampling settings are refused unless --force. Failed records and settings missing from NEW are
always listed; `--strict` makes them fail the comparison.

Exit codes (precedence 2/3 > 1 > 5 > 0): 0 pass (no regression, and every gating row could
have seen its minimum effect), 1 at least one gating regression (or, with --strict, failed/missing
rows), 5 inconclusive (no regression found, but a gating row could not have seen one;
--allow-inconclusive makes it 0), 2 bad input (missing or unreadable run, incomparable runs
without --force, a bad thresholds file or option).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from specbench.cli.options import JsonOption
from specbench.report.render.terminal import make_console

if TYPE_CHECKING:
    from specbench.analysis.compare.verdict import Comparison


def show(
    result: Comparison,
    markdown: Path | None,
    junit: Path | None,
    show_unchanged: bool,
    as_json: bool,
) -> None:
    """The comparison's files (Markdown PR comment, JUnit XML), then JSON or the console."""
    from specbench.report.compare import compare as render
    from specbench.report.compare.compare_junit import to_junit

    if markdown is not None:
        markdown.write_text(render.to_markdown(result, show_unchanged))
    if junit is not None:
        junit.write_text(to_junit(result))
    if as_json:
        typer.echo(json.dumps(render.to_dict(result), indent=2))
        return
    console = make_console()
    render.render_console(console, result, show_unchanged)
    for path, what in ((markdown, "Markdown"), (junit, "JUnit XML")):
        if path is not None:
            console.print(f"{what} written to {path}")


def compare(
    runs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="BASE NEW (run directories or results.json), or several runs per side: "
            "BASE… vs NEW…; with --calibrate, A/A runs of one code and config.",
            show_default=False,
        ),
    ] = None,
    thresholds: Annotated[
        Path | None,
        typer.Option("--thresholds", help="YAML file of significance and minimum effects."),
    ] = None,
    significance: Annotated[
        float | None, typer.Option("--significance", help="Two-sided level (default 0.05).")
    ] = None,
    alpha_drop: Annotated[
        float | None, typer.Option("--alpha-drop", help="Minimum α drop (absolute, default 0.02).")
    ] = None,
    accepted_length_drop: Annotated[
        float | None,
        typer.Option("--accepted-length-drop", help="Minimum relative τ drop (default 0.05)."),
    ] = None,
    speedup_drop: Annotated[
        float | None,
        typer.Option("--speedup-drop", help="Minimum relative speedup drop (default 0.05)."),
    ] = None,
    latency_rise: Annotated[
        float | None,
        typer.Option("--latency-rise", help="Minimum relative latency rise (default 0.05)."),
    ] = None,
    throughput_drop: Annotated[
        float | None,
        typer.Option("--throughput-drop", help="Minimum relative tokens/s drop (default 0.05)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Compare runs of different models/settings anyway.")
    ] = False,
    gate_unstable_timing: Annotated[
        bool,
        typer.Option(
            "--gate-unstable-timing",
            help="Kept for old scripts; no effect (a run's unstable-timing flag no longer blocks "
            "rows: the run-to-run term is in the test).",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Failed records, or settings in BASE missing from NEW, fail the comparison "
            "(exit 1). They are listed either way.",
        ),
    ] = False,
    subject: Annotated[
        Literal["code", "env"],
        typer.Option(
            "--subject",
            help="What the comparison is about: 'code' (default; absolute timing informational "
            "with one run per side) or 'env' (an engine, driver or hardware change: absolute "
            "timing gated across it).",
        ),
    ] = "code",
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write a Markdown PR comment here.")
    ] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write a JUnit XML report here.")
    ] = None,
    show_unchanged: Annotated[
        bool, typer.Option("--show-unchanged", help="List unchanged rows instead of collapsing.")
    ] = False,
    gate: Annotated[
        str | None,
        typer.Option(
            "--gate",
            help="The gating metrics, comma-separated (overrides the thresholds file's `gate`; "
            "default alpha,speedup_recommended,verdict; '*' gates every row).",
        ),
    ] = None,
    allow_inconclusive: Annotated[
        bool,
        typer.Option(
            "--allow-inconclusive",
            help="Exit 0 instead of 5 when a gating row cannot detect its minimum effect (the "
            "headline still says inconclusive).",
        ),
    ] = False,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="RUNS are A/A runs of one code and config (or one A/A `--ab` job's directory: "
            "the noise of its paired differences): write their run-to-run noise (upper "
            "confidence limits) into the --thresholds file instead of comparing.",
        ),
    ] = False,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help="Print the prompts and runs per side the calibrated --thresholds file needs for "
            "every gating row's minimum effect at its power, and their cost; no runs read.",
        ),
    ] = False,
    max_prompts: Annotated[
        int | None,
        typer.Option(
            "--max-prompts", help="--plan: prompts per workload × T at most.", min=2, max=100_000
        ),
    ] = None,
    gpu_hour_usd: Annotated[
        float | None,
        typer.Option(
            "--gpu-hour-usd", help="--plan: price of a GPU-hour, for the cost.", min=0.0, max=1e6
        ),
    ] = None,
    run_overhead_s: Annotated[
        float,
        typer.Option(
            "--run-overhead-s",
            help="--plan: seconds a run spends starting and loading models (not in the records).",
            min=0.0,
            max=86_400.0,
        ),
    ] = 0.0,
    ab: Annotated[
        bool,
        typer.Option(
            "--ab",
            help="RUNS is one CONFIG: run base and candidate here, each under its own "
            "interpreter (--base-python, --candidate-python), taking turns unit by unit in "
            "ABBA order over --pairs process pairs into --out, then compare them.",
        ),
    ] = False,
    base_python: Annotated[
        Path | None, typer.Option("--base-python", help="--ab: the base side's Python.")
    ] = None,
    candidate_python: Annotated[
        Path | None, typer.Option("--candidate-python", help="--ab: the candidate's Python.")
    ] = None,
    candidate_config: Annotated[
        Path | None,
        typer.Option(
            "--candidate-config",
            help="--ab: the candidate's config (another model revision or endpoint; default: "
            "CONFIG). What differs between the two configs is compared as forced.",
        ),
    ] = None,
    pairs: Annotated[
        int, typer.Option("--pairs", help="--ab: process pairs (runs per side).", min=1, max=1000)
    ] = 2,
    interleave: Annotated[
        str,
        typer.Option(
            "--interleave",
            help="--ab: 'unit' (both processes of a pair alive, taking turns unit by unit, ABBA) "
            "or 'process' (one after the other, for sides that cannot share the machine).",
        ),
    ] = "unit",
    ab_out: Annotated[Path, typer.Option("--out", help="--ab: where the runs are written.")] = Path(
        "reports/ab"
    ),
    run_args: Annotated[
        str, typer.Option("--run-args", help="--ab: extra arguments for each `specbench run`.")
    ] = "",
    write_plan: Annotated[
        bool, typer.Option("--write-plan", help="--plan: store the plan in the thresholds file.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Compare two runs (or two sets of runs); exit 1 on a significant regression of a gating row
    (Holm-adjusted over the gating rows; see docs/compare.md), 5 when a gating row could not have
    seen its minimum effect (80 % power).

    Exit codes (precedence 2/3 > 1 > 5 > 0): 0 pass, 1 at least one gating regression (or, with
    --strict, failed or missing rows), 5 inconclusive (a gating row cannot detect its minimum
    effect; --allow-inconclusive makes it 0), 2 bad input (or incomparable runs without --force).
    """
    from specbench.cli.check.compare_gate import calibrate_runs, plan_gate
    from specbench.harness.compare.compare_request import CompareRequest, compare_runs

    request = CompareRequest(
        runs=list(runs or []),
        thresholds=thresholds,
        significance=significance,
        alpha_drop=alpha_drop,
        accepted_length_drop=accepted_length_drop,
        speedup_drop=speedup_drop,
        latency_rise=latency_rise,
        throughput_drop=throughput_drop,
        force=force,
        gate_unstable_timing=gate_unstable_timing,
        strict=strict,
        subject=subject,
        gate=gate,
        allow_inconclusive=allow_inconclusive,
        calibrate=calibrate,
        plan=plan,
        max_prompts=max_prompts,
        gpu_hour_usd=gpu_hour_usd,
        run_overhead_s=run_overhead_s,
        ab=ab,
        base_python=base_python,
        candidate_python=candidate_python,
        candidate_config=candidate_config,
        pairs=pairs,
        interleave=interleave,
        ab_out=ab_out,
        run_args=run_args,
        write_plan=write_plan,
    )
    if request.mode == "plan":
        plan_gate(thresholds, max_prompts, gpu_hour_usd, write_plan, as_json, run_overhead_s)
        return
    if request.mode == "calibrate":
        calibrate_runs(request.runs, thresholds, as_json)
        return
    result = compare_runs(request)
    show(result, markdown, junit, show_unchanged, as_json)
    raise typer.Exit(result.exit_code)
