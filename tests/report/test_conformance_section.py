"""The engine-conformance section: the models accept what `analysis.conformance` writes (a judged
comparison, an insufficient one, an unavailable reference) and the report renders each."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from specbench.analysis.conformance.decision import compare
from specbench.analysis.conformance.reference_check import check_against_reference
from specbench.analysis.documents.results_model_engine import (
    Conformance,
    ConformanceRow,
    GreedyOutputs,
)
from specbench.config.stored import StoredConfig
from specbench.harness.run.rundir import load_run
from specbench.report.render.blocks import to_markdown
from specbench.report.sections.serving_sections import conformance_blocks
from tests.unit.test_engine_metrics import _units


def _doc(status: str, rows: list[ConformanceRow], **kw: Any) -> Conformance:
    """The section as results.json holds it, written and read back (what the report renders)."""
    doc = {"reference_run": "ref", "family_wise_alpha": 0.05, "setting_differences": [],
           "status": status, **kw}  # fmt: skip
    doc["comparisons"] = [r.model_dump(mode="json", exclude_unset=True) for r in rows]
    return Conformance.model_validate(json.loads(json.dumps(doc)))


def test_a_shortfall_an_equal_and_an_insufficient_comparison_render() -> None:
    rng = np.random.default_rng(1)
    ref = _units([list(np.minimum(rng.geometric(0.3, 30) - 1, 4)) for _ in range(20)], 4)
    low = _units([list(np.minimum(rng.geometric(0.6, 30) - 1, 4)) for _ in range(20)], 4)
    rows = [
        compare(low, ref, 4, 300, 0.95, 0.05).row("w", 0.0, 4),
        compare(ref, ref, 4, 300, 0.95, 0.05).row("w", 1.0, 4),
        compare(ref, {}, 4, 100, 0.95, 0.05).row("v", 1.0, 2),
    ]
    rows[0].greedy_outputs = GreedyOutputs(n=20, identical=17)
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
    conf = check_against_reference([], config, load_run)
    assert conf is not None
    md = to_markdown(conformance_blocks(conf))
    assert conf.status == "unavailable"
    assert md.startswith("## Engine conformance\n\nNot checked against `/no/run`: ")
    assert conformance_blocks(None) == []
