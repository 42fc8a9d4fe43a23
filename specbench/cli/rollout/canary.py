"""`specbench canary CONFIG`: promote, keep watching or roll back a speculative canary against a
control of the same size, with a stated error rate (docs/canary.md).

    specbench canary canary.yaml --once                      # one look (cron, CI, Argo, Flagger)
    specbench canary canary.yaml --watch --interval 60       # a look every minute until settled
    specbench canary canary.yaml --once --report reports/canary --json
    specbench canary canary.yaml --export-rules canary-rules.yaml

Every look appends the windows that closed since the last one to the state file (`state:`), so a
restarted canary resumes its sequences. The options become one typed request
(harness/canary/canary_request.py: `CanaryRequest`, run by `run_canary`, which tells this module of
each look to render). Exit codes: 0 promote, 10 keep watching, 11 roll back,
2 bad input (a bad config, an unreachable source), 130 interrupted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from specbench.cli.exit_codes import EXIT_CANARY_ROLLBACK, EXIT_CANARY_WATCH, EXIT_OK
from specbench.cli.options import JsonOption

if TYPE_CHECKING:
    from specbench.analysis.canary.guards import Floor
    from specbench.config.canary import CanaryConfig
    from specbench.harness.canary.look import Look

EXIT_FOR = {
    "promote": EXIT_OK,
    "keep_watching": EXIT_CANARY_WATCH,
    "rollback": EXIT_CANARY_ROLLBACK,
}


def canary(
    config: Annotated[Path, typer.Argument(help="Canary configuration (YAML), docs/canary.md.")],
    *,
    once: Annotated[
        bool, typer.Option("--once", help="One look from the saved state, then exit (default).")
    ] = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="A look every --interval seconds until settled.")
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=1, max=86_400, help="Seconds between looks.")
    ] = 60.0,
    max_looks: Annotated[
        int | None,
        typer.Option("--max-looks", min=1, max=1_000_000, help="--watch: stop after N looks."),
    ] = None,
    report_dir: Annotated[
        Path | None,
        typer.Option("--report", help="Write canary.md, canary.html, canary.json there."),
    ] = None,
    export_rules: Annotated[
        Path | None,
        typer.Option(
            "--export-rules", help="Write Prometheus alerting rules for after the rollout."
        ),
    ] = None,
    rules_selector: Annotated[
        str | None,
        typer.Option(
            "--rules-selector",
            help='Label matcher for the rules, e.g. job="llm" (default: the Prometheus source\'s '
            "canary matcher).",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Promote, keep watching or roll back a speculative canary (exit 0 / 10 / 11)."""
    from specbench.harness.canary.canary_request import CanaryRequest, run_canary

    request = CanaryRequest(
        config=config,
        once=once,
        watch=watch,
        interval=interval,
        max_looks=max_looks,
        report_dir=report_dir,
        export_rules=export_rules,
        rules_selector=rules_selector,
    )
    action = run_canary(request, Shown(report_dir, json_out))
    raise typer.Exit(EXIT_OK if action is None else EXIT_FOR[action])


@dataclass(frozen=True)
class Shown:
    """The command's `CanaryEvents`: each look's report files, then its decision as JSON or on
    the console; the rules file named on stderr."""

    report_dir: Path | None
    json_out: bool

    def rules_written(self, path: Path, floor: Floor) -> None:
        typer.echo(f"wrote {path} (acceptance floor {floor.value:.3f}: {floor.source})", err=True)

    def looked(self, cfg: CanaryConfig, result: Look) -> None:
        from specbench.analysis.canary.curves import curves
        from specbench.harness.canary.look import break_even_from
        from specbench.report.canary.canary import render_console, write_report
        from specbench.report.run.console import make_console

        d = result.decision
        if self.report_dir is not None:
            a = cfg.guards.acceptance
            cs, _ = curves(cfg, result.windows, break_even_from(a.accept_json if a else None))
            write_report(self.report_dir, d, cs)
        if self.json_out:
            typer.echo(json.dumps(d.model_dump(mode="json"), indent=2))
        else:
            render_console(make_console(), d)
