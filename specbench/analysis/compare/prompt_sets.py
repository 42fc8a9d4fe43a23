"""One prompt set per compared cell (docs/theory.md §13, docs/compare.md): a run whose verdict
set degenerate prompts aside has every figure of that cell over its non-degenerate prompts, so
compare does the same — and pairs the two sides over the same prompts: a prompt set aside on
EITHER side is set aside on both. Only a side with per-prompt records can be restricted; a
results.json side's stored figures are already over its own verdict's prompts, and the note says
when the two sides' prompt sets differ."""

from __future__ import annotations

from dataclasses import replace

from specbench.analysis.compare.samples import prompt_of, without_prompts
from specbench.analysis.compare.sides import Group, Side


def _prompts(g: Group) -> set[str]:
    return {prompt_of(k) for s in (g.samples or {}).values() for k in s.keys}


def restricted(g: Group, excluded: frozenset[str]) -> Group:
    """The group's per-prompt samples (and each run's behind a merged side) less `excluded`."""
    if not excluded or g.samples is None:
        return g
    dropped = len(_prompts(g) & excluded)
    return replace(
        g,
        samples={k: without_prompts(s, excluded) for k, s in g.samples.items()},
        n_prompts=max(0, g.n_prompts - dropped),
        per_run=[restricted(p, excluded) for p in g.per_run],
    )


def paired(b: Group, n: Group) -> tuple[Group, Group, str]:
    """Both sides of one cell over the same prompts, and the note that says so ("" when neither
    side set a prompt aside)."""
    union = b.set_aside | n.set_aside
    if not union:
        return b, n, ""
    if b.samples is None or n.samples is None:
        if b.set_aside == n.set_aside:
            return b, n, f"over each run's verdict prompts ({len(union)} degenerate set aside)"
        return (
            b,
            n,
            (
                f"stored figures over each run's own verdict prompts ({len(b.set_aside)} degenerate "
                f"set aside in base, {len(n.set_aside)} in new): not the same prompts; pass run "
                "directories to pair them"
            ),
        )
    rb, rn = restricted(b, union), restricted(n, union)
    k = len(_prompts(b) & union | _prompts(n) & union)
    left = min(rb.n_prompts, rn.n_prompts)
    over = f"over {left} prompt{'' if left == 1 else 's'}"
    if b.set_aside == n.set_aside:
        note = f"{over}: the {k} degenerate set aside, as both runs' verdicts do"
    else:
        note = (
            f"{over}: {k} degenerate set aside on both sides "
            f"({len(b.set_aside)} in base, {len(n.set_aside)} in new)"
        )
    return rb, rn, note


def same_prompts(sides: list[Side]) -> list[Side]:
    """Several runs (`--calibrate`'s A/A runs) over the same prompts per cell: a prompt any run's
    verdict set aside is left out of every run, as `paired` does for two sides."""
    keys = {k for s in sides for k in s.groups}
    union = {
        k: frozenset().union(*[s.groups[k].set_aside for s in sides if k in s.groups]) for k in keys
    }
    return [
        replace(s, groups={k: restricted(g, union[k]) for k, g in s.groups.items()}) for s in sides
    ]
