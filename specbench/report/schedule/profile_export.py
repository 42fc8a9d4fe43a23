"""`specbench schedule RUN` for a run with a deployment profile: the pool's one configuration is
the decision at the profile (results.json `profile_decision`, docs/theory.md §22), not a γ
schedule rebuilt from batch-1 cells — the profile decision already chose among OFF, every fixed
γ and every measured γ schedule, with its error rates, at the mix, load and SLO the server sees
(docs/schedule.md, "A run with a deployment profile").

ON exports the chosen setting (a fixed γ as one range over every batch size, or its measured
schedule); OFF, UNDECIDED and not measured export the server without speculation with a `# …`
line saying which, as the off-everywhere schedule does (report/schedule/schedule_off.py)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from specbench.analysis.decide.gamma_schedule import OPEN_END
from specbench.analysis.documents.results_model_profile import ProfileDecision

PROFILE_SCHEMA = 1
WORDS = {"off": "OFF", "undecided": "UNDECIDED"}


def operating_point(p: ProfileDecision) -> str:
    """Where the decision holds: the mix, the load points and their shares, the SLO."""
    mix = ", ".join(f"{w} {s:.0%}" for w, s in p.mix.items()) or "the run's workloads"
    loads = ", ".join(f"{ld} ({s:.0%} of the time)" for ld, s in p.loads.items())
    slo = ", ".join(f"{m.removesuffix('_ms').upper()} {t}" for m, t in p.slo.items()) or "none"
    return f"mix {mix} of output tokens; load {loads}; SLO {slo}"


def profile_ranges(p: ProfileDecision) -> list[list[int]]:
    """The chosen setting's γ by batch size, [lo, hi, k] ranges; [] when the answer is not ON."""
    if p.verdict != "on" or not p.gamma:
        return []
    if p.schedule:
        return [[int(x) for x in r] for r in p.schedule]
    return [[1, OPEN_END, int(p.gamma)]]


def profile_note(p: ProfileDecision) -> str:
    """The stderr line naming the decision this export is and where it holds."""
    if p.verdict == "on":
        return (
            f"the decision at the deployment profile: ON, {p.chosen} (false ON ≤ "
            f"{p.false_on_rate:.1%}) — at {operating_point(p)}"
        )
    word = WORDS.get(str(p.verdict), "NOT MEASURED")
    shown = "shown not to pay" if p.verdict == "off" else "not shown to pay"
    return (
        f"# serve without speculation — {word} at the deployment profile, {shown}: {p.reason} — "
        f"at {operating_point(p)}"
    )


def profile_document(
    p: ProfileDecision, provenance: Mapping[str, JsonValue]
) -> dict[str, JsonValue]:
    """`--format json`: the decision, its γ by batch size (k = 0 nowhere: off is no ranges) and
    where it came from."""
    return {
        "schema": PROFILE_SCHEMA,
        "kind": "profile_decision",
        "verdict": p.verdict,
        "chosen": p.chosen,
        "schedule": profile_ranges(p),  # type: ignore[dict-item]
        "operating_point": operating_point(p),
        "decision": p.model_dump(mode="json", exclude_unset=True),
        "provenance": dict(provenance),
    }
