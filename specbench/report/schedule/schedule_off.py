"""When the γ schedule is off at every measured concurrency, `specbench schedule --format
vllm|sglang|trtllm` still answers: the line that starts the engine WITHOUT speculation (on the
measured parallel layout), and a `# …` line on stderr saying which of the three outcomes of
docs/theory.md §8 it is (docs/schedule.md, "Off everywhere"). Off is an answer, not an error.

- OFF — shown not to pay: at every measured concurrency every γ's interval lies below
  1 + margin. Each cell's upper end is one end of its two-sided interval at the run's level, a
  one-sided bound at (1 + level)/2; "every cell is below" is an intersection of claims, false
  only if some cell's true ratio reaches 1 + margin, and that cell's bound misses it with
  probability ≤ (1 − level)/2 — so false OFF ≤ 2.5 % at level 0.95 with no multiplicity
  correction (an intersection–union test).
- UNDECIDED — not shown to pay: no simultaneous lower bound clears 1 + margin, yet some γ's
  interval reaches above it (or has no finite end); more prompts or engine starts at that
  concurrency would decide it.
- NOT MEASURED — the cells have no verdict (too few answers are real text, §13): not shown to
  pay, and the ratios are not a result; measure on traffic whose answers are real text.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from typing import Any, Literal

import yaml

from specbench.analysis.documents.results_model_engine import GammaSchedule
from specbench.report.schedule import schedule_export as ex
from specbench.report.schedule.parallel_layout import flags_text, sglang_layout, trtllm_layout

Outcome = Literal["OFF", "UNDECIDED", "NOT MEASURED"]


def _highest_upper(sched: GammaSchedule) -> tuple[int, int, float] | None:
    """(concurrency, γ, upper end) of the cell whose interval reaches highest; an interval with
    no finite upper end counts as +∞; None when no cell has an interval."""
    best: tuple[int, int, float] | None = None
    for row in sched.concurrencies:
        for g, est in row.throughput_ratio.items():
            if est is None:
                continue
            hi = est.ci95[1]
            up = math.inf if hi is None or not math.isfinite(float(hi)) else float(hi)
            if best is None or up > best[2]:
                best = (row.concurrency, int(g), up)
    return best


def off_outcome(sched: GammaSchedule, not_measured: bool) -> tuple[Outcome, str]:
    """Which outcome an off-everywhere schedule is (module docstring), and the `# …` line."""
    bar = 1.0 + float(sched.margin)
    levels = ", ".join(str(r.concurrency) for r in sched.concurrencies)
    if not_measured:
        return "NOT MEASURED", (
            "# serve without speculation — NOT MEASURED, so not shown to pay: the cells this "
            "schedule rests on have no verdict (too few answers are real text, docs/theory.md "
            "§13); measure prompts whose answers are real text to decide"
        )
    top = _highest_upper(sched)
    if top is not None and top[2] < bar:
        # the one-sided error of each interval end, the same figure as the schedule's false ON
        rate = sched.false_on_rate
        err = f"; false OFF ≤ {rate:.1%}" if rate is not None else ""
        return "OFF", (
            f"# serve without speculation — OFF, shown not to pay: at every measured concurrency "
            f"({levels}) every γ's interval lies below {bar:g} (highest upper end "
            f"{top[2]:.3g}, γ={top[1]} at concurrency {top[0]}{err})"
        )
    where = (
        "no γ has an interval"
        if top is None
        else f"γ={top[1]} at concurrency {top[0]} reaches "
        + ("an unbounded upper end" if math.isinf(top[2]) else f"{top[2]:.3g}")
    )
    return "UNDECIDED", (
        f"# serve without speculation — UNDECIDED, not shown to pay: no γ's simultaneous lower "
        f"bound clears {bar:g} at any measured concurrency ({levels}), but {where}; more "
        "prompts per workload or more engine starts (repeats with engine.interleave) there "
        "would decide it"
    )


def plain_vllm(target: str, engine_args: Mapping[str, Any] | None) -> str:
    """`vllm serve MODEL` on the measured parallel layout, without --speculative-config."""
    return ex.vllm_command(target, None, engine_args)


def plain_sglang(
    target: str, engine_args: Mapping[str, Any] | None = None, notes: list[str] | None = None
) -> str:
    """SGLang's launch line without speculation, on the measured layout (its notes: `notes`)."""
    layout = sglang_layout(engine_args)
    (notes if notes is not None else []).extend(layout.notes)
    return f"python -m sglang.launch_server --model-path {shlex.quote(target)}" + flags_text(
        layout.flags
    )


def plain_trtllm_yaml(
    engine_args: Mapping[str, Any] | None = None, notes: list[str] | None = None
) -> str:
    """The LLM API options file without speculative_config: the measured layout's keys only
    (`{}` on one GPU with CUDA graphs: nothing else was measured to set)."""
    layout = trtllm_layout(engine_args)
    (notes if notes is not None else []).extend(layout.notes)
    return yaml.safe_dump(layout.keys, sort_keys=False)
