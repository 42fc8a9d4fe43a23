"""The first screen's first box for a run with a deployment profile: the one configuration for a
server at the profile's mix, load and SLO (results.json `profile_decision`, docs/theory.md §22),
with the line to paste."""

from __future__ import annotations

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_profile import ProfileCandidate, ProfileDecision
from specbench.report.render.blocks import Box
from specbench.report.schedule.profile_export import operating_point
from specbench.report.sections.paste import plain_paste_line, setting_paste_line
from specbench.report.sections.text import num_text


def _gain(c: ProfileCandidate) -> str:
    lo, hi = c.gain.ci95
    return (
        f"{num_text(c.gain.value, '{:.2f}×')} [{num_text(lo, '{:.2f}')}, {num_text(hi, '{:.2f}')}]"
    )


def _usd(e: EstimateJSON) -> str:
    lo, hi = e.ci95
    span = f" [{num_text(lo, '${:.3f}')}, {num_text(hi, '${:.3f}')}]" if lo or hi else ""
    return f"{num_text(e.value, '${:.3f}')}{span}"


def cost_line(p: ProfileDecision) -> str | None:
    """With a price: OFF's cost per 10⁶ good output tokens at the profile and, where ON, the
    chosen setting's (each with its interval from the blocks; docs/theory.md §22). A decision
    that stays off costs what OFF costs: the best setting's figure is not a result to show."""
    if p.price is None or p.off_cost_per_mtok is None:
        return None
    chosen = next((c for c in p.candidates if c.setting == p.chosen), None)
    on = chosen.cost_per_mtok if p.verdict == "on" and chosen is not None else None
    figures = f"OFF {_usd(p.off_cost_per_mtok)}" + (
        f" → {chosen.setting} {_usd(on)}" if on is not None and chosen is not None else ""
    )
    return (
        f"Cost per 10⁶ good output tokens at the profile (${p.price.gpu_hour_usd:g}/GPU-hour × "
        f"{p.price.gpus_per_server} GPU{'s' if p.price.gpus_per_server > 1 else ''}): {figures}."
    )


def profile_box(results: RunResults) -> Box | None:
    p = results.profile_decision
    if p is None:
        return None
    objective = "SLO goodput" if p.objective == "slo_goodput" else "good output tokens/s (cost)"
    items = [f"At the profile: {operating_point(p)}."]
    chosen = next((c for c in p.candidates if c.setting == p.chosen), None)
    best = max(p.candidates, key=lambda c: c.gain.value or 0.0, default=None)
    if p.verdict == "on" and chosen is not None:
        items.append(
            f"**ON: {chosen.setting}** — {objective} {_gain(chosen)} of OFF's; simultaneous "
            f"lower bound {num_text(chosen.decision_lower_bound, '{:.2f}')} > {1 + p.margin:.2f}."
        )
        line = setting_paste_line(results, chosen.drafter, chosen.gamma, p.schedule)
        if line:
            items.append(f"paste: `{line}`")
    elif p.verdict == "off":
        items.append(f"**OFF**: serve without speculation — {p.reason}.")
    else:
        word = "UNDECIDED" if p.verdict == "undecided" else "not measured"
        items.append(f"**{word}**: keep speculation off until it is decided — {p.reason}.")
    if p.verdict != "on" and (line := plain_paste_line(results)):
        items.append(f"paste (without speculation): `{line}`")
    if p.verdict != "on" and best is not None:
        items.append(f"best measured: {best.setting} at {_gain(best)} (not a result to deploy).")
    if cost := cost_line(p):
        items.append(cost)
    shown = chosen or best
    if shown is not None and shown.break_even_alpha is not None:
        items.append(
            f"Break-even acceptance at this load for {shown.setting}: "
            f"{shown.break_even_alpha:.3f} (measured {num_text(shown.acceptance)}): a gray "
            "rollout's acceptance guard (`specbench canary`)."
        )
    if (results.run.backend or results.env.backend) == "vllm" and p.verdict == "on":
        items.append(
            "Decided in-process (backend: vllm): a served engine's latencies can differ from the "
            "in-process step loop's, and the gain's size with them where the SLO sits between "
            "OFF's and ON's latencies — measure the pasted line as a server under the same "
            "profile before sizing a fleet on this gain (scripts/validate_export_vllm.py; "
            "docs/serving.md)."
        )
    if not p.interleaved:
        items.append(
            "⚠ OFF and the candidates were not alternated in time (engine.interleave: false): a "
            "drift of the machine falls on one side only."
        )
    rule = (
        f"{p.blocks} blocks (repeats), each setting paired with OFF within a block; ON only where "
        f"the simultaneous lower bound over all {len(p.candidates)} candidates exceeds "
        f"1 + {p.margin:g} (false ON ≤ {p.false_on_rate:.1%}), OFF only where every upper bound "
        f"is below it (false OFF ≤ {p.false_off_rate:.1%}); docs/theory.md §22."
    )
    return Box("Decision at the deployment profile: one configuration per server", items, rule)
