"""A cell's figures over its verdict's prompts (analysis/pipeline/prompt_basis.py) leave open-loop
load points whole: their rates count every request the server served in the window."""

from __future__ import annotations

from specbench.analysis.pipeline.prompt_basis import records_without
from specbench.record_line import RecordLine


def _line(prompt: str, load: str) -> RecordLine:
    return {"kind": "baseline", "workload": "w", "temperature": 0.0, "prompt_id": prompt,
            "load": load}  # fmt: skip


def test_set_aside_prompts_leave_closed_loop_lines_only() -> None:
    recs = [_line("p1", "closed"), _line("p2", "closed"), _line("p1", "steady c=4"),
            _line("p2", "rate=2")]  # fmt: skip
    kept = records_without(recs, {("w", 0.0): {"p1"}})
    assert [(r["prompt_id"], r["load"]) for r in kept] == [
        ("p2", "closed"), ("p1", "steady c=4"), ("p2", "rate=2"),
    ]  # fmt: skip
