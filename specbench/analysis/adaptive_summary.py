"""The sequential verdict of one cell of an adaptive run, from its records (docs/theory.md §14).

The harness (`harness.adaptive`) calls `cell_decision` after every prompt to decide whether to
stop; `report` calls it on the stored records, so results.json states the same verdict the run
stopped on: "decided ON γ=g after n prompts", "decided OFF after n prompts", "undecided: needs
about N more prompts" or, stopped for futility (`adaptive.futility`), "futile: needs about N more
prompts, the workload has M left". Each adaptive record carries `plan_prompts`, the prompts its
cell may use, so the prompts left are a function of the records, as the harness counted them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from specbench.analysis.latency import pair
from specbench.analysis.recommend import SettingKey
from specbench.analysis.sequential import (
    FUTILITY_FROM,
    MIN_PROMPTS,
    MORE_CAP,
    SequenceSettings,
    SequentialDecision,
    decide,
)
from specbench.analysis.serialize import json_num
from specbench.analysis.validity import assess

Record = dict[str, Any]


def is_adaptive(records: list[Record]) -> bool:
    """Records written by the adaptive plan carry the plan step that produced them."""
    return any(r.get("plan_step") for r in records)


def sequence_settings(config: Mapping[str, Any]) -> SequenceSettings:
    """The sequential rule's settings from a run's (stored) config: margin, level and the fixed
    number of candidates K = max_candidates × drafters the sequences are split over."""
    decision = config.get("decision") or {}
    adaptive = config.get("adaptive") or {}
    drafters = 1 + len(config.get("extra_drafters") or [])
    return SequenceSettings(
        margin=float(decision.get("margin", 0.05)),
        candidates=int(adaptive.get("max_candidates", 3)) * drafters,
        alpha=1.0 - float(decision.get("ci_level", 0.95)),
    )


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


def prompts_left(records: Sequence[Record], config: Mapping[str, Any]) -> int | None:
    """The prompts the cell has left for the futility stop: its `plan_prompts` less the prompts
    measured (any unit, failed ones included); None when futility is off, before FUTILITY_FROM
    prompts, or when the records predate `plan_prompts`."""
    if not (config.get("adaptive") or {}).get("futility", True):
        return None
    supply = any(r.get("plan_prompts") is not None for r in records)
    measured = len({str(r["prompt_id"]) for r in records})
    if not supply or measured < FUTILITY_FROM:  # no futility before σ̂ exists
        return None
    return unused_prompts(records)


def unused_prompts(records: Sequence[Record]) -> int:
    """The prompts the cell may use (`plan_prompts`) that it has not measured; 0 when the
    records predate `plan_prompts`."""
    supply = [int(r["plan_prompts"]) for r in records if r.get("plan_prompts") is not None]
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
    prompts the cell has left, for the futility stop (`analysis.sequential.decide`)."""
    by_setting: dict[SettingKey, list[Record]] = {}
    for rec in spec:
        key = (rec.get("drafter") or "", rec.get("policy") or "fixed", int(rec["gamma"]))
        by_setting.setdefault(key, []).append(rec)
    valid = assess(baseline, by_setting)
    candidates: dict[str, Sequence[np.ndarray]] = {}
    for key, recs in sorted(valid.clean_settings.items()):
        candidates[setting_label(recs[0] if recs else by_setting[key][0])] = pair(
            valid.clean_base, recs
        ).arrays()
    d = decide(candidates, s, remaining)
    # every prompt's baseline is measured: if even all the prompts left were usable the cell
    # would not reach MIN_PROMPTS usable ones, no candidate can be decided (a certainty; this
    # also ends a pilot whose prompts all loop, before any candidate exists)
    usable = len({str(r["prompt_id"]) for r in valid.clean_base})
    if d.state == "undecided" and remaining is not None and usable + remaining < MIN_PROMPTS:
        return replace(d, futile=True, remaining=remaining)
    return d


def adaptive_summary(
    baseline: list[Record],
    spec: list[Record],
    config: Mapping[str, Any],
    failed: Sequence[Record] = (),
) -> dict[str, Any]:
    """results.json's `adaptive` of one entry: the state ("on", "off", "undecided", "futile"),
    n prompts, the prompts left, each candidate's sequence."""
    s = sequence_settings(config)
    records = [*baseline, *spec, *failed]
    left = prompts_left(records, config)
    d = cell_decision(baseline, candidate_records(spec), s, left)
    n = len({str(r["prompt_id"]) for r in baseline})
    if d.state == "on":
        text = f"decided ON {d.chosen} after {n} prompts"
    elif d.state == "off":
        text = f"decided OFF after {n} prompts"
    else:
        if d.more_prompts is None:
            need = "too few usable (non-degenerate, paired) prompts to say how many more"
        elif d.more_prompts >= MORE_CAP:
            need = f"the estimate sits at 1 + margin: more than {MORE_CAP} more prompts"
        else:
            need = f"needs about {d.more_prompts} more prompts"
        if d.futile and d.more_prompts is None:
            text = (
                f"futile after {n} prompts (undecided): fewer than {MIN_PROMPTS} usable "
                f"(non-degenerate, paired) prompts even if all {left} left were usable"
            )
        elif d.futile:
            text = f"futile after {n} prompts (undecided): {need}, the workload has {left} left"
        elif unused_prompts(records):
            # undecided with prompts unused: the plan stopped on its budget (or the run was
            # interrupted; `--resume` continues it), not for want of prompts
            text = f"undecided at the budget after {n} prompts: {need}"
        else:
            text = f"undecided after {n} prompts: {need}"
    return {
        "state": "futile" if d.futile else d.state,
        "chosen": d.chosen,
        "n_prompts": n,
        "more_prompts": d.more_prompts,
        "prompts_left": left,
        "summary": text,
        "level": json_num(1.0 - s.alpha),
        "candidates_k": s.candidates,
        "sequences": [
            {
                "setting": b.label,
                "n": b.n,
                "speedup": json_num(b.speedup),
                "interval": [json_num(b.lo), json_num(b.hi)],
            }
            for b in d.bounds
        ],
    }
