"""results.json as pydantic models: every document build_results writes validates (transformers
and engine runs), the shipped JSON Schema is the models' own, and the schema accepts the files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.schemas import SCHEMA_DIR
from specbench.analysis.pipeline.results import build_results
from specbench.config.stored import StoredConfig
from specbench.harness.run.rundir import load_run
from tests.unit.test_engine_metrics import synthetic_engine_run

ROOT = Path(__file__).resolve().parents[2]


def _round_trip(results: dict[str, Any]) -> dict[str, Any]:
    """The document as results.json holds it (what `harness.rundir.write_results` writes, read back)."""
    return json.loads(json.dumps(results, allow_nan=False, default=_section))


def _section(model: BaseModel) -> dict[str, Any]:
    """A section the pipeline built as its model (typed.md's in-between state), as JSON."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


@pytest.fixture(scope="module")
def engine_results() -> dict[str, Any]:
    config = {
        "backend": "vllm",
        "name": "eng",
        "target": {"model": "t"},
        "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
        "concurrency": [1, 8],
        "gammas": [3],
        "decision": {"bootstrap": 300},
    }
    return build_results(synthetic_engine_run(), StoredConfig.model_validate(config), {})


@pytest.fixture(scope="module")
def example_results() -> dict[str, Any]:
    records, config, env, _ = load_run(ROOT / "docs" / "example-run")
    return build_results(records, config, env)


def _validates(results: dict[str, Any]) -> RunResults:
    model = RunResults.model_validate(_round_trip(results))
    # nothing dropped or renamed: the model holds exactly the document's keys and values
    back = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert back == _round_trip(results)
    return model


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_the_example_run_validates_in_memory_and_read_back(example_results: dict[str, Any]) -> None:
    model = _validates(example_results)
    # the in-memory dict (int keys, tuples) too: what `harness.rundir.write_results` returns
    assert RunResults.model_validate(example_results) == model
    assert model.workloads[0].engine is None and model.workloads[0].methods
    assert model.global_.by_temperature


def test_a_synthetic_engine_run_validates(engine_results: dict[str, Any]) -> None:
    model = _validates(engine_results)
    assert RunResults.model_validate_json(json.dumps(engine_results, default=_section)) == model
    e = model.workloads[0]
    assert e.engine is not None and e.engine.per_gamma["3"].gamma == 3
    assert e.timing.engine_round_fit is not None and e.methods is None


def test_an_unknown_or_missing_key_fails(example_results: dict[str, Any]) -> None:
    doc = _round_trip(example_results)
    doc["workloads"][0]["recommendation"]["verdikt"] = "on"
    with pytest.raises(ValidationError, match="verdikt"):
        RunResults.model_validate(doc)
    doc = _round_trip(example_results)
    del doc["workloads"][0]["recommendation"]["verdict"]
    with pytest.raises(ValidationError, match="verdict"):
        RunResults.model_validate(doc)


def test_the_schema_accepts_the_documents(
    example_results: dict[str, Any], engine_results: dict[str, Any]
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
