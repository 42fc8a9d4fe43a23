"""The sequential verdict of one cell of an adaptive run, from its records (docs/theory.md §14).

The harness (`harness.transformers.adaptive`) calls `cell_decision` after every prompt to decide whether to
stop; `report` calls it on the stored records, so results.json states the same verdict the run
stopped on: "decided ON γ=g after n prompts", "decided OFF after n prompts", "undecided: needs
about N more prompts" or, stopped for futility (`adaptive.futility`), "futile: needs about N more
prompts, the workload has M left". Each adaptive record carries `plan_prompts`, the prompts its
cell may use, so the prompts left are a function of the records, as the harness counted them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal, cast

import numpy as np

from specbench.analysis.decide.recommend import common_prompts
from specbench.analysis.decide.validity import assess
from specbench.analysis.documents.results_model_workload import AdaptiveCell, SequenceRow
from specbench.analysis.estimators.latency import pair
from specbench.analysis.stats import signflip
from specbench.analysis.stats.sequential import (
    FUTILITY_FROM,
    MORE_CAP,
    SequenceSettings,
    SequentialDecision,
    decide,
)
from specbench.analysis.stats.serialize import json_num
from specbench.config import AdaptiveSpec, DecisionSpec
from specbench.config.stored import StoredAdaptive, StoredConfig, StoredDecision
from specbench.record_line import RecordLine
from specbench.setting import SettingKey

_DECISION, _ADAPTIVE = DecisionSpec(), AdaptiveSpec()  # the defaults of unset keys

Record = RecordLine


def is_adaptive(records: list[Record]) -> bool:
    """Records written by the adaptive plan carry the plan step that produced them."""
    return any(r.get("plan_step") for r in records)


def sequence_settings(config: StoredConfig) -> SequenceSettings:
    """The sequential design's settings from a run's (stored) config: margin, level, the cap on
    candidates (max_candidates × drafters) and the prompt cap `adaptive.max_prompts` (a cell's
    records' `plan_prompts` replace it: `with_cap`); unset keys take `RunConfig`'s defaults."""
    decision = config.decision or StoredDecision()
    adaptive = config.adaptive or StoredAdaptive()
    drafters = 1 + len(config.extra_drafters or [])
    margin = _DECISION.margin if decision.margin is None else decision.margin
    level = _DECISION.ci_level if decision.ci_level is None else decision.ci_level
    per = _ADAPTIVE.max_candidates if adaptive.max_candidates is None else adaptive.max_candidates
    return SequenceSettings(
        margin=float(margin),
        candidates=int(per) * drafters,
        alpha=1.0 - float(level),
        n_max=adaptive.max_prompts,
    )


def with_cap(s: SequenceSettings, records: Sequence[Record]) -> SequenceSettings:
    """The design of this cell: its looks end at the prompts it may use (`plan_prompts`, fixed
    when the cell was planned, before any data); records without it keep `s.n_max` (None: the
    α-spending design over the whole schedule, docs/theory.md §14)."""
    plan = [int(x) for r in records if (x := r.get("plan_prompts")) is not None]
    return replace(s, n_max=max(plan)) if plan else s


CANDIDATE_STEPS = ("backfill", "measure")


def candidate_records(spec: list[Record]) -> list[Record]:
    """The records of the settings the plan chose as candidates: those it measured past the
    pilot (a γ_max measured in the pilot only served to predict, and is not tested)."""
    key = lambda r: (r.get("drafter") or "", r.get("policy") or "fixed", int(r["gamma"]))  # noqa: E731
    chosen = {key(r) for r in spec if r.get("plan_step") in CANDIDATE_STEPS}
    return [r for r in spec if key(r) in chosen]


def setting_label(rec: Record) -> str:
    pol = rec.get("policy") or "fixed"
    return f"{rec.get('drafter') or 'model'} {pol} γ={rec['gamma']}"


def prompts_left(records: Sequence[Record], config: StoredConfig) -> int | None:
    """The prompts the cell has left for the futility stop: its `plan_prompts` less the prompts
    measured (any unit, failed ones included); None when futility is off, before FUTILITY_FROM
    prompts, or when the records predate `plan_prompts`."""
    if config.adaptive is not None and config.adaptive.futility is False:
        return None
    supply = any(r.get("plan_prompts") is not None for r in records)
    measured = len({str(r["prompt_id"]) for r in records})
    if not supply or measured < FUTILITY_FROM:  # no futility before σ̂ exists
        return None
    return unused_prompts(records)


def unused_prompts(records: Sequence[Record]) -> int:
    """The prompts the cell may use (`plan_prompts`) that it has not measured; 0 when the
    records predate `plan_prompts`."""
    supply = [int(x) for r in records if (x := r.get("plan_prompts")) is not None]
    measured = len({str(r["prompt_id"]) for r in records})
    return max(max(supply) - measured, 0) if supply else 0


def cell_decision(
    baseline: list[Record],
    spec: list[Record],
    s: SequenceSettings,
    remaining: int | None = None,
) -> SequentialDecision:
    """The verdict over every speculative setting measured in the cell, each paired with the
    baseline on the non-degenerate prompts both measured (as the full analysis, docs/theory.md
    §13: a prompt whose answers loop says nothing about deployed speed); `remaining`: the
    prompts the cell has left, for the futility stop (`analysis.stats.sequential.decide`)."""
    by_setting: dict[SettingKey, list[Record]] = {}
    for rec in spec:
        key = (rec.get("drafter") or "", rec.get("policy") or "fixed", int(rec["gamma"]))
        by_setting.setdefault(key, []).append(rec)
    s = with_cap(s, [*baseline, *spec])
    valid = assess(baseline, by_setting)
    labels, paired = [], []
    for key, recs in sorted(valid.clean_settings.items()):
        labels.append(setting_label(recs[0] if recs else by_setting[key][0]))
        paired.append(pair(valid.clean_base, recs))
    # the prompts every candidate measured, in the order measured (the looks' first units)
    common = common_prompts(paired) if paired else []
    candidates: dict[str, Sequence[np.ndarray]] = {
        lab: p.arrays() for lab, p in zip(labels, common, strict=True)
    }
    d = decide(candidates, s, remaining)
    # every prompt's baseline is measured: if even all the prompts left were usable the cell
    # would not reach its first look, no candidate can be decided (a certainty; this also ends
    # a pilot whose prompts all loop, before any candidate exists)
    usable = len({str(r["prompt_id"]) for r in valid.clean_base})
    if d.state == "undecided" and remaining is not None and usable + remaining < first_look(s):
        return replace(d, futile=True, remaining=remaining)
    return d


def first_look(s: SequenceSettings) -> float:
    """The prompts the design's first look needs (∞ when it has none: a cap below 6 prompts)."""
    return float(s.looks[0].n) if s.looks else math.inf


def adaptive_summary(
    baseline: list[Record],
    spec: list[Record],
    config: StoredConfig,
    failed: Sequence[Record] = (),
) -> AdaptiveCell:
    """results.json's `adaptive` of one entry: the state ("on", "off", "undecided", "futile"),
    n prompts, the prompts left, each candidate's sequence."""
    records = [*baseline, *spec, *failed]
    s = with_cap(sequence_settings(config), records)
    left = prompts_left(records, config)
    d = cell_decision(baseline, candidate_records(spec), s, left)
    n = len({str(r["prompt_id"]) for r in baseline})
    if d.state == "on":
        text = f"decided ON {d.chosen} after {n} prompts (the look at {d.look})"
    elif d.state == "off":
        text = f"decided OFF after {n} prompts (the look at {d.look})"
    else:
        if d.more_prompts is None:
            need = "too few usable (non-degenerate, paired) prompts to say how many more"
        elif d.more_prompts >= MORE_CAP:
            need = f"the estimate sits at 1 + margin: more than {MORE_CAP} more prompts"
        else:
            need = f"needs about {d.more_prompts} more prompts"
        if d.futile and not s.looks:
            text = (
                f"futile after {n} prompts (undecided): a cap of {s.n_max} prompts cannot "
                f"decide at this level (the test needs at least {signflip.min_prompts(s.side_alpha)})"
            )
        elif d.futile and d.more_prompts is None:
            text = (
                f"futile after {n} prompts (undecided): fewer than {first_look(s):g} usable "
                f"(non-degenerate, paired) prompts, the first look, even if all {left} left "
                "were usable"
            )
        elif d.futile:
            text = f"futile after {n} prompts (undecided): {need}, the workload has {left} left"
        elif unused_prompts(records):
            # undecided with prompts unused: the plan stopped on its budget (or the run was
            # interrupted; `--resume` continues it), not for want of prompts
            text = f"undecided at the budget after {n} prompts: {need}"
        else:
            text = f"undecided after {n} prompts: {need}"
    # the sequential decision's state is one of AdaptiveCell's (the model checks it)
    state = cast(Literal["on", "off", "undecided", "futile"], "futile" if d.futile else d.state)
    return AdaptiveCell(
        state=state,
        chosen=d.chosen,
        n_prompts=n,
        more_prompts=d.more_prompts,
        prompts_left=left,
        summary=text,
        level=json_num(1.0 - s.alpha),
        candidates_k=s.candidates,
        sequences=[
            SequenceRow(
                setting=b.label,
                n=b.n,
                speedup=json_num(b.speedup),
                interval=(json_num(b.lo), json_num(b.hi)),
            )
            for b in d.bounds
        ],
    )
