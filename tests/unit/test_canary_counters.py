"""Engine metrics → one arm's window (harness/canary/counters.py, scrape.py): histogram means and
SLO shares at bucket edges, counter resets, selectors, and the note when only a step histogram
exists."""

from __future__ import annotations

import pytest

from specbench.config.canary import MetricNames
from specbench.errors import SpecbenchError
from specbench.harness.canary.counters import arm_window, parse_selector, resolve_names
from specbench.harness.canary.scrape import deltas, totals_from_text

VLLM = resolve_names("vllm", MetricNames())


def metrics(requests: int, tpot_sum: float, under_50ms: int, accepted: int) -> str:
    return f"""# TYPE vllm:request_success counter
vllm:request_success_total{{finished_reason="stop"}} {requests - 2}
vllm:request_success_total{{finished_reason="length"}} 2
# TYPE http_requests counter
http_requests_total{{status="2xx"}} {requests}
http_requests_total{{status="5xx"}} 3
# TYPE vllm:request_time_per_output_token_seconds histogram
vllm:request_time_per_output_token_seconds_bucket{{le="0.025"}} 1
vllm:request_time_per_output_token_seconds_bucket{{le="0.05"}} {under_50ms}
vllm:request_time_per_output_token_seconds_bucket{{le="+Inf"}} {requests}
vllm:request_time_per_output_token_seconds_sum {tpot_sum}
vllm:request_time_per_output_token_seconds_count {requests}
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total {accepted}
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total 1000
"""


def test_a_window_from_two_scrapes_reads_means_and_edge_shares() -> None:
    before = {"a": totals_from_text(metrics(100, 3.0, 90, 500), VLLM)}
    # between the scrapes: 100 more requests, 4.0 s more TPOT, 60 of them within 50 ms
    after = {"a": totals_from_text(metrics(200, 7.0, 150, 500), VLLM)}
    after["a"]["c"]["vllm:spec_decode_num_draft_tokens_total"] = 2000.0
    after["a"]["c"]["vllm:spec_decode_num_accepted_tokens_total"] = 1200.0
    w, notes = arm_window(deltas(after, before), VLLM, (50.0, None))
    assert w.center == "mean" and w.tpot_ms == pytest.approx(40.0)  # 4.0 s / 100 requests
    assert w.tpot_over_slo is not None
    assert (w.tpot_over_slo.hits, w.tpot_over_slo.n) == (40, 100)  # 100 − 60 within the edge
    assert w.requests == 100 and w.errors == 0  # the 5xx counter did not grow
    assert w.acceptance["all"].accepted == 700 and w.acceptance["all"].proposed == 1000
    assert notes == []


def test_a_counter_that_went_down_was_reset_and_counts_from_zero() -> None:
    before = {"a": totals_from_text(metrics(500, 20.0, 400, 900), VLLM)}
    after = {"a": totals_from_text(metrics(50, 2.0, 45, 100), VLLM)}  # the server restarted
    w, _ = arm_window(deltas(after, before), VLLM, (50.0, None))
    # the success counters went down: reset, so all 50 count; the 5xx counter reads 3 before and
    # after, which is indistinguishable from no growth (as for Prometheus's increase())
    assert w.requests == 50 and w.tpot_ms == pytest.approx(40.0)


def test_only_a_step_histogram_leaves_tpot_untested_and_says_why() -> None:
    text = metrics(100, 3.0, 90, 500).replace(
        "vllm:request_time_per_output_token_seconds", "vllm:inter_token_latency_seconds"
    )
    t0, t1 = totals_from_text(text, VLLM), totals_from_text(text, VLLM)
    w, notes = arm_window(deltas({"a": t1}, {"a": t0}), VLLM, (50.0, None))
    assert w.tpot_ms is None
    assert any("engine steps" in n for n in notes)


def test_selectors() -> None:
    s = parse_selector('http_requests_total{status="5xx", handler="/v1/chat"}')
    assert s.promql('job="c"') == 'http_requests_total{status="5xx", handler="/v1/chat", job="c"}'
    assert s.matches({"status": "5xx", "handler": "/v1/chat", "pod": "x"})
    assert not s.matches({"status": "2xx", "handler": "/v1/chat"})
    with pytest.raises(SpecbenchError):
        parse_selector("rate(x[5m])")


def test_logs_win_and_metrics_fill_what_the_rows_lack() -> None:
    from specbench.analysis.canary.windows import Acceptance, ArmWindow, Tally, merge_arm

    logs = ArmWindow(requests=40, errors=1, tpot_ms=31.0, e2e_ms=900.0, output_tokens=120.0)
    metrics = ArmWindow(
        requests=39,
        center="mean",
        tpot_ms=33.0,
        finish_length=Tally(hits=2, n=39),
        acceptance={"all": Acceptance(accepted=70, proposed=100)},
    )
    m = merge_arm(logs, metrics)
    assert (m.requests, m.errors, m.tpot_ms, m.center) == (40, 1, 31.0, "median")
    assert m.acceptance["all"].accepted == 70 and m.finish_length == Tally(hits=2, n=39)
    bare = merge_arm(ArmWindow(requests=40), metrics)  # rows without timings: the means
    assert (bare.tpot_ms, bare.center) == (33.0, "mean")


