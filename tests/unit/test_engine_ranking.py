"""The engine ranking's "clears 1 + margin" is the three-outcome ON test over the ranked settings
(docs/theory.md §8, §19): the row that clears is the one the verdict recommends, nothing clears
below the test's resolution, and a setting that truly loses never clears."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from specbench.analysis.decide.engine_ranking import engine_ranking
from specbench.analysis.decide.recommend import recommend
from specbench.setting import SettingKey

from .synthetic import baseline_record, spec_record

Records = list[dict[str, Any]]


def _run(n: int, seed: int) -> tuple[Records, dict[SettingKey, Records]]:
    """A baseline at 20 ms a token and three settings on the same n prompts: a fast draft at γ=4
    (≈1.9×), the same at γ=2 (≈1.6×) and a slow draft that loses (≈0.7×)."""
    rng = np.random.default_rng(seed)
    base: Records = []
    settings: dict[SettingKey, Records] = {("fast", "fixed", 4): [], ("fast", "fixed", 2): [],
                                           ("slow", "fixed", 2): []}  # fmt: skip
    for i in range(n):
        alpha = float(np.clip(rng.normal(0.75, 0.1), 0.3, 0.95))
        rounds = int(rng.integers(10, 60))
        for (drafter, policy, gamma), recs in settings.items():
            t_draft = 1.0 if drafter == "fast" else 30.0  # ms a draft step
            rec = spec_record(rng, f"p{i}", gamma, [alpha] * gamma, rounds, t_draft=t_draft)
            rec.update(drafter=drafter, policy=policy, setting=f"{drafter} γ={gamma}")
            recs.append(rec)
        tokens = int(rounds * (1 + 2 * alpha))
        base.append(baseline_record(f"p{i}", 20.0, new_tokens=tokens))
    return base, settings


def test_the_row_that_clears_is_the_recommended_one() -> None:
    base, settings = _run(8, seed=2801)
    rows = engine_ranking(base, settings, [], 1, 0.05, 0.95, 200)
    rec = recommend(base, settings, 0.05, 0.95, 200)
    assert rec.verdict == "on"
    cleared = [r for r in rows if r.clears]
    assert cleared and all(r.decision_lower_bound > 1.05 for r in cleared)
    # the verdict takes the best point speedup among those that clear: the first cleared row
    assert (cleared[0].drafter, cleared[0].gamma) == (rec.drafter, rec.gamma)
    assert rec.decision_lower_bound == cleared[0].decision_lower_bound
    slow = next(r for r in rows if r.drafter == "slow")
    assert slow.speedup.value < 1.0 and not slow.clears


def test_nothing_clears_below_the_tests_resolution() -> None:
    """Five prompts: 2^5 sign flips cannot show a one-sided 2.5 % tail, so no row clears and
    every bound is unbounded, however fast the setting looks (the old bootstrap bound cleared)."""
    base, settings = _run(5, seed=2805)
    rows = engine_ranking(base, settings, [], 1, 0.05, 0.95, 200)
    assert rows[0].speedup.value > 1.3
    assert not any(r.clears for r in rows)
    assert all(r.decision_lower_bound is None for r in rows)
    assert recommend(base, settings, 0.05, 0.95, 200).verdict == "undecided"
    assert math.isfinite(rows[0].speedup.value)
