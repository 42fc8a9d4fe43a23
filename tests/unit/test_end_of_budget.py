"""The end of the token budget (analysis/arithmetic/end_of_budget.py, docs/theory.md §3): the budget walk,
the censored acceptance distribution, the turn split, and the seeded simulation that measures
the γ predictions' bias against runs decoded as decoding/generate.py decodes
(analysis/calibration/prediction_calibration.py)."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.analysis.arithmetic.end_of_budget import capped_walk, censored_pmf, turn_spans
from specbench.analysis.calibration import prediction_calibration as pc


def test_walk_hand_computed_where_every_round_accepts_all() -> None:
    """A ≡ 2 at γ = 2. Budget, 5 tokens left: r = 5 drafts 2, accepts 2 → r = 2 drafts
    max(1, min(2, 1)) = 1, accepts 1 → done: 2 rounds, 3 accepted. 1000 left: 332 rounds of 3
    tokens down to r = 4, one more of 3 (r = 1), one of 1 draft: 334 rounds, 667 accepted.
    At EOS with 5 left no drafting cap: 2 + 2 accepted, then 1 left: 2 rounds, 4 accepted."""
    pmf = np.array([[0.0, 0.0, 1.0]])
    n, acc = capped_walk(pmf, 2, [5])
    assert (n[0], acc[0]) == pytest.approx((2.0, 3.0))
    n, acc = capped_walk(pmf, 2, [1000])
    assert (n[0], acc[0]) == pytest.approx((334.0, 667.0))
    n, acc = capped_walk(pmf, 2, [5], eos=True)
    assert (n[0], acc[0]) == pytest.approx((2.0, 4.0))
    n, acc = capped_walk(np.array([[1.0, 0.0, 0.0]]), 2, [0, 3, 50])
    assert n.tolist() == pytest.approx([0.0, 3.0, 50.0]) and acc.tolist() == [0.0, 0.0, 0.0]


def test_walk_matches_the_decoding_loop_rule_by_monte_carlo() -> None:
    """Expected rounds and accepted tokens against 20 000 walks of the loop's rule
    g = max(1, min(γ, r − 1)), at a length inside the capped region and one past it."""
    rng = np.random.default_rng(11)
    pmf = np.array([0.3, 0.2, 0.1, 0.1, 0.3])  # γ_max = 4
    for gamma, r0 in ((3, 4), (3, 37), (1, 16)):
        r = np.full(20_000, r0)
        n_sim, a_sim = np.zeros(20_000), np.zeros(20_000)
        while (r > 0).any():  # all walks at once, one round per step
            live = r > 0
            g = np.maximum(1, np.minimum(gamma, r - 1))
            a = np.minimum(rng.choice(5, size=r.size, p=pmf), g)
            n_sim += live
            a_sim += np.where(live, a, 0)
            r = np.where(live, r - a - 1, r)
        n_dp, a_dp = capped_walk(pmf[None, :], gamma, [r0])
        se_n = np.std(n_sim) / np.sqrt(len(n_sim))
        se_a = np.std(a_sim) / np.sqrt(len(a_sim))
        assert abs(n_dp[0] - np.mean(n_sim)) < 4 * se_n + 1e-9, (gamma, r0)
        assert abs(a_dp[0] - np.mean(a_sim)) < 4 * se_a + 1e-9, (gamma, r0)


def test_censored_pmf_hand_computed() -> None:
    """γ_max = 3; rounds A = 0, 2, 1 uncapped and one the budget capped at 1 that accepted it.
    h1 = 3/4 (all four reach position 1); h2 = 1/2 (the censored round is not seen there);
    h3 = 0/1. P(A ≥ i) = 1, 3/4, 3/8, 0 → P(A = a) = 1/4, 3/8, 3/8, 0."""
    pmf = censored_pmf([0, 2, 1, 1], [3, 3, 3, 1], 3)
    assert pmf.tolist() == pytest.approx([0.25, 0.375, 0.375, 0.0])
    # a round its drafter cut short is exact: A = 1 of 1 drafted means "stops at 1"
    assert censored_pmf([1], [3], 3).tolist() == pytest.approx([0.0, 1.0, 0.0, 0.0])
    assert np.isnan(censored_pmf([], [], 3)).all()


def test_turn_spans_split_the_rounds_by_the_tokens_each_turn_kept() -> None:
    rec = {
        "new_tokens_per_turn": [6, 3],
        "stop_reason": ["max_new_tokens", "eos"],
        "rounds": {"accepted": [2, 1, 0, 1], "emitted": [3, 2, 1, 1]},
    }
    spans = turn_spans(rec)
    assert [(s.start, s.stop, s.tokens, s.end) for s in spans] == [
        (0, 2, 5, "budget"),
        (2, 4, 2, "eos"),
    ]
    del rec["stop_reason"]  # an older record: one turn, no budget modelled
    assert [(s.tokens, s.end) for s in turn_spans(rec)] == [(8, "free")]


def test_decode_follows_the_loop_cap_and_keeps_the_budget() -> None:
    """The simulated loop: 16-token budget, every draft accepted at γ = 6: rounds draft 6
    (15 left), 6 (8 left), then max(1, min(6, 1 − 1)) = 1 with 1 left; 16 tokens kept."""
    p = pc._Prompt(beta=[0.98] * 16, uniform=[0.0] * 16, length=16)
    rec = pc.decode(np.random.default_rng(0), p, 6, 16)
    assert rec["rounds"]["gamma"] == [6, 6, 1]
    assert rec["rounds"]["accepted"] == [6, 6, 1]
    assert rec["rounds"]["emitted"] == [7, 7, 1]
    assert rec["new_tokens"] == 16 and rec["stop_reason"] == ["max_new_tokens"]


def _assert_unbiased(b: pc.Bias, methods: tuple[str, ...]) -> None:
    for m in methods:
        for g, v in b.mean[m].items():
            assert abs(v) <= 0.01 + 2 * b.se[m][g], (m, g, v, b.se[m][g])


@pytest.mark.slow
def test_greedy_16_token_predictions_within_one_percent_and_the_old_rule_not() -> None:
    b = pc.prediction_bias(pc.Traffic(budget=16, greedy=True), reps=30, seed=703)
    _assert_unbiased(b, ("truncation", "iid", "replay"))
    old = b.worst("old truncation")
    assert old > 0.02, old  # the per-round rule the walk replaced: the check can fail


@pytest.mark.slow
@pytest.mark.parametrize(("budget", "seed"), [(16, 701), (64, 702)])
def test_sampled_predictions_within_one_percent(budget: int, seed: int) -> None:
    b = pc.prediction_bias(pc.Traffic(budget=budget), reps=30, seed=seed)
    _assert_unbiased(b, ("truncation", "replay"))
    if budget == 16:
        assert b.worst("old truncation") > 0.02, b.worst("old truncation")
