"""The deployment profile (config/profile.py, docs/configuration.md "Deployment profile"): its
defaults, the shares normalised, what it must name of the run, YAML's on/off booleans, and every
refusal one `error:` line with exit 2 from `specbench validate` (a refused config stops before any
tokenizer or model file is opened)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.config import parse_config
from specbench.errors import SpecbenchError

ENGINE: dict[str, Any] = {
    "backend": "vllm",
    "target": {"model": "tiny-target"},
    "draft": {"model": "tiny-draft"},
    "workloads": [
        {"name": "code", "dataset": {"name": "tiny_code"}},
        {"name": "prose", "dataset": {"name": "tiny_prose"}},
    ],
    "sampling": {"temperatures": [0.0, 1.0]},
    "concurrency": [1, 4, 16],
    "load": {"rates": [2.0, 8.0]},
    "slo": {"ttft_ms": 250},
}
runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})


def config(profile: Any, **over: Any) -> Any:
    return parse_config({**ENGINE, **over, "profile": profile})


def test_no_profile_by_default_and_off_is_none() -> None:
    assert parse_config(ENGINE).profile is None
    assert config(False).profile is None  # `profile: off` in YAML
    assert config(None).profile is None


def test_defaults_and_normalised_shares() -> None:
    p = config({}).profile
    assert p is not None
    assert p.objective == "slo_goodput" and p.traffic.workloads is None and not p.slo.any
    assert (p.price.gpu_hour_usd, p.price.gpus_per_server) == (None, None)
    p = config(
        {
            "traffic": {"workloads": {"code": 3, "prose": 1}, "temperatures": {0: 1, 1.0: 1}},
            "load": {"concurrency": {1: 1, 16: 3}},
            "slo": {"ttft_ms": {"percentile": 99, "target": 500}, "tpot_ms": 40},
        }
    ).profile
    assert p.traffic.workloads == {"code": 0.75, "prose": 0.25}
    assert p.traffic.temperatures == {0.0: 0.5, 1.0: 0.5}
    assert p.load.concurrency == {1: 0.25, 16: 0.75}
    assert p.slo.tpot_ms is not None and (p.slo.tpot_ms.percentile, p.slo.tpot_ms.target) == (
        99.0,
        40.0,
    )  # a bare number is the target at p99


def test_yaml_switches_read_as_meant() -> None:
    text = yaml.safe_dump(ENGINE) + "profile:\n  slo: {ttft_ms: off, e2e_ms: 2000}\n  price: off\n"
    p = parse_config(yaml.safe_load(text)).profile
    assert p is not None and p.slo.ttft_ms is None
    assert p.slo.e2e_ms is not None and p.slo.e2e_ms.target == 2000
    assert p.price.gpu_hour_usd is None


BAD = [
    ({"traffic": {"workloads": {"chat": 1}}}, "'chat' is not a workload"),
    ({"traffic": {"workloads": {"code": 0}}}, "at least one share must be > 0"),
    ({"traffic": {"workloads": {"code": -1, "prose": 2}}}, "must be finite and >= 0"),
    ({"traffic": {"temperatures": {0.7: 1}}}, "0.7 is not in sampling.temperatures"),
    ({"traffic": {"temperatures": {-1: 1}}}, "not a temperature"),
    ({"load": {"concurrency": {8: 1}}}, "8 is not measured; add it to concurrency"),
    ({"load": {"concurrency": {0: 1}}}, "not a concurrency"),
    ({"load": {"rates": [3.0]}}, "3 req/s is not measured"),
    # ENGINE's load has rates but no steady state: the profile's mix is drawn in one
    ({"load": {"rates": [2.0]}}, "the profile's load needs a steady state: set load.duration_s"),
    ({"load": {"rates": [0]}}, "each rate must be in (0"),
    ({"load": {"rates": [2.0], "concurrency": {1: 1}}}, "give one of rates, concurrency, trace"),
    ({"slo": {"ttft_ms": {"percentile": 97, "target": 500}}}, "percentile must be one of"),
    ({"slo": {"ttft_ms": {"target": 0}}}, "greater than 0"),
    ({"slo": {"e2e_ms": {"target": 1e9}}}, "less than or equal to 3600000"),
    ({"objective": False}, "slo_goodput or cost_per_mtok"),
    ({"objective": "latency"}, "objective"),
    ({"objective": "cost_per_mtok"}, "needs a price"),
    ({"price": {"gpus_per_server": 0}}, "greater than or equal to 1"),
    (True, "not on/true"),
    ({"traffic": True}, "not on/true"),
    ({"surprise": 1}, "surprise"),
]


@pytest.mark.parametrize(("profile", "needle"), BAD)
def test_bad_profiles_are_one_line(tmp_path: Path, profile: Any, needle: str) -> None:
    with pytest.raises(SpecbenchError, match="profile"):
        config(profile)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**ENGINE, "profile": profile}))
    res = runner.invoke(app, ["validate", str(path), "--offline"])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert lines[0].startswith("error:") and needle in lines[0], lines[0]


def test_slo_goodput_needs_an_slo_and_batch_one_runs_take_no_load() -> None:
    with pytest.raises(SpecbenchError, match="needs an SLO"):
        config({}, slo={})
    assert config({"slo": {"e2e_ms": 900}}, slo={}).profile is not None
    flat = {**ENGINE, "backend": "transformers", "load": {}, "slo": {}, "concurrency": [1]}
    assert parse_config({**flat, "profile": {"traffic": {"workloads": {"code": 1}}}}).profile
    with pytest.raises(SpecbenchError, match="need an engine backend"):
        parse_config({**flat, "profile": {"slo": {"tpot_ms": 50}}})
