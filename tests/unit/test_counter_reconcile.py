"""Counter reconciliation (analysis/serving/counter_reconcile.py, docs/theory.md §17): exact identity on
hand-built batches, then a seeded simulation of an engine decoding specbench's batches — with
overflow past max_tokens, stops, steps without a draft (n-gram), retried requests and the last
steps of the previous batch landing late — where no unpolluted batch may be flagged (the rule's
stated false-alarm rate is 0), and foreign traffic above the slack always is."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.analysis.serving.counter_reconcile import polluted_message, reconcile
from specbench.analysis.serving.spec_counters import SpecCounters


def counters(drafts: int, accepted: int, gamma: int) -> SpecCounters:
    return SpecCounters(float(drafts), float(drafts * gamma), float(accepted))


def test_identity_by_hand() -> None:
    # one request, γ = 3: prefill token, then steps accepting 3, 1, 2 → 1 + 4 + 2 + 3 = 10 tokens
    c = counters(drafts=3, accepted=6, gamma=3)
    r = reconcile(
        c, tokens_after_first=9, turns=1, extra_attempts=0, max_tokens=10, gamma=3, max_in_flight=1
    )
    assert (r.work, r.expected, r.excess) == (9.0, 9.0, 0.0)
    assert r.slack == 3 * 1 + 4 * 1 and not r.polluted
    # the same counters with one foreign request's 12 tokens of work on top: 9 + 12 − 9 > 7
    foreign = c.plus(counters(drafts=4, accepted=8, gamma=3))
    r = reconcile(
        foreign, tokens_after_first=9, turns=1, extra_attempts=0, max_tokens=10, gamma=3,
        max_in_flight=1,
    )  # fmt: skip
    assert r.excess == 12 and r.polluted
    msg = polluted_message("http://x γ=3 c=1 code", r.to_dict())
    assert "\n" not in msg and "accepted + drafts = 21" in msg and "at most 16" in msg


def decode(
    rng: np.random.Generator, gamma: int, alpha: float, n_max: int, p_stop: float, p_nodraft: float
) -> tuple[int, int, int, int]:
    """One request as an engine decodes it: (tokens returned, drafts, accepted, last step's
    work accepted + 1)."""
    n, drafts, accepted, last = 1, 0, 0, 0
    while n < n_max:
        if rng.random() < p_stop:
            break
        if rng.random() < p_nodraft:  # no draft proposed: one token, no counter
            n += 1
            last = 0
            continue
        j = 0
        while j < gamma and rng.random() < alpha:
            j += 1
        drafts += 1
        accepted += j
        n += j + 1
        last = j + 1
    return min(n, n_max), drafts, accepted, last


def simulate_batches(
    seed: int, n_batches: int, foreign_tokens: int = 0
) -> list[tuple[bool, float]]:
    """(flagged, excess − slack) per simulated batch; `foreign_tokens` > 0 adds one foreign
    request of that length to each batch."""
    rng = np.random.default_rng(seed)
    out = []
    late = 0.0  # the previous batch's last steps whose counters land in this batch
    gamma = 1
    for b in range(n_batches):
        if b % 20 == 0:  # a new setting (γ), its batches at concurrency 1 … 8
            gamma, late = int(rng.integers(1, 8)), 0.0
        conc = int(rng.choice([1, 2, 4, 8]))
        n_req = int(rng.integers(1, 12))
        max_tokens = int(rng.integers(2, 80))
        alpha, p_stop = float(rng.uniform(0.05, 0.99)), float(rng.choice([0.0, 0.05]))
        p_nodraft = float(rng.choice([0.0, 0.3]))
        work = late
        received, turns, extra = 0, 0, 0
        lasts = []
        for _ in range(n_req):
            for _ in range(int(rng.integers(0, 2))):  # a failed attempt, retried
                n, d, a, _ = decode(rng, gamma, alpha, int(rng.integers(1, max_tokens + 1)), 0, 0)
                work += d + a
                extra += 1
            n, d, a, last = decode(rng, gamma, alpha, max_tokens, p_stop, p_nodraft)
            work += d + a
            received += n - 1
            turns += 1
            lasts.append(last)
        # up to `conc` of this batch's final steps are counted after its closing scrape
        k = int(rng.integers(0, min(conc, n_req) + 1))
        late = float(sum(sorted(lasts)[-k:])) if k else 0.0
        work -= late
        if foreign_tokens:
            _, d, a, _ = decode(rng, gamma, alpha, foreign_tokens, 0, 0)
            work += d + a
        c = SpecCounters(work, 0.0, 0.0)  # only accepted + drafts matter to the rule
        r = reconcile(
            c,
            tokens_after_first=received,
            turns=turns,
            extra_attempts=extra,
            max_tokens=max_tokens,
            gamma=gamma,
            max_in_flight=8,
        )
        out.append((r.polluted, r.excess - r.slack))
    return out


@pytest.mark.slow
def test_no_false_alarm_on_unpolluted_batches() -> None:
    """Stated false-alarm rate 0: 3 000 seeded honest batches at the worst case of every allowance,
    none flagged."""
    rows = simulate_batches(seed=7, n_batches=3000)
    assert sum(flag for flag, _ in rows) == 0


@pytest.mark.slow
def test_detects_foreign_traffic() -> None:
    """A foreign request of 400 tokens on top of each batch is above any batch's slack here
    (γ ≤ 7, ≤ 11 turns, ≤ 1 retry each, c ≤ 8: slack ≤ 7·11 + 86·11 + 64 < 1 100 only with every
    retry; detection is measured, not assumed)."""
    rows = simulate_batches(seed=11, n_batches=1000, foreign_tokens=400)
    rate = sum(flag for flag, _ in rows) / len(rows)
    assert rate > 0.9, rate
    # a small foreign request (8 tokens) hides in the slack: detection then is not promised
    small = simulate_batches(seed=11, n_batches=1000, foreign_tokens=8)
    assert sum(flag for flag, _ in small) / len(small) < rate
