"""The engine-conformance section: the models accept what `analysis.conformance` writes (a judged
comparison, an insufficient one, an unavailable reference) and the report renders each."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from specbench.analysis.conformance.decision import compare
from specbench.analysis.conformance.reference_check import check_against_reference
from specbench.analysis.documents.results_model_engine import Conformance
from specbench.config.stored import StoredConfig
from specbench.harness.run.rundir import load_run
from specbench.report.render.blocks import to_markdown
from specbench.report.sections.serving_sections import conformance_blocks
from tests.unit.test_engine_metrics import _units


def _doc(status: str, rows: list[dict[str, Any]], **kw: Any) -> Conformance:
    doc = {"reference_run": "ref", "comparisons": rows, "family_wise_alpha": 0.05,
           "setting_differences": [], "status": status, **kw}  # fmt: skip
    return Conformance.model_validate(json.loads(json.dumps(doc)))


def test_a_shortfall_an_equal_and_an_insufficient_comparison_render() -> None:
    rng = np.random.default_rng(1)
    ref = _units([list(np.minimum(rng.geometric(0.3, 30) - 1, 4)) for _ in range(20)], 4)
    low = _units([list(np.minimum(rng.geometric(0.6, 30) - 1, 4)) for _ in range(20)], 4)
    rows = [
        {"workload": "w", "temperature": 0.0, "gamma": 4, **compare(low, ref, 4, 300, 0.95, 0.05),
         "greedy_outputs": {"n": 20, "identical": 17}},
        {"workload": "w", "temperature": 1.0, "gamma": 4, **compare(ref, ref, 4, 300, 0.95, 0.05)},
        {"workload": "v", "temperature": 1.0, "gamma": 2, **compare(ref, {}, 4, 100, 0.95, 0.05)},
    ]  # fmt: skip
    conf = _doc("shortfall", rows, causes=["a cause"], setting_differences=["dtype a vs b"])
    md = to_markdown(conformance_blocks(conf))
    assert "**SHORTFALL**: the engine accepts significantly less" in md
    assert "adjusted p ≤ 0.05" in md
    lines = [x for x in md.splitlines() if x.startswith("| w ") or x.startswith("| v ")]
    assert lines[0].endswith("| 17/20 | SHORTFALL |") and "i=4: " in lines[0]
    assert lines[1].endswith("| – | OK |")
    assert lines[2] == "| v | 1 | 2 | 0 | – | – | – | – | – | INSUFFICIENT |"
    assert "- setting differs: dtype a vs b" in md and "- a cause" in md


def test_an_unavailable_reference_is_one_sentence() -> None:
    config = StoredConfig.model_validate({"conformance": {"reference_run": "/no/run"}})
    doc = check_against_reference([], config, load_run)
    conf = Conformance.model_validate(doc)
    md = to_markdown(conformance_blocks(conf))
    assert conf.status == "unavailable"
    assert md.startswith("## Engine conformance\n\nNot checked against `/no/run`: ")
    assert conformance_blocks(None) == []
