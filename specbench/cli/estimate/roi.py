"""`specbench roi`: the analytic speculation model (analysis/arithmetic/roi.py), no model and no GPU.
The options become one typed request (analysis/arithmetic/roi_request.py: `RoiRequest`, checked
there, evaluated by `evaluate_roi`); this module renders the outcome through report/roi/roi.py.

specbench roi --alpha 0.6
specbench roi --alpha 0.6 --t-target 80 --t-draft 7 --json
specbench roi --accepted 2.9 --gamma 4 --t-target 80 --t-draft 7 --plot roi.png
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from specbench.cli.options import (
    DEFAULT_COST_RATIO,
    GpuHourUsdOption,
    JsonOption,
    TDraftOption,
    TTargetOption,
)
from specbench.defaults import MAX_ROI_GAMMA, MAX_ROI_MS, ROI_GAMMA_MAX

if TYPE_CHECKING:
    from specbench.analysis.arithmetic.roi_request import RoiOutcome


def roi(
    alpha: Annotated[
        list[float] | None,
        typer.Option("--alpha", min=0.0, max=1.0, help="Acceptance rate α (repeatable)."),
    ] = None,
    accepted: Annotated[
        float | None,
        typer.Option(
            "--accepted",
            help="Measured mean tokens per round τ (incl. the bonus token) at --gamma; "
            "α is solved from it.",
        ),
    ] = None,
    t_target: TTargetOption = None,
    t_draft: TDraftOption = None,
    # its own help in each command on purpose (cli/options.py says why)
    cost_ratio: Annotated[
        float | None,
        typer.Option(
            "--cost-ratio",
            help=f"T_d / T_ar; results are then relative to T_ar (default {DEFAULT_COST_RATIO} "
            "when no timing is given).",
        ),
    ] = None,
    verify_slope: Annotated[
        float,
        typer.Option(
            "--verify-slope",
            min=0.0,
            max=MAX_ROI_MS,
            help="Extra verify cost per drafted token (ms; in units of T_ar with --cost-ratio).",
        ),
    ] = 0.0,
    gamma_max: Annotated[
        int,
        typer.Option("--gamma-max", min=1, max=MAX_ROI_GAMMA, help="Largest γ to consider."),
    ] = ROI_GAMMA_MAX,
    gamma: Annotated[
        int | None,
        typer.Option(
            "--gamma",
            min=1,
            max=MAX_ROI_GAMMA,
            help="A single γ to evaluate; with --accepted, the γ at which τ was measured.",
        ),
    ] = None,
    gpu_hour_usd: GpuHourUsdOption = None,
    # not GpusOption: roi has no config to fall back on, so its default is 1, said in --help
    gpus: Annotated[
        int, typer.Option("--gpus", min=1, max=100_000, help="GPUs serving the target.")
    ] = 1,
    draft_memory_gib: Annotated[
        float | None, typer.Option("--draft-memory-gib", help="Memory the draft adds (GiB).")
    ] = None,
    gpu_memory_gib: Annotated[
        float | None, typer.Option("--gpu-memory-gib", help="Memory of one GPU (GiB).")
    ] = None,
    as_json: JsonOption = False,
    csv_path: Annotated[
        Path | None, typer.Option("--csv", help="Also write one row per scenario × γ here.")
    ] = None,
    plot_path: Annotated[
        Path | None, typer.Option("--plot", help="Also write a speedup-vs-γ PNG here.")
    ] = None,
) -> None:
    """The analytic speculation model: best γ, speedup and break-even points, no GPU needed."""
    from specbench.analysis.arithmetic.roi_request import RoiRequest, evaluate_roi

    outcome = evaluate_roi(
        RoiRequest(
            alpha=alpha,
            accepted=accepted,
            t_target=t_target,
            t_draft=t_draft,
            cost_ratio=cost_ratio,
            verify_slope=verify_slope,
            gamma_max=gamma_max,
            gamma=gamma,
            gpu_hour_usd=gpu_hour_usd,
            gpus=gpus,
            draft_memory_gib=draft_memory_gib,
            gpu_memory_gib=gpu_memory_gib,
        )
    )
    show(outcome, as_json, csv_path, plot_path)


def show(outcome: RoiOutcome, as_json: bool, csv_path: Path | None, plot_path: Path | None) -> None:
    """The files asked for (CSV, plot), then JSON or the console: one block per scenario."""
    from specbench.report.roi import roi as render
    from specbench.report.run.console import make_console

    scenarios, econ, relative = outcome.scenarios, outcome.economics, outcome.relative
    if csv_path is not None:
        render.write_csv(csv_path, scenarios)
    if plot_path is not None:
        from specbench.report.sections.plots import plot_roi

        plot_roi(plot_path, scenarios)

    if as_json:
        doc = {
            "units": "t_target" if relative else "ms",
            "note": outcome.note,
            "scenarios": [
                render.scenario_to_dict(sc) | {"economics": render.economics_to_dict(e)}
                for sc, e in zip(scenarios, econ, strict=True)
            ],
        }
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
        return

    console = make_console()
    if outcome.note:
        console.print(f"[yellow]{outcome.note}[/yellow]")
    for sc, e in zip(scenarios, econ, strict=True):
        render.render_scenario(console, sc, relative, show_cost_ratio=relative)
        console.print(render.verdict_line(sc, relative))
        if e.usd_per_million_tokens_off is not None:
            console.print(
                f"  cost per 10⁶ output tokens at batch 1: ${e.usd_per_million_tokens_off:.2f}"
                f" → ${e.usd_per_million_tokens_on:.2f}"
            )
        if e.draft_memory_share is not None:
            console.print(
                f"  the draft takes {100 * e.draft_memory_share:.1f} % of GPU memory "
                f"for {sc.best.speedup:.2f}× lower latency"
            )
    for path, what in ((csv_path, "CSV"), (plot_path, "plot")):
        if path is not None:
            console.print(f"{what} written to {path}")
