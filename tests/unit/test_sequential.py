"""The confidence sequence and the sequential ON/OFF rule (analysis/sequential.py, docs/theory.md
§14), calibrated by seeded simulation under optional stopping: the verdict is looked at after
every prompt, and the run stops at the first decision."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from specbench.analysis.sequential import (
    FUTILITY_FROM,
    MIN_PROMPTS,
    CandidateBound,
    SequenceSettings,
    boundary_factor,
    decide,
    futile,
    log_bounds,
    mixture_quantile,
    more_prompts_needed,
    running_log_stat,
    sigma_upper,
)
from specbench.analysis.stats import THROUGHPUT_RATIO_COEFS, log_linear_replicates

MARGIN = 0.05
NOMINAL_FALSE_ON = 0.025


def paired_prompts(
    rng: np.random.Generator, reps: int, k: int, n: int, speedup: float, sigma: float = 0.25
) -> list[np.ndarray]:
    """Per-prompt (tok_new, ms_new, tok_base, ms_base), each (reps, K, n): lognormal prompt
    lengths and decode times, a per-prompt effect shared by the K candidates (they are measured
    on the same prompts) plus each candidate's own noise; the pooled speedup Σ ms_base / Σ ms_new
    has expectation-ratio exactly `speedup` for every candidate (the worst case at the line)."""
    length = np.exp(rng.normal(3.5, 0.5, (reps, 1, n)))
    base = length * 10 * np.exp(rng.normal(0, sigma, (reps, 1, n)) - sigma**2 / 2)
    noise = rng.normal(0, sigma, (reps, 1, n)) + rng.normal(0, sigma / 2, (reps, k, n))
    new = length * 10 / speedup * np.exp(noise - 1.25 * sigma**2 / 2)
    tok = np.broadcast_to(length, (reps, k, n))
    return [tok, new, tok, np.broadcast_to(base, (reps, k, n))]


def optional_stopping(
    reps: int,
    k: int,
    n_max: int,
    speedup: float,
    seed: int,
    naive: bool = False,
    futility: bool = False,
) -> tuple[float, float]:
    """(P(decided ON), P(every sequence covers the truth at the stopping time)) when the verdict
    is checked after every prompt from MIN_PROMPTS to n_max and the run stops at the first
    decision. `naive`: the fixed-n Student-t interval at 97.5 % one-sided, checked the same way.
    `futility`: the plan's futility stop too, with n_max the cell's whole prompt supply (it
    stops undecided once the prompts left cannot settle it even optimistically)."""
    arrays = paired_prompts(np.random.default_rng(seed), reps, k, n_max, speedup)
    log_s, sd = running_log_stat(arrays)  # (reps, K, n_max)
    n = np.arange(1, n_max + 1)
    s = SequenceSettings(margin=MARGIN, candidates=k, n_opt=n_max)
    if naive:
        half = sps.t.ppf(1 - NOMINAL_FALSE_ON, np.maximum(n - 1, 1)) * sd / np.sqrt(n)
        lo, hi = log_s - half, log_s + half
    else:
        lo, hi = log_bounds(log_s, sd, n, s)
    line = math.log1p(MARGIN)
    looked = n >= MIN_PROMPTS
    on = (lo > line).any(axis=1) & looked
    off = (hi < line).all(axis=1) & looked
    stopped = on | off
    if futility:  # candidates on the last axis, as `futile` takes them; every one ends at n_max
        fut = futile(np.swapaxes(log_s, 1, 2), np.swapaxes(sd, 1, 2), n[:, None], n_max, s)
        stopped |= fut & (n >= FUTILITY_FROM) & (n < n_max) & np.isfinite(sd).all(axis=1)
    at = np.where(stopped.any(axis=1), stopped.argmax(axis=1), n_max - 1)
    r = np.arange(reps)
    truth = math.log(speedup)
    covered = ((lo[r, :, at] <= truth) & (hi[r, :, at] >= truth)).all(axis=1)
    STOPS[(k, n_max, speedup, seed, futility)] = float(at.mean() + 1)
    return float(on[r, at].mean()), float(covered.mean())


STOPS: dict[tuple[int, int, float, int, bool], float] = {}  # mean stopping n of each simulation


def mc_se(p: float, reps: int) -> float:
    return math.sqrt(p * (1 - p) / reps)


@pytest.mark.parametrize(("k", "n_max"), [(1, 16), (1, 48), (3, 16), (3, 48)])
def test_false_on_at_the_line_stays_nominal_under_optional_stopping(k: int, n_max: int) -> None:
    reps = 3000
    false_on, coverage = optional_stopping(reps, k, n_max, 1 + MARGIN, seed=11 + k + n_max)
    assert false_on <= NOMINAL_FALSE_ON + 2 * mc_se(NOMINAL_FALSE_ON, reps)
    assert coverage >= 0.95 - 2 * mc_se(0.95, reps)


def test_coverage_at_the_stopping_time_when_it_stops_early() -> None:
    """At a true 1.4× most runs stop early on ON: the sequence still covers the truth there."""
    reps = 2000
    p_on, coverage = optional_stopping(reps, 3, 48, 1.4, seed=5)
    assert p_on > 0.8  # it does stop early (else coverage would be tested only at n_max)
    assert coverage >= 0.95 - 2 * mc_se(0.95, reps)


@pytest.mark.slow
@pytest.mark.parametrize(("k", "n_max"), [(1, 8), (3, 16), (3, 48)])
def test_futility_stop_keeps_false_on_and_coverage_with_a_finite_prompt_supply(
    k: int, n_max: int
) -> None:
    """The futility stop (docs/theory.md §14) on a supply of n_max prompts: at the line it stops
    most runs early, undecided, and the false-ON rate and the coverage at the (earlier)
    stopping time stay nominal — it never turns a cell ON and the sequence is time-uniform."""
    reps = 3000
    seed = 40 + k + n_max
    false_on, coverage = optional_stopping(reps, k, n_max, 1 + MARGIN, seed, futility=True)
    assert false_on <= NOMINAL_FALSE_ON + 2 * mc_se(NOMINAL_FALSE_ON, reps)
    assert coverage >= 0.95 - 2 * mc_se(0.95, reps)
    optional_stopping(reps, k, n_max, 1 + MARGIN, seed)
    assert STOPS[(k, n_max, 1 + MARGIN, seed, True)] < STOPS[(k, n_max, 1 + MARGIN, seed, False)]


@pytest.mark.slow
def test_what_the_futility_stop_costs_in_power() -> None:
    """It can give up a cell that more prompts would have decided ON: its projection starts from
    an early, noisy estimate. At a true 1.4× (K = 3) the loss is small on 8 prompts and larger on
    48 (measured P(ON) 0.188 → 0.172 and 0.919 → 0.834; docs/theory.md §14)."""
    reps = 2000
    for n_max, max_loss in ((8, 0.03), (48, 0.15)):
        p_on, _ = optional_stopping(reps, 3, n_max, 1.4, seed=5)
        p_fut, coverage = optional_stopping(reps, 3, n_max, 1.4, seed=5, futility=True)
        assert p_on - max_loss < p_fut <= p_on
        assert coverage >= 0.95 - 2 * mc_se(0.95, reps)


def test_vectorised_futility_matches_decide() -> None:
    """The simulation's `futile` over arrays is `decide`'s futility on the same prefixes."""
    s = SequenceSettings(margin=MARGIN, candidates=3, n_opt=16)
    arrays = paired_prompts(np.random.default_rng(21), 30, 3, 16, 1 + MARGIN)
    log_s, sd = running_log_stat(arrays)
    seen = set()
    for rep in range(30):
        for n in (FUTILITY_FROM, MIN_PROMPTS, 6, 10):
            cand = {f"c{j}": [a[rep, j, :n] for a in arrays] for j in range(3)}
            d = decide(cand, s, remaining=16 - n)
            if d.state != "undecided":
                continue
            vec = futile(log_s[rep, :, n - 1], sd[rep, :, n - 1], n, 16, s)
            assert d.futile == bool(vec)
            seen.add(d.futile)
    assert seen == {True, False}


def test_half_widths_fall_with_n() -> None:
    """`settles_by` reads the half-width at the last prompt as the smallest it reaches, and
    `more_prompts_needed` bisects: both rest on b_α(n)/n and σ̂'s upper factor falling with n."""
    n = np.arange(2, 2001)
    assert (np.diff(sigma_upper(np.ones(n.shape), n)) < 0).all()
    for k in (1, 3, 16):
        for n_opt in (4, 16, 200):
            s = SequenceSettings(candidates=k, n_opt=n_opt)
            assert (np.diff(boundary_factor(n, s.side_alpha, s.rho)) < 0).all()


