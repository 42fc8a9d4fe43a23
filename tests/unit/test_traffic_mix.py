"""The profile's traffic mix as a steady-state load draws it (config/traffic_mix.py,
docs/serving.md "The profile's mix"): token shares → request shares over each workload's mean
output budget, the defaults (the workloads' `weight`, equal temperature shares), the reserved
workload name `mix`, and the profile's load refused without a steady state."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.config import parse_config
from specbench.config.traffic_mix import request_shares, temperature_shares, token_shares
from specbench.errors import SpecbenchError

ENGINE: dict[str, Any] = {
    "backend": "openai",
    "target": {"model": "m"},
    "server": {"endpoints": [{"url": "http://127.0.0.1:9", "gamma": 0}]},
    "workloads": [
        {"name": "code", "dataset": {"name": "tiny_code"}, "weight": 3},
        {"name": "prose", "dataset": {"name": "tiny_prose"}, "weight": 1},
        {"name": "chat", "dataset": {"name": "tiny_prose"}, "weight": 0},
    ],
    "sampling": {"temperatures": [0.0, 0.7, 1.0]},
    "load": {"rates": [2.0], "duration_s": 10},
    "slo": {"ttft_ms": 500},
}


def test_request_shares_divide_token_shares_by_the_mean_budget() -> None:
    """0.75 / 0.25 of tokens with budgets 8 and 2: per request 0.75/8 = 0.09375 and
    0.25/2 = 0.125, so 3/7 and 4/7 of the requests; each request running to its budget then
    brings 3·8 : 4·2 = 24 : 8 tokens, the asked 0.75 : 0.25."""
    r = request_shares({"a": 0.75, "b": 0.25}, {"a": 8.0, "b": 2.0})
    assert r == pytest.approx({"a": 3 / 7, "b": 4 / 7})
    assert 8 * r["a"] / (8 * r["a"] + 2 * r["b"]) == pytest.approx(0.75)
    # equal budgets: request shares are the token shares
    assert request_shares({"a": 0.6, "b": 0.4}, {"a": 64.0, "b": 64.0}) == pytest.approx(
        {"a": 0.6, "b": 0.4}
    )


@pytest.mark.parametrize("budget", [0.0, -1.0, float("nan"), float("inf")])
def test_a_budget_that_is_not_positive_is_refused(budget: float) -> None:
    with pytest.raises(ValueError, match="budget"):
        request_shares({"a": 0.5, "b": 0.5}, {"a": 4.0, "b": budget})


def test_defaults_are_the_weights_and_equal_temperature_shares() -> None:
    cfg = parse_config({**ENGINE, "profile": {}})
    assert token_shares(cfg) == pytest.approx({"code": 0.75, "prose": 0.25})  # chat: weight 0
    assert temperature_shares(cfg) == pytest.approx({0.0: 1 / 3, 0.7: 1 / 3, 1.0: 1 / 3})


def test_the_profile_names_the_shares() -> None:
    cfg = parse_config(
        {
            **ENGINE,
            "profile": {
                "traffic": {"workloads": {"prose": 1, "chat": 1}, "temperatures": {1.0: 3, 0: 1}}
            },
        }
    )
    assert token_shares(cfg) == pytest.approx({"prose": 0.5, "chat": 0.5})  # config order
    assert list(token_shares(cfg)) == ["prose", "chat"]
    assert temperature_shares(cfg) == pytest.approx({1.0: 0.75, 0.0: 0.25})


def test_mix_is_a_reserved_workload_name() -> None:
    bad = {**ENGINE, "workloads": [{"name": "mix", "dataset": {"name": "tiny_code"}}]}
    with pytest.raises(SpecbenchError, match="'mix' is reserved") as err:
        parse_config(bad)
    assert "\n" not in str(err.value)


def test_the_profiles_rates_need_a_steady_state() -> None:
    assert parse_config({**ENGINE, "profile": {"load": {"rates": [2.0]}}}).profile is not None
    no_steady = {**ENGINE, "load": {"rates": [2.0]}}
    assert parse_config({**no_steady, "profile": {}}).profile is not None  # no load: fine
    with pytest.raises(SpecbenchError, match="needs a steady state") as err:
        parse_config({**no_steady, "profile": {"load": {"rates": [2.0]}}})
    assert "\n" not in str(err.value)
