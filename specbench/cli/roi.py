"""`specbench roi`: the analytic speculation model (analysis/arithmetic/roi.py), no model and no GPU.

specbench roi --alpha 0.6
specbench roi --alpha 0.6 --t-target 80 --t-draft 7 --json
specbench roi --accepted 2.9 --gamma 4 --t-target 80 --t-draft 7 --plot roi.png
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from specbench.cli.options import DEFAULT_COST_RATIO, JsonOption
from specbench.defaults import ROI_GAMMA_MAX
from specbench.errors import SpecbenchError

# Bounds keep every derived figure finite (γ·T_d at γ = 1024 must not overflow JSON).
MAX_ROI_GAMMA = 1024  # roi is analytic: a longer grid is cheap, but not unbounded
MAX_ROI_MS = 1e9  # times in ms (about 11.6 days per step): beyond any real model
MAX_ROI_RATIO = 1e6  # T_d / T_ar: a draft a million times slower than the target never pays


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
    t_target: Annotated[
        float | None, typer.Option("--t-target", help="Baseline per-token latency T_ar in ms.")
    ] = None,
    t_draft: Annotated[
        float | None, typer.Option("--t-draft", help="One draft step T_d in ms.")
    ] = None,
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
    gpu_hour_usd: Annotated[
        float | None, typer.Option("--gpu-hour-usd", help="Price of one GPU-hour in USD.")
    ] = None,
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
    from specbench.analysis.arithmetic import roi as model
    from specbench.report import roi as render
    from specbench.report.console import make_console

    # --- what the ranges on the options cannot say: one line naming the option ---
    if alpha and accepted is not None:
        raise SpecbenchError("give either --alpha or --accepted, not both")
    if not alpha and accepted is None:
        raise SpecbenchError("give --alpha A (in [0, 1]) or --accepted TAU --gamma G")
    if (t_target is None) != (t_draft is None):
        raise SpecbenchError("--t-target and --t-draft go together: give both (in ms) or neither")
    if cost_ratio is not None and t_target is not None:
        raise SpecbenchError("give either --cost-ratio or --t-target/--t-draft, not both")
    for name, value in (("--t-target", t_target), ("--t-draft", t_draft)):
        if value is not None and not 0 < value <= MAX_ROI_MS:
            raise SpecbenchError(
                f"{name} must be a time > 0 ms and at most {MAX_ROI_MS:g}, got {value:g}"
            )
    if cost_ratio is not None and not 0 < cost_ratio <= MAX_ROI_RATIO:
        raise SpecbenchError(
            f"--cost-ratio must be > 0 and at most {MAX_ROI_RATIO:g}, got {cost_ratio:g}"
        )
    for name, value in (
        ("--gpu-hour-usd", gpu_hour_usd),
        ("--draft-memory-gib", draft_memory_gib),
        ("--gpu-memory-gib", gpu_memory_gib),
    ):
        if value is not None and value <= 0:
            raise SpecbenchError(f"{name} must be > 0, got {value:g}")

    relative = t_target is None
    if relative and gpu_hour_usd is not None:
        raise SpecbenchError(
            "--gpu-hour-usd needs absolute timings: give --t-target and --t-draft in ms"
        )
    if relative:
        t_target_ms = 1.0
        t_draft_ms = cost_ratio if cost_ratio is not None else DEFAULT_COST_RATIO
    else:
        assert t_target is not None and t_draft is not None
        t_target_ms, t_draft_ms = t_target, t_draft

    if accepted is not None:
        if gamma is None:
            raise SpecbenchError("--accepted needs --gamma G, the γ at which it was measured")
        if not 1.0 <= accepted <= gamma + 1:
            raise SpecbenchError(
                f"--accepted must be in [1, {gamma + 1}] (1 to γ + 1) at --gamma {gamma}"
            )
        grid = list(range(1, gamma_max + 1))
        inputs: list[tuple[float, float | None]] = [
            (model.alpha_from_accepted(accepted, gamma), accepted)
        ]
    else:
        grid = [gamma] if gamma is not None else list(range(1, gamma_max + 1))
        inputs = [(a, None) for a in alpha or []]

    scenarios = [
        model.scenario(a, grid, t_target_ms, t_draft_ms, verify_slope, accepted=tau)
        for a, tau in inputs
    ]
    econ = [
        model.economics(
            t_target_ms, sc.best.itl_ms, gpu_hour_usd, gpus, draft_memory_gib, gpu_memory_gib
        )
        for sc in scenarios
    ]
    note = (
        f"No timing given: assuming T_d / T_ar = {DEFAULT_COST_RATIO} "
        "(times in units of T_ar); pass --t-target/--t-draft or --cost-ratio."
        if relative and cost_ratio is None
        else None
    )

    if csv_path is not None:
        render.write_csv(csv_path, scenarios)
    if plot_path is not None:
        from specbench.report.plots import plot_roi

        plot_roi(plot_path, scenarios)

    if as_json:
        doc = {
            "units": "t_target" if relative else "ms",
            "note": note,
            "scenarios": [
                render.scenario_to_dict(sc) | {"economics": render.economics_to_dict(e)}
                for sc, e in zip(scenarios, econ, strict=True)
            ],
        }
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
        return

    console = make_console()
    if note:
        console.print(f"[yellow]{note}[/yellow]")
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
