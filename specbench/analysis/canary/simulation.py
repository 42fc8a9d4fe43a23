"""Seeded synthetic canaries: per-request traffic for both arms aggregated into paired windows,
with planted differences. The calibration tests (tests/unit/test_canary_*.py) and
benchmarks/bench_canary.py measure the decision's error rates and power on them.

Each window draws one load factor shared by both arms (the arms run side by side, so a busy
minute slows both), Poisson arrivals split between the arms by the configured share, and per
request: TPOT (lognormal around the load), output length (lognormal, cut at `max_tokens`),
end-to-end latency, an error, a degenerate flag and, on the canary, drafted and accepted tokens
per bucket with a per-request random acceptance rate (tokens of one request are correlated).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specbench.analysis.canary.windows import Acceptance, ArmWindow, Tally, WindowPair


@dataclass(frozen=True)
class Planted:
    """What the canary does differently (1.0 / 0.0 / {} = nothing)."""

    tpot_factor: float = 1.0
    error_add: float = 0.0
    length_factor: float = 1.0
    degenerate_add: float = 0.0
    acceptance: dict[str, float] = field(default_factory=dict)  # bucket → α on the canary


@dataclass(frozen=True)
class Traffic:
    requests_per_window: float = 100.0  # both arms together
    canary_share: float = 0.5  # of the two arms' requests
    load_sd: float = 0.3  # log-sd of the shared per-window load factor
    tpot_ms: float = 30.0
    tpot_sd: float = 0.25  # log-sd per request
    ttft_ms: float = 200.0
    output_tokens: float = 200.0
    output_sd: float = 0.6
    max_tokens: int = 1024
    error_rate: float = 0.01
    degenerate_rate: float = 0.01
    slo_tpot_ms: float = 50.0
    slo_e2e_ms: float = 10_000.0
    buckets: dict[str, float] = field(default_factory=lambda: {"chat": 0.7, "code": 0.8})
    gamma: int = 4
    acceptance_concentration: float = 20.0  # Beta(α·c, (1−α)·c) per request
    window_s: float = 60.0


def _arm(
    rng: np.random.Generator, n: int, load: float, t: Traffic, p: Planted, canary: bool
) -> ArmWindow:
    if n == 0:
        return ArmWindow(requests=0)
    f = p if canary else Planted()
    errors = rng.random(n) < min(t.error_rate + f.error_add, 1.0)
    ok = ~errors
    m = int(ok.sum())
    tpot = t.tpot_ms * load * f.tpot_factor * rng.lognormal(0.0, t.tpot_sd, m)
    raw_len = t.output_tokens * f.length_factor * rng.lognormal(0.0, t.output_sd, m)
    out = np.minimum(np.maximum(np.round(raw_len), 1), t.max_tokens)
    e2e = t.ttft_ms * load + tpot * out
    degenerate = rng.random(m) < min(t.degenerate_rate + f.degenerate_add, 1.0)
    acc: dict[str, Acceptance] = {}
    if canary and m:
        names = list(t.buckets)
        which = rng.integers(0, len(names), m)
        for i, b in enumerate(names):
            sel = which == i
            if not sel.any():
                continue
            alpha = f.acceptance.get(b, t.buckets[b])
            c = t.acceptance_concentration
            a_req = rng.beta(alpha * c, (1 - alpha) * c, int(sel.sum()))
            drafts = np.ceil(out[sel] / (1 + t.gamma * a_req))
            proposed = drafts * t.gamma
            accepted = rng.binomial(proposed.astype(int), a_req)
            acc[b] = Acceptance(
                accepted=float(accepted.sum()),
                proposed=float(proposed.sum()),
                drafts=float(drafts.sum()),
            )
    return ArmWindow(
        requests=n,
        errors=int(errors.sum()),
        tpot_ms=float(np.median(tpot)) if m else None,
        e2e_ms=float(np.median(e2e)) if m else None,
        tpot_over_slo=Tally(hits=int((tpot > t.slo_tpot_ms).sum()), n=m),
        e2e_over_slo=Tally(hits=int((e2e > t.slo_e2e_ms).sum()), n=m),
        output_tokens=float(np.median(out)) if m else None,
        finish_length=Tally(hits=int((out >= t.max_tokens).sum()), n=m),
        degenerate=Tally(hits=int(degenerate.sum()), n=m),
        acceptance=acc,
    )


def simulate_windows(
    seed: int, n_windows: int, traffic: Traffic | None = None, planted: Planted | None = None
) -> list[WindowPair]:
    """`n_windows` paired windows of a canary against its control, reproducible from `seed`."""
    t = traffic or Traffic()
    p = planted or Planted()
    rng = np.random.default_rng(seed)
    out = []
    for w in range(n_windows):
        load = float(rng.lognormal(0.0, t.load_sd))
        total = int(rng.poisson(t.requests_per_window))
        n_c = int(rng.binomial(total, t.canary_share))
        out.append(
            WindowPair(
                seq=w,
                start=w * t.window_s,
                end=(w + 1) * t.window_s,
                canary=_arm(rng, n_c, load, t, p, canary=True),
                control=_arm(rng, total - n_c, load, t, p, canary=False),
                source="simulation",
            )
        )
    return out
