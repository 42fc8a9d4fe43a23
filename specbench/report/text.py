"""Sentences shared by the console summary and the documents (one wording per statement)."""

from __future__ import annotations

from typing import Any


def _x(v: float | None) -> str:
    return f"{v:.2f}×" if isinstance(v, int | float) else "–"


def pool_sentence(g: dict[str, Any]) -> str:
    """The pool-wide recommendation of one temperature (results.json `global.by_temperature`)."""
    head = f"T={g['temperature']:g}, one setting for all traffic: "
    if g["verdict"] == "on":
        sp = g.get("speedup") or {}
        lo, hi = (sp.get("ci95") or [None, None])[:2]
        head += (
            f"γ={g['gamma']} ({g.get('drafter')}, {g.get('policy')}), {_x(sp.get('value'))} "
            f"[{_x(lo)}, {_x(hi)}] of total decode time"
        )
    elif g["verdict"] == "not_measured":
        head += f"not measured ({g['reason']})"
    else:
        head += f"off ({g['reason']})"
    return (
        f"{head}; routing each workload to its own setting would give "
        f"{_x(g.get('per_workload_routing_speedup'))}. ON: {', '.join(g['on_for']) or 'none'}; "
        f"OFF: {', '.join(g['off_for']) or 'none'}"
        + (f"; not measured: {', '.join(g['not_measured'])}" if g.get("not_measured") else "")
        + "."
    )


def decision_rule(run: dict[str, Any]) -> str:
    level = run.get("ci_level", 0.95)
    return (
        f"Speculation is ON for a workload only if the simultaneous {level:.0%} lower confidence "
        f"bound of its best setting's speedup exceeds 1 + {run.get('margin')} — simultaneous over "
        "every measured drafter × policy × γ, so picking the best does not inflate the error: the "
        f"false-ON rate is at most {(1 - level) / 2:.1%} when no setting truly clears the margin. "
        "Speedup = pooled decode tokens/s of speculation ÷ the baseline's on the same prompts; "
        "intervals are studentized bootstrap over prompts (docs/theory.md §7–8)."
    )
