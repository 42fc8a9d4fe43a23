"""The GPU check's pure parts (benchmarks/gpu_physics.py, scripts/gpu_check.py): the verify fit's
labels hold their stated error rate (seeded simulation), the predicted speedup by hand, junit
counting."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


physics = _load(REPO / "benchmarks" / "gpu_physics.py", "gpu_physics")


driver = _load(REPO / "scripts" / "gpu_check.py", "gpu_check")


def test_verify_fit_recovers_a_line_and_its_growth() -> None:
    ks = list(range(1, 17))
    fit = physics.fit_verify(ks, [5.0 + 0.2 * k for k in ks])
    assert fit.t0_ms == pytest.approx(5.0) and fit.t1_ms_per_token == pytest.approx(0.2)
    assert fit.growth_1_to_16 == pytest.approx(15 * 0.2 / 5.2)  # 0.577: grows
    assert fit.label == "grows"
    assert physics.fit_verify(ks, [5.0 + 0.001 * k for k in ks]).label == "flat"


@pytest.mark.slow  # seconds, not milliseconds: make test runs it, make test-fast does not
@pytest.mark.parametrize("label", ["flat", "grows"])
def test_verify_fit_labels_hold_their_error_rate(label: str) -> None:
    """At the boundary (true growth exactly FLAT_GROWTH) each label is a wrong call; its rate
    must not exceed the nominal 2.5 % (Gaussian noise, 16 points, 4000 seeded repetitions)."""
    rng = np.random.default_rng(7)
    ks = np.arange(1, 17, dtype=float)
    t0 = 5.0
    t1 = physics.FLAT_GROWTH * t0 / (15 - physics.FLAT_GROWTH)  # 15·t1 / (t0 + t1) = 0.10
    reps = 4000
    wrong = sum(
        physics.fit_verify(ks, t0 + t1 * ks + rng.normal(0, 0.05, ks.size)).label == label
        for _ in range(reps)
    )
    # Fieller's interval is exact here; allow the Monte Carlo error (3 sd) above 2.5 %.
    assert wrong / reps <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / reps)


def test_predicted_speedup_by_hand() -> None:
    """T_ar = 10 ms, T_d = 1 ms, flat verify T_t = 10 ms, α = 0.8: speedup(γ) =
    10·ā(γ)/(γ + 10), ā(γ) = (1 − 0.8^{γ+1})/0.2; γ=1: 10·1.8/11 = 1.636…, γ=4: 10·3.3616/14."""
    batch1 = {
        "t_target_ms": 10.0,
        "t_draft_ms": 1.0,
        "verify_ms": {"1": 10.0, "2": 10.0, "4": 10.0},
    }
    # at batch 64 each extra verified token costs 10 ms: γ=1 gives 18/21, γ=2 24.4/32: off
    batch = [
        {"batch": 64, "t_target_ms": 10.0, "t_draft_ms": 1.0, "verify_ms": {"1": 20.0, "2": 30.0}}
    ]
    alpha = [{"workload": "w", "temperature": 0.0, "alpha": 0.8}]
    (p,) = physics.predictions(alpha, batch1, batch, gamma_max=4)
    speed = {r["gamma"]: r["speedup"] for r in p["batch1"]}
    assert speed[1] == pytest.approx(18 / 11)
    assert speed[4] == pytest.approx(10 * (1 - 0.8**5) / 0.2 / 14)
    assert p["best_gamma"] == 4  # 2.40× beats 2.27× at γ=3
    assert p["by_batch"] == [{"batch": 64, "best_gamma": 0, "speedup": 1.0}]


def test_junit_counts(tmp_path: Path) -> None:
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<testsuites><testsuite tests="7" failures="1" errors="1" skipped="2"/></testsuites>'
    )
    assert driver.junit_counts(xml) == {
        "tests": 7,
        "failures": 1,
        "errors": 1,
        "skipped": 2,
        "passed": 3,
    }
    assert driver.junit_counts(tmp_path / "missing.xml") is None
