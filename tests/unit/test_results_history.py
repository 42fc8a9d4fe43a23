"""A results.json of schema 2 (before "goodput" meant SLO goodput only) still reads: its renamed
keys are mapped to schema 3's names, only for a schema-2 document, and schema 1 is still refused.

results_schema_2_engine.json.gz is a real schema-2 document: the results.json that `specbench
report docs/example-engine-run` wrote at commit 0ab523c, before the rename (minified, gzipped).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis.documents.results_history import RENAMED_IN_3
from specbench.analysis.documents.results_model_batch import BatchPrediction, PredictionCheck
from specbench.analysis.documents.results_read import RESULTS_SCHEMA, check_results
from specbench.analysis.estimators.prediction_check import check_prediction
from specbench.errors import SpecbenchError

OLD = Path(__file__).with_name("results_schema_2_engine.json.gz")


def _old() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(OLD.read_bytes()))
    return doc


def test_the_fixture_is_schema_2_with_the_old_keys() -> None:
    doc = _old()
    sched = doc["workloads"][0]["engine"]["schedule"]
    assert doc["schema"] == 2 == RESULTS_SCHEMA - 1
    assert "goodput" in sched and "goodput_ratio" in sched["concurrencies"][0]


def test_a_schema_2_results_json_reads_with_its_renamed_keys_mapped(tmp_path: Path) -> None:
    doc = _old()
    typed = check_results(doc, tmp_path / "results.json")
    assert typed.schema_ == RESULTS_SCHEMA
    n_rows = 0
    for raw, entry in zip(doc["workloads"], typed.workloads, strict=True):
        old, new = raw["engine"]["schedule"], entry.engine.schedule  # type: ignore[union-attr]
        assert new is not None and new.throughput == old["goodput"]
        for r_old, r_new in zip(old["concurrencies"], new.concurrencies, strict=True):
            ratios = {
                g: e.model_dump(mode="json") if e else None
                for g, e in r_new.throughput_ratio.items()
            }
            assert ratios == r_old["goodput_ratio"] and ratios  # every γ's value and interval
            assert r_new.throughput_tok_s == r_old["goodput_tok_s"]
            assert r_new.predicted_throughput_tok_s == r_old["predicted_goodput_tok_s"]
            n_rows += 1
        # SLO goodput kept its name: the load cells' goodput is read as written
        cells = [c for c in entry.engine.load if c.goodput is not None]  # type: ignore[union-attr]
        assert cells and cells[0].goodput.good == raw["engine"]["load"][0]["goodput"]["good"]  # type: ignore[union-attr]
    assert n_rows == 6  # 2 workloads × concurrency {1, 3, 6}


def test_the_old_keys_are_refused_in_a_schema_3_document(tmp_path: Path) -> None:
    """Mapped for schema 2 only: a document that says 3 but carries a schema-2 key is invalid."""
    doc = {**_old(), "schema": RESULTS_SCHEMA}
    with pytest.raises(SpecbenchError, match="goodput"):
        check_results(doc, tmp_path / "results.json")


def test_schema_1_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecbenchError, match=r"older than this specbench reads .*regenerate"):
        check_results({**_old(), "schema": 1}, tmp_path / "results.json")


# --- the batch-size prediction's keys (transformers runs with batch_timing; §18) ---------------

_EST = {"value": 120.0, "ci95": [100.0, 140.0]}
_OLD_CELL = {
    "batch_size": 4,
    "gamma": 2,
    "draft_ms": 1.0,
    "verify_ms": 9.0,
    "step_ms": 10.0,
    "tokens_per_step": {"value": 2.5, "ci95": [2.0, 3.0]},
    "goodput_tokens_per_s": _EST,
    "speedup_vs_off": {"value": 1.5, "ci95": [1.2, 1.8]},
}
_OLD_PREDICTION = {
    "kind": "prediction",
    "basis": "hand-made",
    "entries": [
        {
            "workload": "w",
            "temperature": 0.0,
            "gamma_max": 2,
            "context_len": 64,
            "repeats": 1,
            "prompts": 4,
            "cells": [_OLD_CELL],
            "best_gamma": {"4": 2},
        }
    ],
}


def test_schema_2_prediction_keys_map_and_nothing_else_does() -> None:
    new = BatchPrediction.model_validate(_OLD_PREDICTION, context={"schema": 2})
    assert new.entries[0].cells[0].throughput_tokens_per_s.value == 120.0
    with pytest.raises(ValueError, match="goodput_tokens_per_s"):
        BatchPrediction.model_validate(_OLD_PREDICTION)  # no context: the current schema
    old_check = {
        "reference_run": "r",
        "cells": [
            {
                "workload": "w",
                "temperature": 0.0,
                "concurrency": 4,
                "gamma": 2,
                "measured_goodput": 100.0,
                "predicted_goodput": 120.0,
                "goodput_error": 0.2,
                "measured_speedup": 1.4,
                "predicted_speedup": 1.5,
                "speedup_error": 0.07,
            }
        ],
        "median_abs_speedup_error": 0.07,
        "median_abs_goodput_error": 0.2,
        "note": "n",
    }
    check = PredictionCheck.model_validate(old_check, context={"schema": 2})
    cell = check.cells[0]
    assert (cell.measured_throughput, cell.predicted_throughput, cell.throughput_error) == (
        100.0,
        120.0,
        0.2,
    )
    assert check.median_abs_throughput_error == 0.2
    renamed = {k for keys in RENAMED_IN_3.values() for k in keys}
    assert "goodput_tokens_per_s" in renamed and "goodput_requests_per_s" not in renamed


def test_predict_check_reads_a_schema_2_reference() -> None:
    """`predict-check` reads the reference run's results.json as written: a schema-2 one's
    `goodput_tokens_per_s` is its predicted throughput (here 120 against 100 measured)."""
    engine = {
        "workloads": [
            {
                "workload": "w",
                "temperature": 0.0,
                "engine": {
                    "concurrency": [
                        {
                            "concurrency": 4,
                            "baseline": {"output_tokens_per_s": 80.0},
                            "gammas": {
                                "2": {"output_tokens_per_s": 100.0, "throughput_ratio": 1.25}
                            },
                        }
                    ]
                },
            }
        ]
    }
    reference = {"schema": 2, "batch_prediction": _OLD_PREDICTION}
    check = check_prediction(engine, reference, "ref")
    assert check is not None
    (cell,) = check.cells
    assert cell.predicted_throughput == 120.0 and cell.throughput_error == pytest.approx(0.2)
