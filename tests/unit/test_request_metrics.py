"""Per-request acceptance read from a response (harness/serving/metrics/request_metrics.py) and the
openai backend's new config keys (headers, max_retry_after_s, max_requests)."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.analysis.serving.spec_counters import SpecCounters, estimates
from specbench.config import parse_config
from specbench.errors import SpecbenchError
from specbench.harness.serving.metrics.request_metrics import (
    per_pos_from_histogram,
    response_spec,
    summed,
)

# what vLLM 0.32 sent for a 5-token request at γ = 4 (tiny pair), on the final usage chunk
VLLM_FINAL_CHUNK = {
    "choices": [],
    "usage": {"prompt_tokens": 7, "completion_tokens": 5},
    "metrics": {
        "speculative_decoding": {
            "mean_acceptance_length": 1.0,
            "draft_acceptance_rate": 0.0,
            "acceptance_histogram": [4, 0, 0, 0, 0],
            "num_spec_steps": 4,
            "num_accepted_draft_tokens": 0,
            "num_draft_tokens": 16,
            "num_spec_tokens": 4,
        }
    },
}


def vllm_chunk(hist: list[int]) -> dict[str, Any]:
    steps, acc = sum(hist), sum(j * c for j, c in enumerate(hist))
    gamma = len(hist) - 1
    spec = {
        "acceptance_histogram": hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": acc,
        "num_draft_tokens": gamma * steps,
        "num_spec_tokens": gamma,
        "per_step_accepted": None,
    }
    return {"choices": [], "metrics": {"time_to_first_token_ms": 3.0, "speculative_decoding": spec}}


def test_vllm_real_chunk() -> None:
    got = response_spec(VLLM_FINAL_CHUNK, 5, 4)
    assert got == SpecCounters(4.0, 16.0, 0.0, (0.0, 0.0, 0.0, 0.0), "vllm_response")


def test_histogram_to_per_position_by_hand() -> None:
    # steps accepting exactly 0, 1, 2, 3 drafts: 2, 1, 0, 3 → first 1 accepted in 4 steps, first
    # 2 in 3, first 3 in 3; accepted = 1 + 0 + 9 = 10
    assert per_pos_from_histogram([2, 1, 0, 3]) == (4.0, 3.0, 3.0)
    got = response_spec(vllm_chunk([2, 1, 0, 3]), None, 3)
    assert got is not None and (got.drafts, got.accepted, got.draft_tokens) == (6.0, 10.0, 18.0)
    # and back: the counters' estimators recover the histogram and the conditional curve
    est = estimates(got, 3)
    assert est.histogram == [2, 1, 0, 3]
    assert est.per_position == [pytest.approx(4 / 6), pytest.approx(3 / 4), pytest.approx(1.0)]
    assert est.mean_accepted_length == pytest.approx(1 + 10 / 6)


def test_sglang_meta_info() -> None:
    full = {"spec_verify_ct": 5, "spec_accept_token_num": 7, "spec_draft_token_num": 15}
    chunk = {"choices": [{"index": 0, "meta_info": full}]}
    assert response_spec(chunk, 12, 3) == SpecCounters(5.0, 15.0, 7.0, (), "sglang_response")
    # only the verify count: accepted = completion tokens − steps, drafted = steps × γ
    short = {"meta_info": {"spec_verify_ct": 4, "spec_accept_length": 2.5}}
    assert response_spec(short, 10, 3) == SpecCounters(4.0, 12.0, 6.0, (), "sglang_response")
    assert response_spec(short, None, 3) is None  # nothing to derive accepted from


@pytest.mark.parametrize(
    "chunk",
    [
        {"choices": [], "usage": {"completion_tokens": 3}},  # no metrics: None
        {"metrics": {"speculative_decoding": None}},  # vLLM without speculation
        {"metrics": {"speculative_decoding": {"num_spec_steps": "many"}}},  # malformed: ignored
        {"metrics": {"speculative_decoding": {"num_spec_steps": -1, "num_draft_tokens": 0,
                                              "num_accepted_draft_tokens": 0}}},
        {"meta_info": {"spec_verify_ct": 0}},
    ],
)  # fmt: skip
def test_no_or_malformed_metrics_give_none(chunk: dict[str, Any]) -> None:
    assert response_spec(chunk, 3, 2) is None


def test_turns_sum_only_when_every_turn_reported() -> None:
    a = SpecCounters(2.0, 4.0, 3.0, (2.0, 1.0), "vllm_response")
    b = SpecCounters(1.0, 2.0, 0.0, (0.0, 0.0), "vllm_response")
    assert summed([a, b]) == SpecCounters(3.0, 6.0, 3.0, (2.0, 1.0), "vllm_response")
    assert summed([a, None]) is None and summed([]) is None


def server_cfg(**server: Any) -> dict[str, Any]:
    return {
        "backend": "openai",
        "target": {"model": "m"},
        "server": {"url": "http://h", **server},
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}}],
    }


@pytest.mark.parametrize(
    ("server", "needle"),
    [
        ({"headers": {"X-Key": "Bearer abc123"}}, "give the name of an environment variable"),
        ({"headers": {"Bad Header": "ENV"}}, "is not an HTTP header name"),
        ({"headers": {f"H{i}": "E" for i in range(33)}}, "at most 32 headers"),
        ({"endpoints": [{"url": "http://h", "headers": {"X": "a-b"}}]}, "environment variable"),
        ({"max_retry_after_s": 7200}, "max_retry_after_s"),
        ({"max_requests": 0}, "max_requests"),
    ],
)
def test_bad_server_keys_are_one_clear_error(server: dict[str, Any], needle: str) -> None:
    with pytest.raises(SpecbenchError) as exc:
        parse_config(server_cfg(**server), "c.yaml")
    assert needle in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


def test_good_server_keys() -> None:
    cfg = parse_config(
        server_cfg(
            headers={"X-Tenant": "TENANT_TOKEN"},
            endpoints=[{"url": "http://h", "gamma": 2, "metrics_url": "http://r/metrics"}],
            max_requests=100,
        ),
        "c.yaml",
    )
    assert cfg.server.headers == {"X-Tenant": "TENANT_TOKEN"} and cfg.server.max_requests == 100
    assert cfg.server.endpoints[0].metrics_url == "http://r/metrics"