def test_more_prompts_needed_is_the_first_n_below_the_gap() -> None:
    s = SequenceSettings(margin=MARGIN, candidates=3, n_opt=16)
    for speedup, n, sd in ((1.3, 6, 0.3), (1.1, 8, 0.2), (0.8, 5, 0.5), (1.06, 4, 0.3)):
        b = CandidateBound("c", n, speedup, 0.0, math.inf, sd=sd)
        gap = abs(math.log(speedup) - math.log1p(MARGIN))
        more = more_prompts_needed(b, s, cap=3000)
        m = np.arange(n, 3001)
        half = sigma_upper(np.full(m.shape, sd), m) * boundary_factor(m, s.side_alpha, s.rho)
        first = int(m[np.argmax(half < gap)]) - n if (half < gap).any() else 3000
        assert more == first


def test_naive_fixed_n_interval_checked_after_every_prompt_inflates_false_on() -> None:
    """The check the sequence replaces: the same data, a fixed-n interval looked at each prompt."""
    reps = 3000
    naive, naive_cov = optional_stopping(reps, 1, 48, 1 + MARGIN, seed=3, naive=True)
    seq, _ = optional_stopping(reps, 1, 48, 1 + MARGIN, seed=3)
    assert naive > 3 * NOMINAL_FALSE_ON  # measured 0.17
    assert naive_cov < 0.9
    assert seq < naive / 4


