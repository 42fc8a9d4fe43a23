"""`specbench canary CONFIG`: promote, keep watching or roll back a speculative canary against a
control of the same size, with a stated error rate (docs/canary.md).

    specbench canary canary.yaml --once                      # one look (cron, CI, Argo, Flagger)
    specbench canary canary.yaml --watch --interval 60       # a look every minute until settled
    specbench canary canary.yaml --once --report reports/canary --json
    specbench canary canary.yaml --export-rules canary-rules.yaml

Every look appends the windows that closed since the last one to the state file (`state:`), so a
restarted canary resumes its sequences. Exit codes: 0 promote, 10 keep watching, 11 roll back,
2 bad input (a bad config, an unreachable source), 130 interrupted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from specbench.cli.exit_codes import EXIT_CANARY_ROLLBACK, EXIT_CANARY_WATCH, EXIT_OK
from specbench.cli.options import JsonOption, check_output_file
from specbench.errors import SpecbenchError

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
    from specbench.config.canary import load_canary_config

    if once and watch:
        raise SpecbenchError("give --once or --watch, not both")
    cfg = load_canary_config(config)
    if export_rules is not None:
        check_output_file(export_rules, "--export-rules")
        _export(cfg, export_rules, rules_selector)
        if not (once or watch):
            raise typer.Exit(EXIT_OK)
    looks = 0
    while True:
        action = _one_look(cfg, report_dir, json_out)
        looks += 1
        if not watch or action != "keep_watching" or (max_looks and looks >= max_looks):
            raise typer.Exit(EXIT_FOR[action])
        time.sleep(interval)


def _one_look(cfg: object, report_dir: Path | None, json_out: bool) -> str:
    from specbench.analysis.canary.curves import curves
    from specbench.config.canary import CanaryConfig
    from specbench.harness.canary.look import break_even_from, look
    from specbench.report.canary.canary import render_console, write_report
    from specbench.report.run.console import make_console

    assert isinstance(cfg, CanaryConfig)
    result = look(cfg)
    d = result.decision
    if report_dir is not None:
        a = cfg.guards.acceptance
        cs, _ = curves(cfg, result.windows, break_even_from(a.accept_json if a else None))
        write_report(report_dir, d, cs)
    if json_out:
        typer.echo(json.dumps(d.model_dump(mode="json"), indent=2))
    else:
        render_console(make_console(), d)
    return d.decision


def _export(cfg: object, path: Path, selector: str | None) -> None:
    from specbench.analysis.canary.decision import measured_gamma
    from specbench.analysis.canary.guards import floor_for
    from specbench.config.canary import AcceptanceGuard, CanaryConfig
    from specbench.harness.canary.look import break_even_from, read_state
    from specbench.harness.canary.rules import rules_yaml

    assert isinstance(cfg, CanaryConfig)
    a = cfg.guards.acceptance or AcceptanceGuard.model_validate({})
    floor = floor_for(
        a, "overall", measured_gamma(read_state(cfg.state)), break_even_from(a.accept_json)
    )
    if selector is None:
        selector = cfg.sources.prometheus.canary if cfg.sources.prometheus else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rules_yaml(cfg, floor.value, selector), encoding="utf-8")
    typer.echo(f"wrote {path} (acceptance floor {floor.value:.3f}: {floor.source})", err=True)