# SGLang's /metrics as its TokenizerMetricsCollector defines it (sglang 0.5.23, the PyPI wheel:
# sglang/srt/observability/metrics_collector.py): names, types, label names and default buckets,
# written by prometheus_client as SGLang's server writes them.
SGLANG = resolve_names("sglang", MetricNames())
SG_ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0]  # fmt: skip
SG_E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400]  # fmt: skip
SG_TOKEN_BUCKETS = [100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000]


def sglang_metrics(requests: list[tuple[bool, float, float, int]], per_request_tpot: bool) -> str:
    """(streaming, TPOT s, end-to-end s, output tokens) per finished request → /metrics text;
    `per_request_tpot` False: a server before 0.5.22, with only the per-token ITL histogram."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    reg = CollectorRegistry()
    base = ["model_name"]
    done = Counter("sglang:num_requests_total", "Number of requests processed.", [*base, "is_streaming"], registry=reg)  # fmt: skip
    e2e = Histogram("sglang:e2e_request_latency_seconds", "e2e", [*base, "is_streaming"], buckets=SG_E2E_BUCKETS, registry=reg)  # fmt: skip
    gen = Histogram("sglang:generation_tokens_histogram", "gen", base, buckets=SG_TOKEN_BUCKETS, registry=reg)  # fmt: skip
    itl = Histogram("sglang:inter_token_latency_seconds", "itl", base, buckets=SG_ITL_BUCKETS, registry=reg)  # fmt: skip
    tpot = Histogram("sglang:request_time_per_output_token_seconds", "tpot", [*base, "is_streaming"], buckets=SG_ITL_BUCKETS, registry=reg)  # fmt: skip
    Gauge("sglang:spec_accept_length", "gauge", base, registry=reg).labels("m").set(2.5)
    for stream, t, e, n in requests:
        s = "true" if stream else "false"
        done.labels("m", s).inc()
        e2e.labels("m", s).observe(e)
        gen.labels("m").observe(n)
        itl.labels("m").observe(t)
        if per_request_tpot:
            tpot.labels("m", s).observe(t)
    text = generate_latest(reg).decode()
    # a histogram without series is still declared in the text; an older server has none at all
    if not per_request_tpot:
        text = "\n".join(x for x in text.splitlines() if "request_time_per_output_token" not in x)
    return text


def test_sglang_builtin_names_read_an_sglang_server() -> None:
    first = [(True, 0.030, 3.0, 100), (False, 0.045, 4.0, 200)]
    later = [(True, 0.020, 2.0, 120), (False, 0.050, 5.0, 240), (True, 0.090, 9.0, 360)]
    before = {"a": totals_from_text(sglang_metrics(first, True), SGLANG)}
    after = {"a": totals_from_text(sglang_metrics(first + later, True), SGLANG)}
    w, notes = arm_window(deltas(after, before), SGLANG, (50.0, 6000.0))
    assert w.requests == 3 and w.errors == 0  # streaming and not, summed over is_streaming
    assert w.tpot_ms == pytest.approx(1000 * (0.020 + 0.050 + 0.090) / 3)
    assert w.e2e_ms == pytest.approx(1000 * (2.0 + 5.0 + 9.0) / 3)
    assert w.output_tokens == pytest.approx(240.0)
    # SGLang's buckets have no 50 ms edge: the share over the SLO is read at 60 ms (one of three)
    assert w.tpot_over_slo is not None and (w.tpot_over_slo.hits, w.tpot_over_slo.n) == (1, 3)
    assert w.e2e_over_slo is not None and (w.e2e_over_slo.hits, w.e2e_over_slo.n) == (1, 3)
    assert notes == ["tpot SLO 50 ms read at the histogram edge 60 ms"]
    assert w.acceptance == {}  # a gauge of the mean accept length is not a windowable count


def test_sglang_before_the_per_request_tpot_histogram_says_so() -> None:
    reqs = [(True, 0.030, 3.0, 100)]
    before = {"a": totals_from_text(sglang_metrics(reqs, False), SGLANG)}
    after = {"a": totals_from_text(sglang_metrics(reqs * 3, False), SGLANG)}
    w, notes = arm_window(deltas(after, before), SGLANG, (50.0, None))
    assert w.requests == 2 and w.tpot_ms is None and w.e2e_ms == pytest.approx(3000.0)
    assert any("no per-request TPOT histogram (sglang:request_time_per_output_token_seconds)" in n for n in notes)  # fmt: skip
