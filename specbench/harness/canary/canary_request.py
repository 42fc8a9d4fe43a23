"""`specbench canary` as one typed request: the canary config, how often to look, what to write,
and the one function that looks (once, or every --interval seconds until settled) and exports
the alerting rules (docs/canary.md).

    request = CanaryRequest(config=..., once=True, ...)   # SpecbenchError (exit 2): --once --watch
    action = run_canary(request, events)   # "promote", "keep_watching", "rollback"; None: rules only

The core never prints: `events` (`CanaryEvents`) is told of each look and of the rules written,
and the command renders them. The fields are the command's options under the same names, without
defaults (the command's options state them once, and `--help` shows them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.analysis.canary.guards import Floor
    from specbench.config.canary import CanaryConfig
    from specbench.harness.canary.look import Look


class CanaryEvents(Protocol):
    """What the command shows: the rules file written, then each look as it is made."""

    def rules_written(self, path: Path, floor: Floor) -> None: ...
    def looked(self, cfg: CanaryConfig, result: Look) -> None: ...


@dataclass(frozen=True, kw_only=True)
class CanaryRequest:
    """What `specbench canary` was asked: the config, one look or a watch (its interval and
    bound), the report directory, and the alerting rules to export."""

    config: Path
    once: bool
    watch: bool
    interval: float
    max_looks: int | None
    report_dir: Path | None
    export_rules: Path | None
    rules_selector: str | None

    def __post_init__(self) -> None:
        if self.once and self.watch:
            raise SpecbenchError("give --once or --watch, not both")


def run_canary(request: CanaryRequest, events: CanaryEvents) -> str | None:
    """The rules exported when asked; then one look, or (--watch) a look every interval until
    the decision settles or --max-looks. The last decision's action; None when only the rules
    were asked for (neither --once nor --watch)."""
    from specbench.config.canary import load_canary_config
    from specbench.harness.canary.look import look

    r = request
    cfg = load_canary_config(r.config)
    if r.export_rules is not None:
        events.rules_written(r.export_rules, write_rules(cfg, r.export_rules, r.rules_selector))
        if not (r.once or r.watch):
            return None
    looks = 0
    while True:
        result = look(cfg)
        events.looked(cfg, result)
        looks += 1
        action = result.decision.decision
        if not r.watch or action != "keep_watching" or (r.max_looks and looks >= r.max_looks):
            return action
        time.sleep(r.interval)


def write_rules(cfg: CanaryConfig, path: Path, selector: str | None) -> Floor:
    """Prometheus alerting rules for after the rollout, written to `path`: the acceptance floor
    at the γ the state measured (the configured one, else break-even from accept.json)."""
    from specbench.analysis.canary.decision import measured_gamma
    from specbench.analysis.canary.guards import floor_for
    from specbench.config.canary import AcceptanceGuard
    from specbench.harness.canary.look import break_even_from, read_state
    from specbench.harness.canary.rules import rules_yaml

    a = cfg.guards.acceptance or AcceptanceGuard.model_validate({})
    floor = floor_for(
        a, "overall", measured_gamma(read_state(cfg.state)), break_even_from(a.accept_json)
    )
    if selector is None:
        selector = cfg.sources.prometheus.canary if cfg.sources.prometheus else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rules_yaml(cfg, floor.value, selector), encoding="utf-8")
    return floor