def test_power_at_a_clear_speedup() -> None:
    """An interval that never decides would pass the error tests: it must decide at 1.3×."""
    p_on, _ = optional_stopping(2000, 3, 64, 1.3, seed=8)
    assert p_on > 0.7  # measured ≈ 0.81


def test_boundary_holds_for_gaussian_sums_with_known_variance() -> None:
    """Ville's inequality for the mixture: P(∃ n ≤ 500: S_n ≥ σ b(n)) ≤ α (σ known)."""
    alpha, rho, reps, n_max = 0.05, 10.0, 4000, 500
    steps = np.random.default_rng(0).normal(0, 2.0, (reps, n_max))
    n = np.arange(1, n_max + 1)
    crossed = (np.cumsum(steps, axis=1) / n >= 2.0 * boundary_factor(n, alpha, rho)).any(axis=1)
    assert crossed.mean() <= alpha + 2 * mc_se(alpha, reps)
    assert crossed.mean() > alpha / 4  # and the boundary is not absurdly loose


def test_mixture_quantile_solves_its_equation_and_exceeds_the_fixed_n_quantile() -> None:
    for ratio in (1.5, 10.0, 1000.0):
        u = mixture_quantile(ratio, 0.025)
        lhs = math.log(2) - 0.5 * math.log(ratio) + float(sps.norm.logcdf(u)) + u * u / 2
        assert lhs == pytest.approx(math.log(40.0), abs=1e-8)
        assert u > sps.norm.ppf(0.975)


