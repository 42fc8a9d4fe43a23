"""results.json as pydantic models: every document build_results builds reads back as written
(transformers and engine runs), the shipped JSON Schema is the models' own, and the schema
accepts the files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from specbench.analysis.documents.results_model import RunEnv, RunResults
from specbench.analysis.documents.schemas import SCHEMA_DIR
from specbench.analysis.pipeline.results import build_results
from specbench.config.stored import StoredConfig
from specbench.harness.run.rundir import load_run
from tests.unit.test_engine_metrics import synthetic_engine_run

ROOT = Path(__file__).resolve().parents[2]


def _round_trip(results: RunResults) -> dict[str, Any]:
    """The document as results.json holds it (what `harness.rundir.write_results` writes, read back)."""
    doc: dict[str, Any] = json.loads(results.json_text())
    return doc


@pytest.fixture(scope="module")
def engine_results() -> RunResults:
    config = {
        "backend": "vllm",
        "name": "eng",
        "target": {"model": "t"},
        "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
        "concurrency": [1, 8],
        "gammas": [3],
        "decision": {"bootstrap": 300},
    }
    return build_results(synthetic_engine_run(), StoredConfig.model_validate(config), RunEnv())


@pytest.fixture(scope="module")
def example_results() -> RunResults:
    records, config, env, _ = load_run(ROOT / "docs" / "example-run")
    return build_results(records, config, RunEnv.model_validate(env))


def _validates(results: RunResults) -> RunResults:
    model = RunResults.model_validate(_round_trip(results))
    # nothing dropped or renamed: the model read back holds exactly the document's keys and values
    back = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert back == _round_trip(results)
    return model


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_the_example_run_validates_in_memory_and_read_back(example_results: RunResults) -> None:
    model = _validates(example_results)
    # the model the pipeline built (int keys, tuples) is the one read back from its file
    assert example_results == model
    assert model.workloads[0].engine is None and model.workloads[0].methods
    assert model.global_.by_temperature


def test_a_synthetic_engine_run_validates(engine_results: RunResults) -> None:
    model = _validates(engine_results)
    assert RunResults.model_validate_json(engine_results.json_text()) == model == engine_results
    e = model.workloads[0]
    assert e.engine is not None and e.engine.per_gamma["3"].gamma == 3
    assert e.timing.engine_round_fit is not None and e.methods is None


def test_an_unknown_or_missing_key_fails(example_results: RunResults) -> None:
    doc = _round_trip(example_results)
    doc["workloads"][0]["recommendation"]["verdikt"] = "on"
    with pytest.raises(ValidationError, match="verdikt"):
        RunResults.model_validate(doc)
    doc = _round_trip(example_results)
    del doc["workloads"][0]["recommendation"]["verdict"]
    with pytest.raises(ValidationError, match="verdict"):
        RunResults.model_validate(doc)


def test_the_schema_accepts_the_documents(
    example_results: RunResults, engine_results: RunResults
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SCHEMA_DIR / "results.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for doc in (_round_trip(example_results), _round_trip(engine_results)):
        errors = [e.message for e in validator.iter_errors(doc)]
        assert not errors, errors[:3]
    broken = _round_trip(engine_results)
    broken["workloads"][0]["engine"]["stops_paying"]["3"]["never_pays"] = "no"
    assert not validator.is_valid(broken)
