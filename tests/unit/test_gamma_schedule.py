"""The γ schedule by concurrency (analysis/decide/gamma_schedule.py, docs/theory.md §15): decisions on
synthetic cells, the ranges and their boundary rules, and the false-ON rate of the whole schedule
at the boundary, by seeded simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.analysis.arithmetic.batch_model import StepCostModel
from specbench.analysis.calibration import schedule_calibration as cal
from specbench.analysis.decide.gamma_schedule import (
    OPEN_END,
    CellDecision,
    decide_schedule,
    fill_between,
    gamma_at,
    model_switch,
    schedule_ranges,
)
from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_engine import ScheduleBoundary


def test_off_at_high_concurrency_when_the_data_say_so() -> None:
    ratio = {
        (1, 2): 1.5,
        (1, 4): 1.8,
        (4, 2): 1.4,
        (4, 4): 1.1,
        (16, 2): 0.8,
        (16, 4): 0.7,
    }
    base, specs = cal.grid_run(np.random.default_rng(3), 16, [2, 4], [1, 4, 16], ratio)
    decisions, how = decide_schedule(base, specs, 0.05, 0.95, 1000)
    assert [(d.concurrency, d.gamma) for d in decisions] == [(1, 4), (4, 2), (16, 0)]
    assert "all 6 cells jointly" in how
    c16 = decisions[-1]
    assert all(lb is not None and lb < 1.05 for lb in c16.lower_bounds.values())
    # each simultaneous bound lies below the cell's own interval
    for d in decisions:
        for g, est in d.ratios.items():
            assert est is not None and d.lower_bounds[g] <= est.ci95[0] + 1e-9


def _cell(c: int, gamma: int, points: dict[int, float]) -> CellDecision:
    ratios: dict[int, EstimateJSON | None] = {
        g: EstimateJSON(value=v, ci95=(v * 0.8, v * 1.2)) for g, v in points.items()
    }
    return CellDecision(c, ratios, {g: v * 0.8 for g, v in points.items()}, gamma, "")


def test_a_gap_between_on_concurrencies_is_filled_and_nothing_outside_them() -> None:
    """ON, off, ON → the gap takes its best point γ when that clears the margin by point;
    off below the lowest ON and above the highest stays off, as does a gap whose best point
    ratio is under 1 + margin."""
    cells = [
        _cell(1, 0, {2: 1.3, 4: 1.2}),  # below the lowest ON: not filled
        _cell(2, 4, {2: 1.5, 4: 1.6}),
        _cell(4, 0, {2: 1.3, 4: 1.2}),  # a gap: filled with γ=2
        _cell(8, 0, {2: 1.02, 4: 0.9}),  # a gap, but no point above 1 + margin: off
        _cell(16, 2, {2: 1.3, 4: 1.1}),
        _cell(32, 0, {2: 1.2, 4: 1.1}),  # above the highest ON: not filled
    ]
    filled = fill_between(cells, 0.05)
    assert [d.gamma for d in filled] == [0, 4, 2, 0, 2, 0]
    assert "filled" in filled[2].reason and filled[1] is cells[1]


def test_different_prompts_per_concurrency_fall_back_to_bonferroni() -> None:
    ratio = {(1, 2): 1.6, (8, 2): 0.8}
    base, specs = cal.grid_run(np.random.default_rng(4), 16, [2], [1, 8], ratio)
    for r in [*base, *specs[2]]:
        r["prompt_id"] = f"{r['prompt_id']}-c{r['concurrency']}"  # no prompt common to both
    decisions, how = decide_schedule(base, specs, 0.05, 0.95, 1000)
    assert "Bonferroni level 0.975" in how
    assert [(d.concurrency, d.gamma) for d in decisions] == [(1, 2), (8, 0)]


def test_ranges_switch_at_the_geometric_midpoint_without_a_model() -> None:
    ranges, bounds = schedule_ranges([(1, 4), (4, 2), (16, 2), (64, 0)], model_switch(None, {}))
    assert ranges == [(1, 1, 4), (2, 31, 2), (32, OPEN_END, 0)]  # √4 = 2, √(16·64) = 32
    assert [b.rule for b in bounds] == ["geometric_midpoint"] * 2
    assert [gamma_at(ranges, b) for b in (1, 2, 31, 32, 10**6)] == [4, 2, 2, 0, 0]


def test_ranges_switch_where_the_model_crosses() -> None:
    # T(b, 0) = 1 + b, T(b, 2) = 1 + 3b; τ(2) = 2.4: γ = 2 pays while 2.4 (1 + b) > 1 + 3b, b ≤ 2
    m = StepCostModel(1.0, 1.0, 0.0, 0.0, 1.0, math.inf)
    ranges, bounds = schedule_ranges([(1, 2), (8, 0)], model_switch(m, {0: 1.0, 2: 2.4}))
    assert ranges == [(1, 2, 2), (3, OPEN_END, 0)]
    assert bounds == [ScheduleBoundary(between=(1, 8), at=3, rule="model")]


def test_one_choice_everywhere_is_one_range() -> None:
    assert schedule_ranges([(1, 3), (8, 3)], model_switch(None, {}))[0] == [(1, OPEN_END, 3)]


@pytest.mark.slow  # seconds, not milliseconds: make test runs it, make test-fast does not
def test_schedule_false_on_rate_holds_at_the_boundary() -> None:
    """Every cell's true throughput ratio is exactly 1 + margin: the schedule turns speculation on at
    any concurrency in at most 2.5 % of runs (max-T over γ and concurrency together)."""
    rate, se = cal.schedule_false_on_rate(8, [2, 4], [1, 4, 16], reps=200, seed=11)
    assert rate <= 0.025 + 2 * se, (rate, se)


@pytest.mark.slow
def test_naive_per_concurrency_rule_would_fail_the_same_check() -> None:
    rate, se = cal.naive_schedule_false_on_rate(8, [2, 4], [1, 4, 16], reps=200, seed=11)
    assert rate > 0.025 + 2 * se, (rate, se)


@pytest.mark.slow
def test_schedule_has_power_on_a_clear_speedup() -> None:
    """Every cell at a true 1.3×, 16 prompts: most concurrencies are decided ON."""
    rate, _ = cal.schedule_power(16, [2, 4], [1, 4, 16], 1.3, reps=40, seed=13)
    assert rate >= 0.7, rate
