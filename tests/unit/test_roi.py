"""The analytic model against hand-computed values (docs/theory.md §3–4) and its own inverses."""

import math

import pytest

from specbench.analysis.arithmetic import roi


def test_expected_tokens_hand_values() -> None:
    assert roi.expected_tokens(1, 0.6) == pytest.approx(1.6)
    assert roi.expected_tokens(2, 0.5) == pytest.approx(1.75)  # 1 + .5 + .25
    assert roi.expected_tokens(4, 0.0) == 1.0
    assert roi.expected_tokens(4, 1.0) == 5.0
    assert roi.expected_tokens(0, 0.7) == pytest.approx(1.0)
    # continuity at α → 1
    assert roi.expected_tokens(6, 1 - 1e-9) == pytest.approx(7.0, rel=1e-6)


def test_expected_tokens_rejects_bad_alpha() -> None:
    with pytest.raises(ValueError):
        roi.expected_tokens(2, 1.2)


def test_worked_check_80ms_target_7ms_draft() -> None:
    # docs/theory.md §4: T_ar = 80, T_d = 7, γ = 6: round = 42 + 80 = 122 ms.
    itl = roi.itl_ms(6, 3.5, 80.0, 7.0)
    assert itl == pytest.approx(122 / 3.5)  # 34.857 ms
    assert 80.0 / itl == pytest.approx(2.2951, abs=1e-4)
    slow = roi.itl_ms(6, 1.5, 80.0, 7.0)
    assert slow == pytest.approx(81.333, abs=1e-3)
    assert slow > 80.0  # slower than no speculation


def test_worked_check_alpha_02() -> None:
    # T_ar = 100, T_d = 8, α = 0.2: γ=1 → ā 1.2, round 108 → 1.111×; γ=16 → 0.548×.
    assert roi.speedup(1, 0.2, 100.0, 8.0) == pytest.approx(1.2 / 1.08)
    a16 = (1 - 0.2**17) / 0.8
    assert roi.speedup(16, 0.2, 100.0, 8.0) == pytest.approx(a16 * 100 / 228)
    assert roi.speedup(16, 0.2, 100.0, 8.0) == pytest.approx(0.548, abs=1e-3)


def test_leviathan_closed_form_matches() -> None:
    # speedup = (1 − α^{γ+1}) / ((1 − α)(γc + 1)) with constant verify cost.
    for alpha in (0.3, 0.6, 0.9):
        for gamma in (1, 3, 8):
            c = 0.05
            closed = (1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1))
            assert roi.speedup(gamma, alpha, 1.0, c) == pytest.approx(closed)


def test_gamma1_pays_iff_alpha_exceeds_c() -> None:
    c = 0.25
    assert roi.speedup(1, 0.26, 1.0, c) > 1.0
    assert roi.speedup(1, 0.24, 1.0, c) < 1.0
    assert roi.break_even_alpha(1, 1.0, c) == pytest.approx(c)


def test_verify_slope_raises_round_time() -> None:
    assert roi.verify_ms(4, 10.0, 0.5) == 12.0
    assert roi.round_ms(4, 10.0, 1.0, 0.5) == 16.0
    assert roi.speedup(4, 0.8, 10.0, 1.0, 0.5) < roi.speedup(4, 0.8, 10.0, 1.0, 0.0)
    # hand value: ā(4, .8) = (1 − .8^5)/.2 = 3.3616; ITL = 16/3.3616
    assert roi.speedup(4, 0.8, 10.0, 1.0, 0.5) == pytest.approx(10 / (16 / 3.3616))


def test_alpha_from_accepted_inverts_expected_tokens() -> None:
    for gamma in (1, 4, 9):
        for alpha in (0.0, 0.15, 0.5, 0.77, 0.99, 1.0):
            tau = roi.expected_tokens(gamma, alpha)
            assert roi.alpha_from_accepted(tau, gamma) == pytest.approx(alpha, abs=1e-9)
    with pytest.raises(ValueError):
        roi.alpha_from_accepted(6.5, 5)
    with pytest.raises(ValueError):
        roi.alpha_from_accepted(0.9, 5)


def test_break_even_alpha_gives_speedup_one() -> None:
    for gamma in (1, 2, 5, 10):
        a = roi.break_even_alpha(gamma, 80.0, 7.0, 0.3)
        assert a is not None
        assert roi.speedup(gamma, a, 80.0, 7.0, 0.3) == pytest.approx(1.0, abs=1e-9)
    # a draft as slow as the target breaks even only at α = 1; a slower one never pays
    assert roi.break_even_alpha(3, 10.0, 10.0) == 1.0
    assert roi.break_even_alpha(3, 10.0, 11.0) is None


def test_break_even_cost_ratio_gives_speedup_one() -> None:
    for gamma, alpha in ((1, 0.6), (4, 0.8), (7, 0.5)):
        c = roi.break_even_cost_ratio(gamma, alpha)
        assert roi.speedup(gamma, alpha, 1.0, c) == pytest.approx(1.0)
    assert roi.break_even_cost_ratio(1, 0.6) == pytest.approx(0.6)
    assert roi.break_even_cost_ratio(2, 0.0) == pytest.approx(0.0)


def test_optimal_includes_off() -> None:
    sc = roi.scenario(0.6, list(range(1, 17)), 80.0, 7.0)
    assert sc.best.gamma == 3  # ā(3)=2.176 / 101 ms beats γ = 2 (1.96/94) and γ = 4 (2.306/108)
    assert sc.best.speedup == pytest.approx(80 / (101 / 2.176))
    assert sc.verdict == "on"
    bad = roi.scenario(0.05, list(range(1, 17)), 1.0, 0.3)
    assert bad.best.gamma == 0 and bad.best.speedup == 1.0 and bad.verdict == "off"
    assert all(r.speedup < 1 for r in bad.rows)


def test_alpha_zero_and_one_extremes() -> None:
    sc0 = roi.scenario(0.0, [1, 2], 1.0, 0.1)
    assert [r.expected_tokens for r in sc0.rows] == [1.0, 1.0]
    assert sc0.best.gamma == 0
    sc1 = roi.scenario(1.0, [1, 4, 16], 1.0, 0.1)
    assert sc1.rows[-1].speedup == pytest.approx(17 / 2.6)
    assert sc1.best.gamma == 16


def test_economics_cost_per_million_tokens() -> None:
    e = roi.economics(80.0, 40.0, gpu_hour_usd=2.0, gpus=2, draft_memory_gib=8, gpu_memory_gib=80)
    # 80 ms/token → 45 000 tokens/h; 4 USD/h → 88.89 USD per 10⁶ tokens; half that at 40 ms.
    assert e.usd_per_million_tokens_off == pytest.approx(4.0 / 45_000 * 1e6)
    assert e.usd_per_million_tokens_on == pytest.approx(e.usd_per_million_tokens_off / 2)
    assert e.draft_memory_share == pytest.approx(0.05)
    none = roi.economics(80.0, 40.0, None)
    assert none.usd_per_million_tokens_off is None and none.draft_memory_share is None
    assert not math.isnan(e.usd_per_million_tokens_on)
