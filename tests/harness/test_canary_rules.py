"""`specbench canary --export-rules`: the Prometheus alerting rules pass `promtool check rules`,
and `promtool test rules` proves each fires on a planted series and stays silent on a healthy one
(docs/canary.md, "After the rollout"). Needs promtool (Debian's `prometheus` package; .ci/run
installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (apt-get install prometheus; .ci/run does)"
)

CONFIG = """name: llm
guards:
  tpot: {slo_ms: 50, alert_share: 0.05}
  e2e: {slo_ms: 20000, alert_share: 0.05}
  acceptance: {min_ratio: 0.4}
sources:
  prometheus: {url: "http://127.0.0.1:9", canary: 'job="canary"', control: 'job="control"'}
"""


def _series(accepted: int, edge_tpot: int, edge_e2e: int) -> list[dict[str, str]]:
    """Per minute: 100 proposed tokens, `accepted` accepted; 100 requests, of which `edge_*`
    finished within the SLO's bucket edge."""
    job = '{job="canary"}'
    return [
        {
            "series": f"vllm:spec_decode_num_accepted_tokens_total{job}",
            "values": f"0+{accepted}x60",
        },
        {"series": f"vllm:spec_decode_num_draft_tokens_total{job}", "values": "0+100x60"},
        {
            "series": 'vllm:request_time_per_output_token_seconds_bucket{job="canary", le="0.05"}',
            "values": f"0+{edge_tpot}x60",
        },
        {"series": f"vllm:request_time_per_output_token_seconds_count{job}", "values": "0+100x60"},
        {
            "series": 'vllm:e2e_request_latency_seconds_bucket{job="canary", le="20.0"}',
            "values": f"0+{edge_e2e}x60",
        },
        {"series": f"vllm:e2e_request_latency_seconds_count{job}", "values": "0+100x60"},
    ]


def _alert(name: str, description: str, summary: str) -> dict[str, object]:
    return {
        "eval_time": "30m",
        "alertname": name,
        "exp_alerts": [
            {
                "exp_labels": {"severity": "warning", "canary": "llm"},
                "exp_annotations": {"summary": summary, "description": description},
            }
        ],
    }


def test_exported_rules_check_and_fire_only_on_planted_series(tmp_path: Path) -> None:
    cfg = tmp_path / "canary.yaml"
    cfg.write_text(CONFIG, encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    r = CliRunner().invoke(app, ["canary", str(cfg), "--export-rules", str(rules)])
    assert r.exit_code == 0, r.output
    check = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0 and "3 rules found" in check.stdout, check.stdout + check.stderr

    planted = {
        "interval": "1m",
        "input_series": _series(accepted=30, edge_tpot=80, edge_e2e=50),
        "alert_rule_test": [
            _alert(
                "SpeculativeAcceptanceBelowFloor",
                "accepted/proposed is 0.300 over 10m, below the floor 0.400: speculation no "
                "longer pays; turn it off (specbench canary, docs/canary.md)",
                "speculative acceptance (accepted/proposed) below its floor",
            ),
            _alert(
                "SpeculativeTPOTOverSLO",
                "20% of requests over 50 ms (TPOT, bucket edge le=0.05) over 10m; the alert line is 5%",
                "share of requests over the TPOT SLO too high",
            ),
            _alert(
                "SpeculativeE2EOverSLO",
                "50% of requests over 20000 ms (E2E, bucket edge le=20) over 10m; the alert line is 5%",
                "share of requests over the E2E SLO too high",
            ),
        ],
    }
    healthy = {
        "interval": "1m",
        "input_series": _series(accepted=70, edge_tpot=99, edge_e2e=99),
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": a, "exp_alerts": []}
            for a in (
                "SpeculativeAcceptanceBelowFloor",
                "SpeculativeTPOTOverSLO",
                "SpeculativeE2EOverSLO",
            )
        ],
    }
    test = tmp_path / "test.yaml"
    test.write_text(
        yaml.safe_dump(
            {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [planted, healthy]}
        ),
        encoding="utf-8",
    )
    run = subprocess.run(
        [PROMTOOL, "test", "rules", str(test)], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_the_rules_fail_promtool_when_an_alert_is_expected_on_healthy_series(
    tmp_path: Path,
) -> None:
    # the check can fail: expecting the acceptance alert on healthy series makes promtool refuse
    cfg = tmp_path / "canary.yaml"
    cfg.write_text(CONFIG, encoding="utf-8")
    CliRunner().invoke(app, ["canary", str(cfg), "--export-rules", str(tmp_path / "rules.yaml")])
    wrong = {
        "interval": "1m",
        "input_series": _series(accepted=70, edge_tpot=99, edge_e2e=99),
        "alert_rule_test": [_alert("SpeculativeAcceptanceBelowFloor", "x", "y")],
    }
    (tmp_path / "test.yaml").write_text(
        yaml.safe_dump(
            {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [wrong]}
        )
    )
    run = subprocess.run(
        [PROMTOOL, "test", "rules", "test.yaml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode != 0
