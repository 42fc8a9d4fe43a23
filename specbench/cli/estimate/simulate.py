"""`specbench simulate RUN_DIR`: replay γ policies over a run's recorded rounds (trace replay).

specbench simulate reports/tiny --policy adaptive --policy heuristic
specbench simulate reports/tiny --policy confidence:threshold=0.5,max_gamma=6 --json

The options become one typed request (harness/run/simulate_request.py: `SimulateRequest`, each
--policy checked there; `replay_run` replays them and writes simulation.json, whose document and
schema history that module describes); this module renders the ranking through
report/simulate.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from specbench.cli.options import JsonOption
from specbench.report.render.terminal import make_console


def simulate(
    run_dir: Annotated[Path, typer.Argument(help="A run directory with per-round records.")],
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            help="Policy to replay, e.g. adaptive or confidence:threshold=0.5 (repeatable; default: all five).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Replay γ policies over the rounds a run recorded at its largest γ; rank them per workload."""
    from specbench.harness.run.simulate_request import SimulateRequest, replay_run
    from specbench.report.simulate.simulate import render_simulation

    outcome = replay_run(SimulateRequest(run_dir=run_dir, policy=policy))
    if as_json:
        typer.echo(json.dumps(outcome.document, indent=2))
        return
    render_simulation(make_console(), outcome.simulations)
    make_console().print(f"written: {run_dir}/simulation.json")