def test_running_statistic_matches_the_fixed_n_delta_method() -> None:
    rng = np.random.default_rng(2)
    arrays = [rng.uniform(10, 50, 9) for _ in range(4)]
    log_s, sd = running_log_stat(arrays)
    rep = log_linear_replicates([[a[:6] for a in arrays]], THROUGHPUT_RATIO_COEFS, n_boot=100)
    assert log_s[5] == pytest.approx(float(rep.log_value[0]), rel=1e-12)
    assert sd[5] / math.sqrt(6) == pytest.approx(float(rep.se[0]), rel=1e-9)
    assert math.isnan(sd[0])


def _prompts(speedup: float, n: int, seed: int) -> list[np.ndarray]:
    return [a[0, 0] for a in paired_prompts(np.random.default_rng(seed), 1, 1, n, speedup, 0.1)]


def test_decide_on_off_and_undecided() -> None:
    s = SequenceSettings(margin=MARGIN, candidates=2, n_opt=16)
    on = decide({"γ=2": _prompts(2.0, 12, 1), "γ=8": _prompts(1.6, 12, 2)}, s)
    assert on.state == "on" and on.chosen == "γ=2"
    assert on.bounds[0].lo > 1 + MARGIN
    off = decide({"γ=2": _prompts(0.6, 12, 3), "γ=8": _prompts(0.5, 12, 4)}, s)
    assert off.state == "off" and off.chosen is None
    assert all(b.hi < 1 + MARGIN for b in off.bounds)
    early = decide({"γ=2": _prompts(2.0, MIN_PROMPTS - 1, 5)}, s)
    assert early.state == "undecided"
    near = decide({"γ=2": _prompts(1.08, 8, 6)}, s)
    assert near.state == "undecided" and near.more_prompts is not None and near.more_prompts > 8


def test_futile_when_the_prompts_left_cannot_settle_it() -> None:
    """A cell near the line needing far more prompts than remain is futile; the same cell with a
    large supply, a near-decided cell, and a cell without σ̂ yet are not."""
    s = SequenceSettings(margin=MARGIN, candidates=2, n_opt=16)
    near_line = {"γ=2": _prompts(1.08, 8, 6)}
    stuck = decide(near_line, s, remaining=4)
    assert stuck.state == "undecided" and stuck.futile and stuck.remaining == 4
    assert stuck.more_prompts is not None and stuck.more_prompts > 4
    assert not decide(near_line, s, remaining=5000).futile
    assert not decide(near_line, s).futile  # no supply given: never futile
    close = decide({"γ=2": _prompts(1.15, 4, 7)}, s, remaining=3)
    assert close.state == "undecided" and not close.futile
    assert close.more_prompts is not None and close.more_prompts <= 3
    early = decide({"γ=2": _prompts(2.0, MIN_PROMPTS - 1, 5)}, s, remaining=1)
    assert early.state == "undecided" and not early.futile


def test_a_cell_that_cannot_reach_min_prompts_usable_prompts_is_futile() -> None:
    """Without σ̂ (degenerate prompts set aside, §13) nothing is projected, but a candidate that
    could not reach MIN_PROMPTS usable prompts even if every prompt left were usable can never
    be decided: with 1 usable prompt and 2 left the cell is futile, with 3 left it is not."""
    s = SequenceSettings(margin=MARGIN, candidates=1, n_opt=16)
    one = {"γ=2": _prompts(1.5, 1, 9)}
    assert decide(one, s, remaining=MIN_PROMPTS - 2).futile
    assert not decide(one, s, remaining=MIN_PROMPTS - 1).futile
    none: dict[str, list[np.ndarray]] = {"γ=2": [np.zeros(0)] * 4}
    assert decide(none, s, remaining=MIN_PROMPTS - 1).futile
    assert not decide(none, s, remaining=MIN_PROMPTS).futile
