"""The γ schedule by concurrency for a server's pool of workloads (`specbench schedule RUN_DIR`
without `--workload`; docs/schedule.md "One schedule for the pool").

A server sees every workload at once, so it needs one schedule for the mix. Traffic is tokens:
at concurrency c the pool's throughput ratio of γ over the engine without speculation is the ratio
of the mix's end-to-end time per output token,

    R_{c,γ} = Σ_w W_w · (Σ e2e / Σ tok)_{0,w}  /  Σ_w W_w · (Σ e2e / Σ tok)_{γ,w}

with W_w the workload's share of output tokens (its config `weight`, normalised) — the e2e
analogue of the batch-1 pool speedup O_k of `analysis.decide.pool` (docs/theory.md §8, "For a pool").
Written as one paired ratio of sums: unit u of workload w enters each side with its tokens and
ms scaled by W_w / T_{side,w} (T the side's tokens over w's paired units), so each side's tokens
sum to 1 and its ms to the weighted time per token; `latency.speedup_of` of that pair is R.
The scale factors are fixed from the full sample; the bootstrap resamples the units (prompts of
every workload, named `workload/prompt`; engine starts too when interleaved) jointly over all
cells, and the decision is `gamma_schedule.decide_cells`: the same simultaneous max-T lower
bounds, the same 1 + margin rule and family-wise false-ON rate, the same monotone fill.

A pool cell (c, γ) exists only where every workload measured γ and the baseline at c: a
schedule for the mix cannot rest on part of it. Boundaries between measured concurrencies are
placed at the geometric midpoint (no step-cost model is fitted to a mix).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.decide.engine_ranking import primary_keys
from specbench.analysis.decide.gamma_schedule import (
    OPEN_END,
    decide_cells,
    family_rate,
    model_switch,
    schedule_ranges,
)
from specbench.analysis.documents.results_model_engine import GammaSchedule
from specbench.analysis.documents.settings import AnalysisSettings
from specbench.analysis.estimators.groups import Group, group_records, is_engine_group
from specbench.analysis.estimators.latency import Paired, pair
from specbench.analysis.serving.load_cells import closed_loop
from specbench.analysis.serving.serving_acceptance import concurrency_of
from specbench.analysis.serving.serving_schedule import split_schedule
from specbench.analysis.stats.serialize import json_num
from specbench.config.stored import StoredConfig
from specbench.record_line import RecordLine

Record = RecordLine


@dataclass(frozen=True)
class PoolMember:
    """One workload of the pool at the chosen temperature: its share and its engine records."""

    workload: str
    weight: float  # share of output tokens, normalised over the pool
    base: list[Record]
    specs: dict[int, list[Record]]  # γ → records of the run's primary method


def member(workload: str, weight: float, grp: Group) -> PoolMember:
    """The baseline and the fixed-γ settings of one workload's group (the schedule setting and
    the other methods left out, as the workload's own schedule does)."""
    settings, _, _, _ = split_schedule(grp["spec"], grp["metrics"])
    keys, _ = primary_keys(settings)
    specs: dict[int, list[Record]] = defaultdict(list)
    for key in keys:
        specs[key[2]] += settings[key]
    return PoolMember(workload, weight, list(grp["baseline"]), dict(specs))


def pool_members(
    records: Sequence[Record],
    s: AnalysisSettings,
    temperature: float | None,
    temperature_shares: Mapping[float, float] | None = None,
) -> list[PoolMember]:
    """Every workload of an engine run at `temperature`, in config order, with its weight; with
    `temperature` None, every (workload, temperature) of `temperature_shares` (the profile's
    temperature mix), weighted W_w · share_T and named "workload T=t"."""
    groups = group_records(closed_loop(list(records)))
    engine = sorted(
        (k for k, g in groups.items() if is_engine_group(g)), key=lambda k: (s.rank(k[0]), k[1])
    )
    if temperature is not None:
        return [member(w, s.weight(w), groups[(w, t)]) for w, t in engine if t == temperature]
    shares = dict(temperature_shares or {})
    return [
        member(f"{w} T={t:g}", s.weight(w) * shares[t], groups[(w, t)])
        for w, t in engine
        if t in shares and shares[t] > 0
    ]


