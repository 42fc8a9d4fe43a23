"""The engine runs' ranking table: every setting measured (method × γ × endpoint) of one
workload × temperature, best point speedup first, with the interval, the simultaneous lower bound
the ON rule reads (over all K candidates, across methods), τ and α from the setting's own
counters, and the concurrency at which it stops paying (`analysis.decide.engine_ranking`)."""

from __future__ import annotations

from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_engine import EngineSection
from specbench.report.render.blocks import Block, Para, TableBlock
from specbench.report.sections.text import num_text


def _v(est: EstimateJSON | None, fmt: str) -> str:
    if est is None or est.value is None:
        return "–"
    lo, hi = est.ci95
    if lo is None or hi is None:
        return fmt.format(est.value)
    return f"{fmt.format(est.value)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def ranking_blocks(eng: EngineSection, speedups: bool = True) -> list[Block]:
    """The ranking, or nothing when the run measured a single setting. Without `speedups` (a
    cell without a verdict, `no_verdict`) every setting's τ and α alone, listed in the run's
    order: a rank by speedup would be a speedup figure."""
    if len(eng.ranking) < 2:
        return []
    if not speedups:
        return [
            Para(
                f"Every setting measured ({len(eng.ranking)}; {eng.ranking_basis or 'all prompts'}"
                "): not measured, so no verdict, no speedup and no ranking; τ and α only."
            ),
            TableBlock(
                ["setting", "method", "γ", "τ [95% CI]", "α [95% CI]"],
                [
                    [
                        r.label,
                        r.method or "–",
                        str(r.gamma),
                        _v(r.mean_accepted_length, "{:.2f}"),
                        _v(r.alpha, "{:.3f}"),
                    ]
                    for r in sorted(eng.ranking, key=lambda r: (r.method or "", r.gamma))
                ],
            ),
        ]
    rows = [
        [
            str(r.rank),
            r.label + (" **(chosen)**" if r.chosen else ""),
            r.method or "–",
            str(r.gamma),
            _v(r.speedup, "{:.2f}×"),
            num_text(r.decision_lower_bound, "{:.3f}"),
            "yes" if r.clears else "no",
            _v(r.mean_accepted_length, "{:.2f}"),
            _v(r.alpha, "{:.3f}"),
            str(r.stops_paying_at) if r.stops_paying_at is not None else "–",
        ]
        for r in eng.ranking
    ]
    header = [
        "rank",
        "setting",
        "method",
        "γ",
        "speedup [95% CI]",
        "simultaneous lower bound",
        "clears 1 + margin",
        "τ [95% CI]",
        "α [95% CI]",
        "stops paying at c",
    ]
    note = Para(
        f"Ranking of every setting ({len(eng.ranking)} candidates, each against the one baseline "
        f"without speculation, at concurrency {eng.reference_concurrency}; "
        f"{eng.ranking_basis or 'all prompts'}). The lower bound is "
        "simultaneous over all candidates of every method (max-T), so choosing the best of them "
        "does not raise the false-ON rate above its nominal (1 − level)/2, 2.5 % at the default "
        "95 % level."
    )
    return [note, TableBlock(header, rows)]
