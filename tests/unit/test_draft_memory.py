"""The draft's memory line: hand-computed KV bytes and the capacity the draft takes."""

from __future__ import annotations

import pytest

from specbench.analysis.serving_cost import draft_memory


def test_draft_memory_from_model_profiles() -> None:
    # target: 10 layers × 5 KV heads × 32 dims × 2 (K and V) × 4 bytes = 12 800 B per token
    env = {
        "memory": {
            "target": {"weight_bytes": 16_000_000, "kv_bytes_per_token": 12_800},
            "drafts": {"model": {"weight_bytes": 2_000_000, "kv_bytes_per_token": 768}},
        }
    }
    m = draft_memory(env)
    assert m is not None
    d = m["model"]
    assert d["weights_mib"] == pytest.approx(2_000_000 / 2**20, abs=1e-6)
    assert d["weights_share_of_target"] == pytest.approx(0.125)
    assert d["target_kv_tokens_displaced"] == 2_000_000 // 12_800 == 156
    assert d["kv_share_per_sequence"] == pytest.approx(768 / (12_800 + 768), abs=1e-6)
    assert d["kv_kib_per_token"] == pytest.approx(0.75)


def test_no_profiles_no_memory_line() -> None:
    assert draft_memory({}) is None
    assert draft_memory({"memory": {"target": {"weight_bytes": 1}, "drafts": {}}}) is None
