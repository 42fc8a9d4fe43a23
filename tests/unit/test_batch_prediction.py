"""The batch-size prediction (docs/theory.md §18) and its check against an engine run, on
hand-made timings and acceptance traces with hand-computed values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specbench.analysis.documents.results_model_batch import PredictedCell
from specbench.analysis.estimators.batch_prediction import (
    batch_prediction,
    best_gamma,
    predicted_throughput,
    prompt_tokens,
    step_costs,
    throughput_per_step,
)
from specbench.analysis.estimators.prediction_check import check_prediction


def timing(b: int, rep: int, draft: float, verify: list[float], w: str = "w") -> dict[str, Any]:
    return {
        "kind": "batch_timing",
        "workload": w,
        "batch_size": b,
        "repeat": rep,
        "context_len": 50,
        "draft_ms": draft,
        "gammas": [0, 2, 4],
        "verify_ms": verify,
    }


def spec(prompt: str, accepted: list[int], drafted: list[int]) -> dict[str, Any]:
    return {
        "kind": "spec",
        "prompt_id": prompt,
        "rounds": {
            "accepted": accepted,
            "drafted": drafted,
            "beta": [[1.0] * d for d in drafted],
        },
    }


# prompt a: 4 full rounds accepting everything (20 tokens); prompt b: 2 full rounds accepting
# nothing (2 tokens) and one short round (drafted 1 < γ_max: left out of ā_b, counted in L_b).
TRACES = [spec("a", [4, 4, 4, 4], [4, 4, 4, 4]), spec("b", [0, 0, 0], [4, 4, 1])]
# ā_a(2) = 3, ā_b(2) = 1; L = 20, 3 → ā_pool(2) = 23 / (20/3 + 3/1)
POOL_2 = 23 / (20 / 3 + 3)
POOL_4 = 23 / (20 / 5 + 3)


def test_step_costs_take_the_median_of_the_repetitions() -> None:
    recs = [
        timing(2, 0, 1.0, [8.0, 10.0, 12.0]),
        timing(2, 1, 3.0, [9.0, 11.0, 30.0]),
        timing(2, 2, 2.0, [7.0, 40.0, 13.0]),
        {"kind": "spec"},  # other kinds are ignored
    ]
    c = step_costs(recs)["w"]
    assert c.draft_ms == {2: 2.0}
    assert c.verify_ms == {(2, 0): 8.0, (2, 2): 11.0, (2, 4): 13.0}
    assert c.repeats == 3 and c.context_len == 50
    assert c.step_ms(2, 4) == 4 * 2.0 + 13.0  # γ·T_d(b) + T_t(b, γ)


def test_truncated_per_prompt_tokens_are_pooled_by_tokens() -> None:
    pt = prompt_tokens(TRACES, 4)
    assert pt.lengths.tolist() == [20.0, 3.0]
    assert pt.expected[:, 1].tolist() == [3.0, 1.0]  # min(A, 2) + 1 over full rounds only
    assert pt.pooled(2, 200, 0.95).value == pytest.approx(POOL_2)
    assert pt.pooled(4, 200, 0.95).value == pytest.approx(POOL_4)
    assert pt.pooled(0, 200, 0.95).value == 1.0


def test_throughput_arithmetic() -> None:
    assert throughput_per_step([1.0, 2.0, 3.0], 0.5) == pytest.approx(12.0)
    # b sequences of ā tokens each per step of `step_ms`
    assert predicted_throughput(2.5, 4, 20.0) == pytest.approx(4 * 2.5 / 0.020)


def test_cells_throughput_and_speedup_against_off() -> None:
    recs = [timing(1, 0, 1.0, [10.0, 11.0, 12.0]), timing(8, 0, 2.0, [20.0, 60.0, 100.0])]
    groups = {("w", 0.0): {"spec": {("model", "fixed", 4): TRACES}}}
    doc = batch_prediction(recs, groups, "model", 200, 0.95)
    assert doc is not None
    (entry,) = doc.entries
    cells = {(c.batch_size, c.gamma): c for c in entry.cells}
    # b = 1, γ = 2: step 2·1 + 11 = 13 ms; throughput 1·ā/0.013; speedup ā·10/13
    c = cells[(1, 2)]
    assert c.step_ms == 13.0
    assert c.throughput_tokens_per_s.value == pytest.approx(POOL_2 / 0.013, rel=1e-5)
    assert c.speedup_vs_off.value == pytest.approx(POOL_2 * 10 / 13, rel=1e-5)
    # the baseline: b / T_t(b, 0), speedup exactly 1
    assert cells[(8, 0)].throughput_tokens_per_s.value == pytest.approx(8 / 0.020)
    assert cells[(8, 0)].speedup_vs_off.value == 1.0
    # b = 8, γ = 4: step 4·2 + 100 = 108 ms → ā·20/108 < 1: off wins at b = 8, γ = 4 at b = 1
    assert cells[(8, 4)].speedup_vs_off.value == pytest.approx(POOL_4 * 20 / 108, rel=1e-5)
    assert entry.best_gamma == {"1": 4, "8": 0}
    lo, hi = cells[(1, 2)].tokens_per_step.ci95
    assert (
        lo is not None and hi is not None and lo < POOL_2 < hi
    )  # a prompt-resampled interval around the pooled value


def test_no_prediction_without_timings_or_fixed_gamma_runs() -> None:
    groups = {("w", 0.0): {"spec": {("model", "fixed", 4): TRACES}}}
    assert batch_prediction([], groups, "model", 200, 0.95) is None
    recs = [timing(1, 0, 1.0, [10.0, 11.0, 12.0])]
    other = {("w", 0.0): {"spec": {("ngram", "fixed", 4): TRACES}}}
    doc = batch_prediction(recs, other, "model", 200, 0.95)  # no fixed-γ run of the drafter
    assert doc is not None and doc.entries == []


def test_best_gamma_skips_cells_without_a_value() -> None:
    cells = [
        PredictedCell.model_validate(_cell(v, 1.0) | {"gamma": g, "batch_size": 1})
        for g, v in CELLS
    ]
    assert best_gamma(cells) == {"1": 4}


CELLS = [(0, 10.0), (2, None), (4, 12.0)]  # (γ, throughput) at b = 1


def _cell(tput: float | None, speedup: float) -> dict[str, Any]:
    return {
        "batch_size": 4,
        "gamma": 2,
        "draft_ms": 1.0,
        "verify_ms": 10.0,
        "step_ms": 12.0,
        "tokens_per_step": {"value": 2.0, "ci95": [None, None]},
        "throughput_tokens_per_s": {"value": tput, "ci95": [None, None]},
        "speedup_vs_off": {"value": speedup, "ci95": [None, None]},
    }


def test_prediction_check_errors_per_cell() -> None:
    off = {**_cell(400.0, 1.0), "gamma": 0}
    reference = {
        "batch_prediction": {
            "entries": [{"workload": "w", "temperature": 0.0, "cells": [off, _cell(600.0, 1.5)]}]
        }
    }
    engine = {
        "workloads": [
            {
                "workload": "w",
                "temperature": 0.0,
                "engine": {
                    "concurrency": [
                        {
                            "concurrency": 4,
                            "baseline": {"output_tokens_per_s": 1000.0},
                            "gammas": {
                                "2": {"output_tokens_per_s": 1200.0, "throughput_ratio": 1.2},
                                "4": {"output_tokens_per_s": 900.0, "throughput_ratio": 0.9},
                            },
                        },
                        {  # no prediction at b = 16: left out
                            "concurrency": 16,
                            "baseline": {"output_tokens_per_s": 2000.0},
                            "gammas": {},
                        },
                    ]
                },
            }
        ]
    }
    check = check_prediction(engine, reference, "ref")
    assert check is not None
    cells = {(c.concurrency, c.gamma): c for c in check.cells}
    assert set(cells) == {(4, 0), (4, 2)}
    assert cells[(4, 2)].speedup_error == pytest.approx(1.5 / 1.2 - 1)
    assert cells[(4, 2)].throughput_error == pytest.approx(600 / 1200 - 1)
    assert cells[(4, 0)].speedup_error is None  # off against off is 1 by definition
    assert cells[(4, 0)].throughput_error == pytest.approx(400 / 1000 - 1)
    assert check.median_abs_speedup_error == pytest.approx(0.25)
    assert check.median_abs_throughput_error == pytest.approx(np.median([0.6, 0.5]))
    assert check_prediction(engine, {"batch_prediction": None}, "ref") is None


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_predict_check_command(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from specbench.cli.app import app

    cli = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    ref, eng = tmp_path / "ref", tmp_path / "eng"
    ref.mkdir()
    eng.mkdir()
    off = {**_cell(400.0, 1.0), "gamma": 0}
    (ref / "results.json").write_text(
        json.dumps(
            {
                "batch_prediction": {
                    "entries": [
                        {"workload": "w", "temperature": 0.0, "cells": [off, _cell(600.0, 1.5)]}
                    ]
                }
            }
        )
    )
    row = {
        "concurrency": 4,
        "baseline": {"output_tokens_per_s": 1000.0},
        "gammas": {"2": {"output_tokens_per_s": 1200.0, "throughput_ratio": 1.2}},
    }
    engine = {
        "workloads": [{"workload": "w", "temperature": 0.0, "engine": {"concurrency": [row]}}]
    }
    (eng / "results.json").write_text(json.dumps(engine))
    res = cli.invoke(app, ["predict-check", str(eng), str(ref)])
    assert res.exit_code == 0, res.output
    assert "+25 %" in res.output  # the speedup error 1.5 / 1.2 − 1
    assert "median |error|: speedup 25 %, throughput 55 %" in res.output
    res = cli.invoke(app, ["predict-check", str(eng), str(ref), "--json"])
    assert json.loads(res.output)["cells"][1]["speedup_error"] == pytest.approx(0.25)
    # bad input: one line, exit 2
    for args, message in (
        ([str(ref), str(ref)], "is not an engine run"),
        ([str(eng), str(eng)], "has no batch-size prediction"),
        ([str(eng), str(tmp_path / "nope")], "has no results.json"),
    ):
        res = cli.invoke(app, ["predict-check", *args])
        assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output
