"""The HTTP gate for rollout controllers (harness/canary/gate.py) and the shipped Argo Rollouts /
Flagger examples and canary config (ci/canary/): each answers what its controller reads."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml

from specbench.config.canary import CanaryConfig, load_canary_config
from specbench.harness.canary.gate import answer
from tests.unit.canary_logs import write_logs

ROOT = Path(__file__).resolve().parents[2]


def _cfg(tmp_path: Path, **plant: object) -> CanaryConfig:
    write_logs(tmp_path / "c.jsonl", 31, 40, canary=True, **plant)  # type: ignore[arg-type]
    write_logs(tmp_path / "k.jsonl", 32, 40, canary=False)
    path = tmp_path / "canary.yaml"
    path.write_text(
        "sources: {logs: {canary: c.jsonl, control: k.jsonl}}\nstate: s.jsonl\n", encoding="utf-8"
    )
    return load_canary_config(path)


@pytest.mark.slow
def test_gate_routes_answer_what_argo_and_flagger_read(tmp_path: Path) -> None:
    lock = threading.Lock()
    bad = _cfg(tmp_path, tpot_factor=1.5)
    status, body = answer(bad, "/decision", lock)
    assert status == 200 and json.loads(body)["decision"] == "rollback"
    assert answer(bad, "/rollout", lock)[0] == 503
    assert answer(bad, "/promote", lock)[0] == 409
    assert answer(bad, "/other", lock)[0] == 404
    # the looks above appended each window once
    seqs = [json.loads(x)["seq"] for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len(seqs) == len(set(seqs)) == 40


def test_shipped_examples_point_at_the_gate_and_read_its_decision() -> None:
    argo = yaml.safe_load((ROOT / "ci/canary/argo-analysis-template.yaml").read_text())
    metric = argo["spec"]["metrics"][0]
    assert metric["provider"]["web"]["url"].endswith("/decision")
    assert metric["successCondition"] == 'result.decision == "promote"'
    assert metric["failureCondition"] == 'result.decision == "rollback"'
    flagger = yaml.safe_load((ROOT / "ci/canary/flagger-canary.yaml").read_text())
    hooks = {h["type"]: h["url"] for h in flagger["spec"]["analysis"]["webhooks"]}
    assert hooks["rollout"].endswith("/rollout") and hooks["confirm-promotion"].endswith("/promote")
    cfg = load_canary_config(ROOT / "ci/canary/canary.yaml")
    assert cfg.sources.prometheus is not None and cfg.start is not None
