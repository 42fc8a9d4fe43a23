"""One prompt set per cell (docs/theory.md §13): when a cell's verdict sets degenerate prompts
aside, every figure of that cell — the γ table, ITL, TTFT, latency tails, the engine concurrency
and load tables, the cost line — is computed over the same non-degenerate prompts. Only the
workload's content section (`content.all_prompts` beside `content.non_degenerate`, the per-prompt
α with its degenerate marks) compares the two prompt sets.

A figure without a per-prompt split (an engine's batch spec-decode counters) cannot be restricted:
it stays over every prompt and `figures_basis.all_prompts` names it. A cell with no non-degenerate
prompt left has no verdict and keeps its figures over every prompt, labelled ("all").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from specbench.analysis.documents.results_model_workload import ContentCheck, FiguresBasis
from specbench.analysis.estimators.groups import Group, Record

# acceptance sources (`analysis.serving.serving_acceptance.counter_units`) read per request
PER_REQUEST_SOURCES = ("per_request_counters", "per_request_response")


def set_aside(basis: FiguresBasis | None, content: ContentCheck | None) -> frozenset[str]:
    """The one rule for which prompts a cell's verdict and figures leave out: its degenerate
    prompts when its figures are over the non-degenerate ones (`figures_basis` "non_degenerate");
    none when they cover every prompt (no degenerate prompt, or none left). The pipeline asks it
    of an entry it builds (`pipeline.results`, the backends' entries), compare of a results.json
    entry (`compare.sides`)."""
    if basis is None or content is None or basis.prompts != "non_degenerate":
        return frozenset()
    return frozenset(d.prompt_id for d in content.degenerate_prompts)


def keep_prompts(recs: Sequence[Record], excluded: Set[str]) -> list[Record]:
    """The records whose prompt is not excluded (records without a prompt, e.g. batch counters,
    are kept: they have no per-prompt split)."""
    return [r for r in recs if "prompt_id" not in r or str(r["prompt_id"]) not in excluded]


def records_without(
    records: Sequence[Record], excluded: Mapping[tuple[str, float], Set[str]]
) -> list[Record]:
    """The run's records less those of each cell's excluded prompts (by workload × temperature).
    Open-loop lines are kept whole: a load point's rates and tails are the server's under the
    traffic it was sent — every request counted over the window's seconds — and dropping the
    requests of set-aside prompts while keeping the window's length understated the achieved
    rate by the share set aside (8 of 36 steady requests kept: 0.51/s for 2.3/s)."""
    if not any(excluded.values()):
        return list(records)
    out = []
    for r in records:
        if r.get("load") not in (None, "closed"):
            out.append(r)
            continue
        if "prompt_id" in r and r.get("temperature") is not None:
            cell = excluded.get((str(r.get("workload")), float(r["temperature"])), set())
            if str(r["prompt_id"]) in cell:
                continue
        out.append(r)
    return out


def without_prompts(grp: Group, excluded: Set[str]) -> Group:
    """The group restricted to the prompts not excluded (failed units kept as they are: they
    count the run's failures, not a figure)."""
    if not excluded:
        return grp
    spec = {k: keep_prompts(rs, excluded) for k, rs in grp["spec"].items()}
    return Group(
        baseline=keep_prompts(grp["baseline"], excluded),
        spec={k: rs for k, rs in spec.items() if rs},
        failed=grp["failed"],
        metrics=grp["metrics"],
    )


def figures_basis(
    n_prompts: int, restricted: bool, all_prompts: Sequence[str] = ()
) -> FiguresBasis:
    """results.json's `figures_basis` of an entry."""
    return FiguresBasis(
        prompts="non_degenerate" if restricted else "all",
        n_prompts=n_prompts,
        all_prompts=list(all_prompts) if restricted else [],
    )


def engine_counter_figures(
    acceptance_source: str | list[str], counters: bool, concurrency: bool
) -> list[str]:
    """The figures of an engine entry read from per-batch records (no per-prompt split): α, τ
    and the predictions when it has counter figures (`counters`) from a batch source, and the
    concurrency table's rates when it has one."""
    sources = acceptance_source if isinstance(acceptance_source, list) else [acceptance_source]
    out = []
    if counters and any(s not in PER_REQUEST_SOURCES for s in sources if s):
        out.append("α, τ and the predictions (the engine's batch spec-decode counters)")
    if concurrency:
        out.append("output tokens/s, requests/s and the cost per 10⁶ tokens (per batch)")
    return out
