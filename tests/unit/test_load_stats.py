"""Open-loop arrivals, quantile intervals, SLO goodput and the buffered-stream rule (pure: no
processes, no model files)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from specbench.analysis.serving.buffering import buffered_cell, buffered_turn
from specbench.analysis.serving.load_cells import load_section
from specbench.analysis.stats.latency_tails import (
    Slo,
    goodput,
    quantile_ci,
    quantile_ranks,
)
from specbench.config import parse_config
from specbench.errors import SpecbenchError
from specbench.harness.serving.load.arrivals import poisson_arrivals, read_trace

# --- arrivals ---------------------------------------------------------------------------------


def test_poisson_arrivals_recover_the_rate() -> None:
    """The MLE (n − 1) / t_last of a Poisson process's rate has relative sd 1/√(n − 1) (its
    reciprocal is a Gamma mean); 4 sd bounds each seed's error, a miss having probability
    ≈ 6e-5 per seed (normal approximation), so 20 seeds fail together < 0.2 % of the time."""
    n, rate = 2001, 4.0
    tol = 4.0 / math.sqrt(n - 1)
    for seed in range(20):
        t = np.asarray(poisson_arrivals(n, rate, seed))
        assert t[0] == 0.0 and np.all(np.diff(t) > 0)
        est = (n - 1) / t[-1]
        assert abs(est / rate - 1.0) < tol, (seed, est)
        gaps = np.diff(t)  # exponential: coefficient of variation 1 (sd of its estimate ≈ 1/√n)
        assert abs(gaps.std() / gaps.mean() - 1.0) < 4.0 / math.sqrt(n - 1)
    assert poisson_arrivals(5, 2.0, 7) == poisson_arrivals(5, 2.0, 7)  # seeded
    assert poisson_arrivals(5, 2.0, 7) != poisson_arrivals(5, 2.0, 8)


def test_poisson_gaps_pass_a_ks_test_against_the_exponential() -> None:
    gaps = np.diff(poisson_arrivals(1001, 10.0, 3))
    assert sps.kstest(gaps, "expon", args=(0, 0.1)).pvalue > 0.001  # false alarm 0.1 %


def test_read_trace_offsets_and_bad_rows(tmp_path: Path) -> None:
    f = tmp_path / "trace.jsonl"
    rows = [
        {"timestamp": "2025-01-01T00:00:02Z"},
        {"timestamp": "2025-01-01T00:00:00Z"},
        {"timestamp": 1735689603.5},
    ]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert read_trace(str(f), None) == [0.0, 2.0, 3.5]
    assert read_trace("trace.jsonl", tmp_path, speed=2.0) == [0.0, 1.0, 1.75]
    f.write_text('{"arrival_s": 1}\n{"when": 2}\n')
    with pytest.raises(
        SpecbenchError, match="line 2: a trace row needs `arrival_s` or `timestamp`"
    ):
        read_trace(str(f), None)
    f.write_text('{"timestamp": "yesterday"}\n')
    with pytest.raises(SpecbenchError, match="neither epoch seconds nor ISO 8601"):
        read_trace(str(f), None)
    with pytest.raises(SpecbenchError, match="file not found"):
        read_trace(str(tmp_path / "none.jsonl"), None)


BASE = {
    "backend": "openai",
    "target": {"model": "x"},
    "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"load": {"rates": [0]}}, "load.rates must each be in"),
        ({"load": {"rates": [5000]}}, "load.rates must each be in"),
        ({"load": {"rates": list(range(1, 20))}}, "at most 16 rates"),
        ({"load": {"max_in_flight": 0}}, "max_in_flight"),
        ({"load": {"max_duration_s": 10**6}}, "max_duration_s"),
        ({"load": {"arrival": "uniform"}}, "only 'poisson'"),
        ({"slo": {"ttft_ms": -1}}, "ttft_ms"),
        (
            {"backend": "transformers", "draft": {"model": "y"}, "load": {"rates": [1]}},
            "engine backend",
        ),
        (
            {"backend": "transformers", "draft": {"model": "y"}, "load": {"requests": 10}},
            "engine backend",
        ),
    ],
)
def test_load_config_bounds(extra: dict[str, object], message: str) -> None:
    with pytest.raises(SpecbenchError, match=message):
        parse_config({**BASE, **extra}, "test")


# --- quantile intervals -----------------------------------------------------------------------


def test_quantile_ranks_match_the_textbook_table() -> None:
    assert quantile_ranks(100, 0.5, 0.95) == (40, 61)  # the classic median interval
    assert quantile_ranks(100, 0.99, 0.95)[1] is None  # no upper bound on p99 from 100 values
    assert quantile_ranks(400, 0.99, 0.95)[1] is not None


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
@pytest.mark.parametrize(("n", "p"), [(30, 0.5), (200, 0.9), (400, 0.99)])
def test_quantile_interval_covers_at_its_level(n: int, p: float) -> None:
    """Seeded simulation: lognormal latencies (true quantile known); the interval must cover at
    ≥ 95 % (it is exact-conservative). With 2000 trials the coverage estimate's sd is ≤ 0.0049,
    so the 3-sd floor 0.935 is missed by a correct method < 0.2 % of the time; a ceiling of
    0.995 catches an interval that is uselessly wide."""
    rng = np.random.default_rng(11)
    truth = math.exp(sps.norm.ppf(p))
    trials, hits = 2000, 0
    for _ in range(trials):
        _, lo, hi = quantile_ci(rng.lognormal(0.0, 1.0, n).tolist(), p, 0.95)
        assert lo is not None and hi is not None
        hits += lo <= truth <= hi
    coverage = hits / trials
    assert 0.935 <= coverage <= 0.995, coverage


def test_quantile_estimate_needs_enough_values() -> None:
    est, lo, hi = quantile_ci(list(range(1, 51)), 0.99)
    assert est is None and lo is not None and hi is None  # p99 of 50: no value, no upper end
    est, _, _ = quantile_ci(list(range(1, 101)), 0.99)
    assert est == pytest.approx(np.percentile(np.arange(1, 101), 99))


# --- SLO goodput ----------------------------------------------------------------------------------


def test_slo_is_met_only_when_every_objective_is() -> None:
    slo = Slo(ttft_ms=100, tpot_ms=10)
    assert slo.met(100, 10, 5000)  # ≤ each objective (vLLM's comparison)
    assert not slo.met(101, 5, 0)
    assert not slo.met(50, 10.5, 0)
    assert slo.met(50, None, 0)  # a one-token answer: TPOT 0
    assert not Slo(e2e_ms=200).met(1, 1, 201)


def test_goodput_arithmetic() -> None:
    good = [True] * 7 + [False] * 3
    tokens = [10] * 7 + [30] * 3
    rps, tps = 5.0, 120.0  # the cell: 10 requests in 2 s, 240 tokens
    g = goodput(good, tokens, rps, tps, 0.95, 500)
    assert g["good"] == 7 and g["n"] == 10
    assert g["requests_per_s"]["value"] == pytest.approx(0.7 * 5.0)  # = 7 good / 2 s
    lo, hi = sps.binomtest(7, 10).proportion_ci(0.95, "exact")
    assert g["requests_per_s"]["ci95"] == pytest.approx([lo * 5.0, hi * 5.0])
    assert g["output_tokens_per_s"]["value"] == pytest.approx(70 / 160 * 120.0)  # = 70 tok / 2 s
    t_lo, t_hi = g["output_tokens_per_s"]["ci95"]
    assert t_lo < 70 / 160 * 120.0 < t_hi


# --- buffered streams -------------------------------------------------------------------------


def test_buffered_turn_rule() -> None:
    assert buffered_turn(16, 1, None, 0)  # 16 tokens in one chunk: ≥ 16 steps without speculation
    assert buffered_turn(16, 16, 0.2, 0)  # every chunk within 0.2 ms: read at once
    assert not buffered_turn(16, 16, 45.0, 0)  # an honest stream, 3 ms per step
    assert not buffered_turn(5, 1, None, 4)  # γ=4 emits up to 5 tokens in one step
    assert buffered_turn(6, 1, None, 4)  # 6 tokens need two steps at γ=4
    assert not buffered_turn(1, 1, None, 0)
    n, meaningless = buffered_cell([{"buffered": True}, {"buffered": False}, {"buffered": False}])
    assert n == 1 and not meaningless  # one starved read does not flag the cell
    assert buffered_cell([{"buffered": True}, {"buffered": True}, {"buffered": False}])[1]


# --- cells and resume -------------------------------------------------------------------------


def _req(load: str, attempt: str | None, pid: str, ttft: float, queue: float = 0.0) -> dict:
    r = {
        "kind": "baseline",
        "status": "ok",
        "workload": "w",
        "temperature": 0.0,
        "gamma": 0,
        "drafter": "",
        "concurrency": 4,
        "prompt_id": pid,
        "ttft_ms": [ttft],
        "wall_ms": ttft + 50,
        "tpot_ms": 5.0,
        "new_tokens": 11,
        "buffered": False,
    }
    if load != "closed":
        r.update({"load": load, "attempt": attempt, "queue_ms": queue})
    return r


def _metrics(load: str, attempt: str | None, n: int) -> dict:
    m = {
        "kind": "engine_metrics",
        "workload": "w",
        "temperature": 0.0,
        "gamma": 0,
        "drafter": "",
        "concurrency": 4,
        "n_requests": n,
        "n_planned": n,
        "output_tokens": 11 * n,
        "batch_wall_ms": 1000.0,
    }
    if load != "closed":
        m.update({"load": load, "attempt": attempt, "offered_rate": 2.0, "not_sent": 0})
    return m


def test_cells_keep_only_the_completed_open_loop_attempt() -> None:
    killed = [_req("rate=2", "a1", f"p{i}", 1000.0) for i in range(3)]  # no metrics line
    done = [_req("rate=2", "a2", f"p{i}", 10.0, queue=5.0) for i in range(4)]
    closed = [_req("closed", None, f"p{i}", 20.0) for i in range(4)]
    recs = [*closed, _metrics("closed", None, 4), *killed, *done, _metrics("rate=2", "a2", 4)]
    cells, _ = load_section(recs, Slo(ttft_ms=16), 0.95, 200)
    by = {c.load: c for c in cells}
    assert set(by) == {"closed", "rate=2"}
    rate, closed_cell = by["rate=2"], by["closed"]
    assert rate.n == 4  # the killed attempt's three requests left out
    assert rate.ttft_ms.p50.value == pytest.approx(15.0)  # queue_ms counted
    assert rate.goodput is not None and rate.goodput.good == 4
    assert closed_cell.goodput is not None and closed_cell.goodput.good == 0  # 20 ms > 16 ms
    assert closed_cell.effective_concurrency == 4


def test_unreachable_concurrency_is_stated() -> None:
    recs = [_req("closed", None, f"p{i}", 5.0) for i in range(3)]
    m = {**_metrics("closed", None, 3), "concurrency": 16}
    for r in recs:
        r["concurrency"] = 16
    cells, notes = load_section([*recs, m], Slo(), 0.95, 200)
    assert cells[0].effective_concurrency == 3
    assert any("concurrency 16 cannot be reached with 3 prompts" in n for n in notes)


def _simulated_turn(
    rng: np.random.Generator, tokens: int, gamma: int, starved: bool
) -> tuple[int, float]:
    """(content chunks, first → last span ms) of one honest stream: one chunk per engine step of
    1..γ+1 tokens, steps lognormal around 3 ms (never below 0.6 ms); a starved client reads the
    whole response at once (every chunk within 0.05 ms)."""
    steps = []
    left = tokens
    while left > 0:
        k = min(int(rng.integers(1, gamma + 2)), left)
        steps.append(k)
        left -= k
    gaps = np.maximum(rng.lognormal(np.log(3.0), 0.5, len(steps) - 1), 0.6)
    span = float(rng.uniform(0, 0.05)) if starved else float(gaps.sum())
    return len(steps), span


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_buffered_cell_false_alarm_rate_by_simulation() -> None:
    """Honest streams whose client is starved on 5 % of requests (reads a whole response at
    once): each starved request is flagged, but a cell of 8 is flagged only when ≥ 4 are, with
    probability P(Binomial(8, 0.05) ≥ 4) = 3.7e-4; over 2000 seeded cells the count must stay
    within its Poisson 1e-3 quantile (≤ 5). Buffered cells (every response at once) are always
    flagged."""
    rng = np.random.default_rng(5)
    bound = sps.binom.sf(3, 8, 0.05)
    cells, flagged = 2000, 0
    for _ in range(cells):
        recs = []
        for _ in range(8):
            gamma = int(rng.integers(0, 5))
            tokens = int(rng.integers(2 * (gamma + 1), 64))
            starved = bool(rng.random() < 0.05)
            chunks, span = _simulated_turn(rng, tokens, gamma, starved)
            flag = buffered_turn(tokens, chunks, span, gamma)
            assert flag == starved  # ≥ 2 steps each: only the starved reads are flagged
            recs.append({"buffered": flag})
        flagged += buffered_cell(recs)[1]
    assert flagged <= sps.poisson.ppf(0.999, cells * bound)
    for _ in range(200):  # a buffering gateway: one chunk or all chunks within 0.05 ms
        gamma = int(rng.integers(0, 5))
        tokens = int(rng.integers(2 * (gamma + 1), 64))
        chunks, _ = _simulated_turn(rng, tokens, gamma, False)
        assert buffered_turn(tokens, chunks, float(rng.uniform(0, 0.05)), gamma)
        assert buffered_turn(tokens, 1, None, gamma)