def traffic_shares(
    config: StoredConfig,
) -> tuple[dict[str, float] | None, dict[float, float] | None]:
    """A stored config's deployment-profile traffic mix (config/profile.py; checked and
    normalised when the config was read): (workload shares, temperature shares), each None when
    not given."""
    mix = config.profile.traffic if config.profile else None
    return (mix.workloads, mix.temperatures) if mix else (None, None)


def weighted_pair(parts: Sequence[tuple[str, float, Paired]]) -> Paired | None:
    """The pool's paired (tokens, ms) for one cell (module docstring): each workload's units
    scaled by W_w / T_{side,w}, keys prefixed with the workload."""
    keys: list[tuple[str, int]] = []
    cols: list[list[np.ndarray]] = [[], [], [], []]
    for name, w, p in parts:
        t_new, t_base = float(np.sum(p.tok_new)), float(np.sum(p.tok_base))
        if len(p) == 0 or t_new <= 0 or t_base <= 0:
            return None
        keys += [(f"{name}/{k[0]}", k[1]) for k in p.keys]
        for i, (arr, scale) in enumerate(
            [(p.tok_new, w / t_new), (p.ms_new, w / t_new), (p.tok_base, w / t_base),
             (p.ms_base, w / t_base)]
        ):  # fmt: skip
            cols[i].append(arr * scale)
    crossed = all(p.crossed for _, _, p in parts)
    tok_new, ms_new, tok_base, ms_base = (np.concatenate(c) for c in cols)
    return Paired(keys, tok_new, ms_new, tok_base, ms_base, crossed)


def pool_cells(members: Sequence[PoolMember]) -> tuple[list[tuple[int, int, Paired]], list[int]]:
    """(c, γ, pooled pair) for every cell every workload measured, and the concurrencies every
    workload's baseline measured."""
    levels = sorted(
        set.intersection(*({concurrency_of(r) for r in m.base} for m in members))
        if members
        else set()
    )
    gammas = sorted(set.intersection(*(set(m.specs) for m in members)) - {0}) if members else []
    cells = []
    for c in levels:
        for g in gammas:
            parts = []
            for m in members:
                b = [r for r in m.base if concurrency_of(r) == c]
                s = [r for r in m.specs[g] if concurrency_of(r) == c]
                p = pair(b, s, end_to_end=True)
                if not len(p):
                    break
                parts.append((m.workload, m.weight, p))
            else:
                pooled = weighted_pair(parts)
                if pooled is not None:
                    cells.append((c, g, pooled))
    return cells, levels


def pool_schedule(members: Sequence[PoolMember], s: AnalysisSettings) -> GammaSchedule | None:
    """The pool's schedule in the shape of an entry's `engine.schedule`, or None when no cell is
    common to every workload."""
    total = sum(m.weight for m in members)
    if not members or total <= 0 or not math.isfinite(total):
        return None
    members = [PoolMember(m.workload, m.weight / total, m.base, m.specs) for m in members]
    cells, levels = pool_cells(members)
    if not cells:
        return None
    decisions, how = decide_cells(cells, levels, s.margin, s.ci_level, s.n_boot)
    ranges, boundaries = schedule_ranges(
        [(d.concurrency, d.gamma) for d in decisions], model_switch(None, {}), OPEN_END
    )
    shares = ", ".join(f"{m.workload} {m.weight:.0%}" for m in members)
    return GammaSchedule(
        rule=(
            "per concurrency: ON with the γ of highest pooled throughput ratio among those whose "
            "simultaneous lower bound > 1 + margin, else off (k = 0)"
        ),
        family=f"{how}; pool of {len(members)} workloads ({shares} of output tokens)",
        false_on_rate=json_num(family_rate(s.ci_level)),
        margin=s.margin,
        throughput=(
            "closed-loop output tokens/s of the mix: Σ_w W_w·(e2e per token) of off over that "
            "of γ, paired by prompt within each workload"
        ),
        concurrencies=[d.row({}, {}) for d in decisions],
        ranges=ranges,
        boundaries=boundaries,
        measured_up_to=max(levels),
        extrapolated_from=max(levels) + 1,
    )
