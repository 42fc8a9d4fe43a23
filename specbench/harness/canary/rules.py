"""`specbench canary --export-rules`: Prometheus alerting rules for the guards that keep running
after the rollout (docs/canary.md, "After the rollout").

Once speculation is on everywhere there is no control left to compare with, so the rules watch
absolute lines: each bucket's accepted / proposed against the canary's acceptance floor (the
break-even α from accept, or the rule-of-thumb floors), and the share of requests over each
latency SLO (read at the histogram's bucket edge at or above the SLO) against `alert_share`.
Checked with `promtool check rules`; tests/harness/test_canary_rules.py proves with
`promtool test rules` that each fires on a planted series and stays silent on a healthy one.
"""

from __future__ import annotations

from typing import Any

import yaml
from prometheus_client.utils import floatToGoString

from specbench.config.canary import CanaryConfig
from specbench.harness.canary.counters import parse_selector, resolve_names

RULE_WINDOW = "10m"
RULE_FOR = "10m"


def _sel(name: str, matcher: str) -> str:
    return parse_selector(name).promql(matcher)


def alert_rules(cfg: CanaryConfig, floor: float, matcher: str = "") -> dict[str, Any]:
    """The rule file as a mapping: acceptance below `floor`, latency SLO shares above
    `alert_share` (for every guard the engine's metric names can feed)."""
    engine, given = "vllm", None
    for src in (cfg.sources.prometheus, cfg.sources.metrics):
        if src is not None:
            engine, given = src.engine, src.names
            break
    from specbench.config.canary import MetricNames

    names = resolve_names(engine, given or MetricNames())
    w = RULE_WINDOW
    rules: list[dict[str, Any]] = []
    if names.accepted and names.proposed and cfg.guards.acceptance is not None:
        ratio = (
            f"sum(increase({_sel(names.accepted, matcher)}[{w}])) / "
            f"sum(increase({_sel(names.proposed, matcher)}[{w}]))"
        )
        rules.append(
            {
                "alert": "SpeculativeAcceptanceBelowFloor",
                "expr": f"({ratio}) < {floor:.6g}",
                "for": RULE_FOR,
                "labels": {"severity": "warning", "canary": cfg.name},
                "annotations": {
                    "summary": "speculative acceptance (accepted/proposed) below its floor",
                    "description": (
                        f'accepted/proposed is {{{{ $value | printf "%.3f" }}}} over {w}, below '
                        f"the floor {floor:.3f}: speculation no longer pays; turn it off "
                        "(specbench canary, docs/canary.md)"
                    ),
                },
            }
        )
    for key, name in (("tpot", names.tpot), ("e2e", names.e2e)):
        guard = getattr(cfg.guards, key)
        if guard is None or guard.slo_ms is None or not name:
            continue
        sel = parse_selector(name)
        le = f"{guard.slo_ms / 1000:g}"
        # exporters write the edge as "20" or "20.0" (prometheus_client): match either form
        forms = sorted({le, floatToGoString(guard.slo_ms / 1000)})
        le_match = 'le=~"' + "|".join(f.replace(".", r"\\.") for f in forms) + '"'
        bucket = type(sel)(sel.name + "_bucket", sel.labels).promql(
            ", ".join(x for x in (matcher, le_match) if x)
        )
        count = type(sel)(sel.name + "_count", sel.labels).promql(matcher)
        share = f"1 - sum(increase({bucket}[{w}])) / sum(increase({count}[{w}]))"
        rules.append(
            {
                "alert": f"Speculative{key.upper()}OverSLO",
                "expr": f"({share}) > {guard.alert_share:g}",
                "for": RULE_FOR,
                "labels": {"severity": "warning", "canary": cfg.name},
                "annotations": {
                    "summary": f"share of requests over the {key.upper()} SLO too high",
                    "description": (
                        f"{{{{ $value | humanizePercentage }}}} of requests over {guard.slo_ms:g} ms "
                        f"({key.upper()}, bucket edge le={le}) over {w}; the alert line is "
                        f"{guard.alert_share:.0%}"
                    ),
                },
            }
        )
    return {"groups": [{"name": f"specbench-canary-{cfg.name}", "rules": rules}]}


def rules_yaml(cfg: CanaryConfig, floor: float, matcher: str = "") -> str:
    return yaml.safe_dump(alert_rules(cfg, floor, matcher), sort_keys=False, width=1000)
