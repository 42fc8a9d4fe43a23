"""accept.json as `AcceptResults`: a document written and read back is the same document (NaN ↔ null, floats rounded once)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from specbench.analysis import rollout
from specbench.analysis.documents.accept_model import AcceptResults


@dataclass
class _Scored:
    positions: np.ndarray
    beta: np.ndarray
    agree: np.ndarray
    target_nll: np.ndarray


def _result() -> rollout.AcceptResult:
    """Six requests of 20 positions with β = 0.7 except one request (drift-free), plain numbers."""
    rng = np.random.default_rng(0)
    scored = [
        _Scored(
            np.arange(20),
            np.clip(rng.normal(0.7, 0.1, (1, 20)), 0, 1),
            rng.random(20) < 0.6,
            np.full(20, 2.0),
        )
        for _ in range(6)
    ]
    edges = rollout.position_edges(20, 8)
    tm = rollout.time_model_relative(0.1, 0.0, "default")
    acc = rollout.summarize_bucket("b", scored, ["T=1"], edges, n_boot=200)
    bucket = rollout.bucket_result(acc, tm, 4, 0.05, 0.02)
    meta = {
        "estimator": rollout.ESTIMATOR,
        "target": "t",
        "draft": "d",
        "device": "cpu",
        "dtype": "float32",
        "source": "x.jsonl",
        "bucket_by": None,
        "requests": 6,
        "positions": 120,
        "settings": [{"label": "T=1", "temperature": 1.0, "top_p": 1.0, "top_k": 0}],
        "max_context": None,
        "overflow": "truncate",
        "chat_template": "auto",
        "gamma_max": 4,
        "margin": 0.05,
        "ci_level": 0.95,
        "bootstrap": 200,
        "target_halfwidth": 0.02,
        "position_edges": edges,
    }
    return rollout.AcceptResult(meta, ["T=1"], [bucket], bucket, ["a warning"], [])


def test_document_round_trips_through_json() -> None:
    doc = rollout.accept_results(_result())
    written = json.dumps(doc.to_json(), allow_nan=False)
    back = AcceptResults.model_validate_json(written)
    assert back.to_json() == doc.to_json()
    assert doc.to_json()["schema"] == 1 and doc.to_json()["kind"] == "accept"
    assert list(doc.to_json())[:4] == ["schema", "kind", "estimator", "pair"]
    setting = back.overall.settings[0]
    assert setting.plan.verdict in ("on", "off") and len(setting.plan.gammas) == 4
    assert back.labels == ["T=1"]


def test_undefined_numbers_are_written_null_and_read_back_nan() -> None:
    doc = rollout.accept_results(_result())
    raw = doc.to_json()
    raw["overall"]["settings"][0]["alpha"]["ci95"] = [None, None]
    back = AcceptResults.model_validate(raw)
    lo, hi = back.overall.settings[0].alpha.ci95
    assert math.isnan(lo) and math.isnan(hi)
    assert back.to_json()["overall"]["settings"][0]["alpha"]["ci95"] == [None, None]
    value = doc.overall.settings[0].alpha.value
    assert raw["overall"]["settings"][0]["alpha"]["value"] == round(value, 6)
