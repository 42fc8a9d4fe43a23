"""γ policies and trace replay without a model: hand-computed sequences of each policy, and the
replay of recorded rounds by hand (docs/theory.md §3, §5)."""

from __future__ import annotations

import pytest

from specbench.analysis.simulate.replay import Timing, Trace, replay, replay_prompt
from specbench.config import PolicySpec
from specbench.decoding.policies import Policy
from specbench.decoding.rounds import Rounds
from specbench.errors import SpecbenchError


def test_heuristic_policy_hand_sequence() -> None:
    pol = Policy(PolicySpec(name="heuristic", gamma=4, max_gamma=8))
    g = pol.initial_gamma()
    acc, dra, seen = [], [], []
    for a in (4, 6, 2, 0, 0, 0, 0):  # all, all(capped 8), partial, then misses
        d = g
        acc.append(min(a, d))
        dra.append(d)
        g = pol.update(g, acc, dra)
        seen.append(g)
    assert seen == [6, 8, 7, 6, 5, 4, 3]


def test_adaptive_policy_window_thresholds() -> None:
    pol = Policy(
        PolicySpec(name="adaptive", gamma=4, window=2, high=0.85, low=0.6, min_gamma=2, max_gamma=8)
    )
    assert pol.update(4, [4], [4]) == 5  # rate 1.0 > 0.85
    assert pol.update(5, [4, 2], [4, 5]) == 5  # window rate 6/9 = 0.67 is in band: unchanged
    assert pol.update(4, [2, 1], [5, 4]) == 3  # 3/9 < 0.6 → down
    assert pol.update(2, [0], [2]) == 2  # never below min_gamma


def test_adaptive_in_band_keeps_gamma() -> None:
    pol = Policy(PolicySpec(name="adaptive", gamma=4, window=20))
    assert pol.update(4, [3], [4]) == 4  # 0.75 is inside [0.6, 0.85]


def test_temperature_and_confidence_policies() -> None:
    spec = PolicySpec(name="temperature", gamma=4)
    assert Policy(spec, 1.0).initial_gamma() == 2
    assert Policy(spec, 0.0).initial_gamma() == 6
    assert Policy(spec, 0.5).initial_gamma() == 4
    conf = Policy(PolicySpec(name="confidence", threshold=0.3, max_gamma=6))
    assert conf.initial_gamma() == 6 and conf.min_confidence == 0.3 and conf.max_gamma == 6


def test_policy_controller_replays_rounds() -> None:
    pol = Policy(PolicySpec(name="heuristic", gamma=2, max_gamma=8))
    ctl = pol.controller()
    r = Rounds()
    assert ctl(r) == 2
    r.gamma.append(2), r.accepted.append(2), r.drafted.append(2)
    assert ctl(r) == 4
    r.gamma.append(4), r.accepted.append(1), r.drafted.append(4)
    assert ctl(r) == 3


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({"name": "greedy"}, "unknown policy"),
        ({"name": "confidence", "threshold": 1.0}, "threshold"),
    ],
)
def test_policy_spec_validation(bad: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        PolicySpec(**bad)


def _trace_rounds() -> dict:
    return {
        "accepted": [4, 0, 2, 4],
        "drafted": [4, 4, 4, 4],
        "draft_top_prob": [
            [0.9, 0.9, 0.2, 0.9],
            [0.9, 0.1, 0.9, 0.9],
            [0.5, 0.5, 0.5, 0.5],
            [0.9] * 4,
        ],
    }


def test_replay_fixed_and_confidence_by_hand() -> None:
    timing = Timing(t_ar_ms=10.0, t_draft_ms=1.0, t0_ms=10.0, t1_ms=0.5)
    fixed2 = Policy(PolicySpec(name="fixed", gamma=2))
    tokens, rounds, time_ms, gammas = replay_prompt(fixed2, Trace.of(_trace_rounds()), timing)
    # accepted min(A, 2) = 2, 0, 2, 2 → tokens 3 + 1 + 3 + 3
    assert (tokens, rounds, gammas) == (10, 4, [2, 2, 2, 2])
    assert time_ms == pytest.approx(4 * (2 * 1.0 + 10.0 + 0.5 * 2))
    conf = Policy(PolicySpec(name="confidence", threshold=0.3, max_gamma=4))
    tokens, rounds, time_ms, gammas = replay_prompt(conf, Trace.of(_trace_rounds()), timing)
    # keeps 2, 1, 4, 4 positions; accepted 2, 0, 2, 4 → tokens 3 + 1 + 3 + 5
    assert gammas == [2, 1, 4, 4] and tokens == 12
    # early stops spend one more draft forward: 3 + 2 + 4 + 4 forwards
    assert time_ms == pytest.approx((3 + 2 + 4 + 4) * 1.0 + 4 * 10.0 + 0.5 * (2 + 1 + 4 + 4))


def test_replay_refuses_a_policy_beyond_the_trace() -> None:
    rec = {"rounds": _trace_rounds() | {"draft_ms": [], "verify_ms": [], "overhead_ms": []}}
    pol = Policy(PolicySpec(name="heuristic", gamma=2, max_gamma=8))
    with pytest.raises(SpecbenchError, match="beyond the trace"):
        replay(pol, [rec], Timing(10, 1, 10, 0.5), gamma_max=4)


def test_greedy_position_replay_by_hand() -> None:
    from specbench.analysis.simulate.replay import _position_trace, replay_greedy_prompt

    rounds = Trace(
        accepted=[2, 4, 0],
        drafted=[4, 4, 4],
        draft_top_prob=[[0.9, 0.8, 0.2, 0.9], [0.9, 0.9, 0.9, 0.9], [0.3, 0.9, 0.9, 0.9]],
    )
    match, conf = _position_trace(rounds)
    # round 1: 1 1 0 | round 2: 1 1 1 1 then an untested bonus | round 3: 0
    assert match == [1, 1, 0, 1, 1, 1, 1, None, 0]
    assert conf[:3] == [0.9, 0.8, 0.2] and conf[7] is None
    timing = Timing(t_ar_ms=10.0, t_draft_ms=1.0, t0_ms=10.0, t1_ms=0.0)
    # fixed γ = 2 over 9 positions: rounds accept 2 (emit 3: t=0..2), 2 (t=3..5), 2 (t=6,7; the
    # bonus position counts as a match), then t=9 → stop. Positions: [0:3] [3:6] [6:9]
    tokens, n, _, gammas = replay_greedy_prompt(
        Policy(PolicySpec(name="fixed", gamma=2)), rounds, timing
    )
    assert (tokens, n) == (9, 3)
    assert gammas == [2, 2, 2]
