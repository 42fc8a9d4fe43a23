"""The adaptive plan's progress rows (report/run/progress.py): the interval drawn against the
1 + margin line on a log axis, and the state text."""

from __future__ import annotations

import io

from rich.console import Console

from specbench.analysis.stats.sequential import CandidateBound, SequentialDecision
from specbench.record_line import UnitFinished
from specbench.report.run.progress import BAR_WIDTH, RichRunEvents, interval_bar, state_text


def test_interval_bar_places_the_line_and_the_interval_on_a_log_axis() -> None:
    above = interval_bar(1.3, 1.8, 1.05)
    below = interval_bar(0.7, 0.95, 1.05)
    assert len(above) == len(below) == BAR_WIDTH
    # the line sits left of an interval that clears it, right of one below it
    assert above.index("│") < above.index("━")
    assert below.rindex("━") < below.index("│")
    straddle = interval_bar(0.9, 1.3, 1.05)
    assert straddle.index("━") < straddle.index("│") < straddle.rindex("━")
    # ends beyond the axis are arrows, an infinite upper end included
    wide = interval_bar(0.1, float("inf"), 1.05)
    assert wide[0] == "◀" and wide[-1] == "▶"


def test_state_text_names_the_decision_and_what_is_left() -> None:
    b = CandidateBound("model fixed γ=4", 6, 1.4, 1.2, 1.6)
    assert "decided ON model fixed γ=4" in state_text(
        "on", SequentialDecision("on", b.label, [b], None)
    )
    assert "decided OFF" in state_text("off", SequentialDecision("off", None, [b], None))
    undecided = SequentialDecision("undecided", None, [b], 7)
    assert "needs about 7 more prompts" in state_text("budget spent", undecided)
    stuck = SequentialDecision("undecided", None, [b], 40, futile=True, remaining=3)
    assert "futile" in state_text("futile", stuck)
    assert "needs about 40 more prompts, the workload has 3 left" in state_text("futile", stuck)


def test_the_cell_table_is_drawn_with_the_progress() -> None:
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=False)
    b = CandidateBound("model fixed γ=2", 5, 1.5, 1.25, 1.8)
    with RichRunEvents(console) as ev:
        ev.cell_updated("tiny_code", 0.0, "measuring", None, 1.05)
        ev.cell_updated("tiny_prose", 1.0, "on", SequentialDecision("on", b.label, [b], None), 1.05)
    text = out.getvalue()
    assert "tiny_code" in text and "pilot" in text
    assert "1.50× [1.25, 1.80]" in text and "decided ON model fixed γ=2" in text


def test_a_failed_unit_is_named_and_counted_an_ok_one_only_advances() -> None:
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=False)
    ok = {"kind": "spec", "status": "ok", "workload": "tiny_code", "gamma": 2, "prompt_id": "p0"}
    failed = {**ok, "status": "failed", "gamma": 4, "prompt_id": "p1", "error": "CUDA OOM"}
    with RichRunEvents(console) as ev:
        ev.planned(2, 0)
        ev.unit_finished(UnitFinished.of(ok))
        ev.unit_finished(UnitFinished.of(failed))
    assert ev.failed == 1
    assert "failed tiny_code γ=4 p1: CUDA OOM" in out.getvalue()
    assert "p0:" not in out.getvalue()
    assert ev.progress.tasks[0].completed == 2
