"""The adaptive plan's group-sequential verdict (analysis/stats/sequential.py, docs/theory.md §14):
its looks, its states, and — by seeded simulation on the realistic traffic family, feeding a
cell one prompt at a time and stopping at the first verdict (analysis/calibration/sequential_calibration.py)
— its false ON / false OFF at the line, the bounds at the stopping prompt, its power and what the
futility stop does. Seeds were written before the tests were first run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.analysis.calibration import sequential_calibration as sc
from specbench.analysis.stats import signflip
from specbench.analysis.stats.sequential import (
    MIN_PROMPTS,
    SequenceSettings,
    decide,
    design,
    futile,
)

SIDE = 0.025


def _within(r: tuple[float, float], target: float = SIDE) -> bool:
    return r[0] <= target + 2 * r[1]


def test_looks_are_bonferroni_over_the_schedule_capped_at_the_cell() -> None:
    (only,) = design(8, SIDE)  # one look, at 8 with the full 2.5 %
    assert (only.n, only.alpha) == (8, SIDE)
    assert [lk.n for lk in design(24, SIDE)] == [8, 12, 16, 24]  # 6 is below 2^-6 > 0.625 %
    assert {lk.alpha for lk in design(24, SIDE)} == {SIDE / 4}
    assert [lk.n for lk in design(48, SIDE)] == [12, 16, 24, 32, 48]
    assert design(5, SIDE) == ()  # 5 prompts can never reject at 2.5 %: no look at all
    assert MIN_PROMPTS == 6
    for cap in (*range(6, 80), 500, 5000, None):
        looks = design(cap, SIDE)
        assert sum(lk.alpha for lk in looks) <= SIDE * (1 + 1e-12)
        assert all(lk.n >= signflip.min_prompts(lk.alpha) for lk in looks)
        assert [lk.n for lk in looks] == sorted({lk.n for lk in looks})
        if cap is not None:
            assert looks[-1].n == cap


def _cell(speedup: float, n: int, seed: int, k: int = 1) -> dict[str, list[np.ndarray]]:
    """K candidates on n prompts: lognormal lengths and per-prompt cost shared by both sides,
    each candidate's time scaled by 1/speedup with its own noise (the fast unit tests; the
    calibration uses the realistic family)."""
    rng = np.random.default_rng(seed)
    tok = np.round(np.exp(rng.uniform(np.log(8), np.log(256), n)))
    base = tok * rng.lognormal(0.0, 0.5, n)
    return {
        f"c{j}": [tok, base / speedup * rng.lognormal(0.0, 0.2, n), tok, base] for j in range(k)
    }


def test_decide_on_off_undecided_and_constant_between_looks() -> None:
    s = SequenceSettings(margin=0.05, n_max=24)
    on = decide(_cell(2.5, 12, 1, k=2), s)
    assert on.state == "on" and on.chosen in ("c0", "c1") and on.look == 12
    chosen = next(b for b in on.bounds if b.label == on.chosen)
    assert chosen.lo > 1.05 and chosen.n == 12
    off = decide(_cell(0.5, 12, 2, k=2), s)
    assert off.state == "off" and all(b.hi < 1.05 for b in off.bounds)
    early = decide(_cell(2.5, 7, 3), s)  # before the first look (8): undecided, unbounded
    assert early.state == "undecided" and early.look is None
    assert (early.bounds[0].lo, early.bounds[0].hi) == (0.0, math.inf)
    cell = _cell(1.1, 15, 4)
    at12 = decide({k: [a[:12] for a in v] for k, v in cell.items()}, s)
    at15 = decide(cell, s)  # the verdict and bounds rest on the look at 12 until 16
    assert at15.look == at12.look == 12 and at15.n == 15
    assert (at15.state, at15.bounds[0].lo, at15.bounds[0].hi) == (
        at12.state,
        at12.bounds[0].lo,
        at12.bounds[0].hi,
    )


def test_needs_about_n_more_lands_on_a_look_sized_for_power() -> None:
    """Undecided near the line: m + N is the first look at which signflip's 80 %-power size
    (at the look's α and K) is reached."""
    s = SequenceSettings(margin=0.05, n_max=96)
    seen = 0
    for seed in range(5, 25):
        d = decide(_cell(1.25, 12, seed), s)
        if d.state != "undecided" or d.more_prompts is None:
            continue
        b = d.bounds[0]
        effect = abs(b.log_s - math.log(1.05))
        alpha = s.looks[0].alpha
        need = signflip.prompts_for_power(effect, b.sd, alpha, 1)
        target = d.n + d.more_prompts
        if need is not None and need <= 96:
            looks = [lk.n for lk in s.looks]
            assert target in looks and target >= need
            assert all(n < need or n <= d.n for n in looks if n < target)
            seen += 1
    assert seen >= 3


def test_futile_when_no_look_is_reachable_and_never_without_a_supply() -> None:
    s = SequenceSettings(margin=0.05, n_max=24)
    cell = _cell(1.3, 9, 6)
    assert decide(cell, s, remaining=2).futile  # 9 + 2 < 12, the next look: a certainty
    assert not decide(cell, s).futile  # no supply given: never futile
    # nothing in common yet: the caller judges the reach from the usable prompts
    assert not decide({"c0": [np.zeros(0)] * 4}, s, remaining=1).futile
    # the vectorised stop is the one decide applies, on the same prefix
    d = decide(cell, s, remaining=15)
    b = d.bounds[0]
    assert d.futile == bool(futile(np.asarray([b.log_s]), np.asarray([b.sd]), 9, 15, s))


@pytest.mark.slow
def test_the_simulation_feeds_prompts_as_decide_sees_them() -> None:
    """At every stopping prompt the production verdict equals the simulation's screen (mismatch
    0), futile stops included."""
    cells = sc.draw(24, 3, sc.LINE, 40, 2801, sc.tf.Family())
    o = sc.optional_stopping(cells, 24, futility=True)
    assert o.mismatch == 0 and o.futile[0] > 0.3


@pytest.mark.slow
@pytest.mark.parametrize(("cap", "k"), [(8, 1), (8, 3), (24, 1), (24, 3), (48, 1), (48, 3)])
def test_false_on_and_false_off_at_the_line_under_optional_stopping(cap: int, k: int) -> None:
    """Every true speedup exactly 1 + margin; looked at after every prompt up to the cap (no
    futility stop: the most looks), stopping at the first verdict."""
    cells = sc.draw(cap, k, sc.LINE, 400, 2810 + cap + k, sc.tf.Family())
    o = sc.optional_stopping(cells, cap, futility=False)
    assert o.mismatch == 0
    assert _within(o.on) and _within(o.off), o


@pytest.mark.slow
def test_power_and_the_bounds_at_the_stopping_prompt() -> None:
    """K = 3, futility on (the plan's default). The issue's floor: P(ON) ≥ 0.5 at a true 1.6×
    with 8 prompts; at 24 prompts a true 1.4× is decided ON with ≥ 80 % power. At the stop each
    one-sided miss of the bounds (some lower bound above the truth; the first candidate's upper
    bound below it) stays within 2.5 %."""
    for cap, speedup, floor, seed in ((8, 1.6, 0.5, 2831), (24, 1.4, 0.8, 2832)):
        o = sc.optional_stopping(sc.draw(cap, 3, speedup, 300, seed, sc.tf.Family()), cap, True)
        assert o.mismatch == 0
        assert o.on[0] >= floor - 2 * o.on[1], o
        assert _within(o.lower_miss) and _within(o.upper_miss), o


@pytest.mark.slow
def test_the_futility_stop_saves_prompts_at_the_line_and_costs_little_power() -> None:
    """On the same data: at the line it ends cells much earlier, never ON more often; at a true
    1.4× (cap 24, K = 3) it gives up at most 5 points of P(ON)."""
    line = sc.draw(24, 3, sc.LINE, 300, 2841, sc.tf.Family())
    off, on = sc.optional_stopping(line, 24, False), sc.optional_stopping(line, 24, True)
    assert on.mean_stop < 0.6 * off.mean_stop
    assert on.on[0] <= off.on[0] and _within(on.on)
    clear = sc.draw(24, 3, 1.4, 300, 2842, sc.tf.Family())
    p_off, p_on = sc.optional_stopping(clear, 24, False), sc.optional_stopping(clear, 24, True)
    assert p_off.on[0] - 0.05 <= p_on.on[0] <= p_off.on[0]


@pytest.mark.slow
def test_a_fixed_n_verdict_checked_after_every_prompt_fails() -> None:
    """The contrast: the same data, the fixed-n test at the full 2.5 % looked at after every
    prompt from 6 to 48 decides ON at the line well above its level."""
    naive = sc.naive_false_on(sc.draw(48, 1, sc.LINE, 300, 2851, sc.tf.Family()), 48)
    assert naive[0] > SIDE + 2 * naive[1], naive
