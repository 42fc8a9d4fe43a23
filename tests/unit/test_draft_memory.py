"""The draft's memory line: hand-computed KV bytes and the capacity the draft takes (model
profiles, and the KV capacity engines report)."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.analysis.documents.results_model import (
    DraftMemory,
    KvCapacity,
    KvCapacityAtGamma,
    RunEnv,
)
from specbench.analysis.serving.serving_cost import draft_memory, kv_capacity_taken


def memory_of(env: dict[str, Any]) -> dict[str, DraftMemory] | None:
    """The draft memory of an env.json as the run directory holds it."""
    return draft_memory(RunEnv.model_validate(env))


def kv_of(env: dict[str, Any]) -> KvCapacity | None:
    return kv_capacity_taken(RunEnv.model_validate(env))


def test_draft_memory_from_model_profiles() -> None:
    # target: 10 layers × 5 KV heads × 32 dims × 2 (K and V) × 4 bytes = 12 800 B per token
    env = {
        "memory": {
            "target": {"weight_bytes": 16_000_000, "kv_bytes_per_token": 12_800},
            "drafts": {"model": {"weight_bytes": 2_000_000, "kv_bytes_per_token": 768}},
        }
    }
    m = memory_of(env)
    assert m is not None
    d = m["model"]
    assert d.weights_mib == pytest.approx(2_000_000 / 2**20, abs=1e-6)
    assert d.weights_share_of_target == pytest.approx(0.125)
    assert d.target_kv_tokens_displaced == 2_000_000 // 12_800 == 156
    assert d.kv_share_per_sequence == pytest.approx(768 / (12_800 + 768), abs=1e-6)
    assert d.kv_kib_per_token == pytest.approx(0.75)


def test_no_profiles_no_memory_line() -> None:
    assert memory_of({}) is None
    assert memory_of({"memory": {"target": {"weight_bytes": 1}, "drafts": {}}}) is None


def test_computed_profile_without_weights_keeps_the_kv_figures() -> None:
    # config.json on this machine but no weights: KV per token only, marked as computed
    env = {
        "memory": {
            "target": {"weight_bytes": None, "kv_bytes_per_token": 12_800},
            "drafts": {
                "d": {"weight_bytes": None, "kv_bytes_per_token": 768, "source": "computed"}
            },
        }
    }
    m = memory_of(env)
    assert m is not None
    d = m["d"]
    assert d.weights_mib is None and d.target_kv_tokens_displaced is None
    assert d.kv_share_per_sequence == pytest.approx(768 / 13_568, abs=1e-6)
    assert d.source == "computed"


def test_kv_capacity_taken_from_engine_reports() -> None:
    caps = [
        {"gamma": 4, "label": "draft_model", "tokens": 144_000},
        {"gamma": 0, "label": "", "tokens": 160_000},
        {"gamma": 2, "label": "draft_model", "tokens": 150_400},
    ]
    kv = kv_of({"memory": {"kv_capacity": caps}})
    assert kv is not None and kv.source == "engine" and kv.baseline_tokens == 160_000
    assert list(kv.by_gamma) == ["2", "4"]
    assert kv.by_gamma["2"].taken_tokens == 9_600
    assert kv.by_gamma["2"].taken_share == pytest.approx(0.06)
    assert kv.by_gamma["4"].taken_share == pytest.approx(0.1)
    # no engine without speculation reported: capacities only
    only_spec = kv_of({"memory": {"kv_capacity": caps[:1]}})
    assert only_spec is not None and only_spec.baseline_tokens is None
    assert only_spec.by_gamma["4"] == KvCapacityAtGamma(
        label="draft_model", tokens=144_000, taken_tokens=None, taken_share=None
    )
    assert kv_of({"memory": {"source": "computed", "kv_capacity": None}}) is None
    assert kv_of({}) is None
