"""Trace replay against real policy runs on the tiny pair: the simulator's tokens per round must
fall inside the measured 95 % CI of each policy's real run (acceptance only; timing-free)."""

from __future__ import annotations

from pathlib import Path

from specbench.analysis.simulate.simulation import simulate_run
from specbench.config import parse_config
from specbench.harness.transformers import runner
from specbench.records import read_records


def test_simulated_policies_match_real_policy_runs(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "name": "sim",
            "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
            "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
            "policies": [
                {"name": "adaptive", "gamma": 4, "max_gamma": 8},
                {"name": "heuristic", "gamma": 2, "max_gamma": 8},
                {"name": "confidence", "threshold": 0.4, "max_gamma": 8},
                {"name": "temperature", "gamma": 4},
            ],
            "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 10}],
            "sampling": {"temperatures": [0.0]},
            "gammas": [8],
            "max_new_tokens": 40,
            "warmup": 0,
            "cpu_threads": 1,
            "output_dir": str(tmp_path),
        }
    )
    runner.run(cfg, tmp_path)
    records = read_records(tmp_path / "records.jsonl")
    sims = simulate_run(records, [(p.name, p.model_dump(exclude={"name"})) for p in cfg.policies])
    assert len(sims) == 1 and sims[0].trace_gamma == 8
    rows = {r.policy: r for r in sims[0].policies}
    assert set(rows) == {"adaptive", "heuristic", "confidence", "temperature"}
    for name, row in rows.items():
        measured = row.measured_tokens_per_round
        assert measured is not None and row.predicted_tokens_per_round is not None, name
        lo, hi = measured.ci95
        predicted = row.predicted_tokens_per_round.value
        assert lo is not None and hi is not None and predicted is not None
        assert lo <= predicted <= hi, (name, predicted, measured)
        assert row.measured_speedup is not None and row.speedup_error is not None
