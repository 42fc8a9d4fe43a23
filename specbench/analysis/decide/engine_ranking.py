"""One ranking per workload × temperature of an engine run across every setting it measured:
method × γ × endpoint (draft model γ=2 and γ=4, EAGLE-3 γ=4, n-gram γ=4 …), each against the one
baseline measured without speculation.

Each row: the setting's label and method, its measured speedup at the reference concurrency with
its marginal 95 % interval, the lower bound of the three-outcome ON test over the ranked settings
(`recommend.workload_decision`: the sign-flip max-T test over all K candidates of every method,
inverted — docs/theory.md §8 and §19 — so picking the best of K across methods is accounted for),
whether that bound clears 1 + margin (the candidate's own statistic clears the max-T critical
value: the same statement), τ and α from that setting's own counters, and the concurrency at
which it stops paying. Rows are ordered by point speedup; on the same records the recommendation
(`analysis.decide.recommend`) is the best row that clears, or no row clears and it is OFF or
UNDECIDED.

When two settings share a γ, the γ-keyed sections of the entry (per_gamma, the γ table, the
concurrency table) describe one method, `primary_keys`; the ranking covers them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from specbench.analysis.decide.recommend import workload_decision
from specbench.analysis.documents.results_model_base import est_model
from specbench.analysis.documents.results_model_engine import RankingRow
from specbench.analysis.serving.serving_acceptance import (
    concurrency_of,
    counter_estimators,
    counter_units,
)
from specbench.analysis.serving.serving_concurrency import concurrency_table
from specbench.analysis.stats.serialize import json_num
from specbench.record_line import RecordLine
from specbench.setting import SettingKey

Record = RecordLine


def setting_name(key: SettingKey, recs: Sequence[Record]) -> str:
    """The label records carry (`setting`), else one made from the drafter and γ."""
    named = next((r["setting"] for r in recs if r.get("setting")), None)
    if named:
        return str(named)
    drafter, _, gamma = key
    if "γ=" in drafter:
        return drafter
    return f"{drafter} γ={gamma}" if drafter else f"γ={gamma}"


def setting_method(recs: Sequence[Record]) -> str | None:
    return next((str(r["method"]) for r in recs if r.get("method")), None)


def primary_keys(
    settings: Mapping[SettingKey, Sequence[Record]],
) -> tuple[list[SettingKey], str | None]:
    """The settings the γ-keyed sections show, and their method: all (None) when no two share a
    γ; else those of the method with the most distinct γ (the first measured on a tie; a setting
    without a stated method counts as its drafter), one setting per γ."""
    keys = list(settings)
    gammas = [k[2] for k in keys]
    if len(set(gammas)) == len(gammas):
        return keys, None
    group = {k: setting_method(settings[k]) or k[0] for k in keys}
    count: dict[str, set[int]] = {}
    for k in keys:
        count.setdefault(group[k], set()).add(k[2])
    top = max(count, key=lambda m: len(count[m]))  # max keeps the first of equals
    out: dict[int, SettingKey] = {}
    for k in keys:
        if group[k] == top:
            out.setdefault(k[2], k)
    return list(out.values()), top


def _own_metrics(
    metrics: Sequence[Record], key: SettingKey, keys: Sequence[SettingKey]
) -> list[Record]:
    """The setting's batch records: its drafter at its γ (by γ alone when no other setting
    shares that γ, as records written before settings carried a method may need)."""
    at_gamma = [m for m in metrics if int(m["gamma"]) == key[2]]
    own = [m for m in at_gamma if m.get("drafter", "") == key[0]]
    return own or (at_gamma if sum(k[2] == key[2] for k in keys) == 1 else [])


def engine_ranking(
    base: Sequence[Record],
    settings: Mapping[SettingKey, Sequence[Record]],
    metrics: Sequence[Record],
    c_ref: int,
    margin: float,
    level: float,
    n_boot: int,
) -> list[RankingRow]:
    """The ranking rows (module docstring), best point speedup first; none chosen yet (the
    entry's verdict picks its row, `pipeline.serving_results`)."""
    base1 = [r for r in base if concurrency_of(r) == c_ref]
    settings1 = {k: [r for r in rs if concurrency_of(r) == c_ref] for k, rs in settings.items()}
    wd = workload_decision(base1, settings1, margin, level, n_boot)
    if wd is None:
        return []
    keys = wd.keys
    base_metrics = [m for m in metrics if int(m["gamma"]) == 0]
    rows = []
    for i, key in enumerate(keys):
        recs = list(settings[key])
        own = _own_metrics(metrics, key, keys)
        keyed, source = counter_units(recs, own, c_ref)
        est = (
            counter_estimators([u for _, u in keyed], key[2], n_boot, level, source)
            if keyed
            else None
        )
        _, stops = concurrency_table(
            base, {key[2]: recs}, base_metrics + own, margin, n_boot, level
        )
        bound = float(wd.decision.lower[i])  # NaN: unbounded (too few prompts to decide)
        stop = stops.get(str(key[2]))
        rows.append(
            RankingRow(
                rank=0,  # set below, once sorted
                label=setting_name(key, recs),
                method=setting_method(recs),
                drafter=key[0],
                policy=key[1],
                gamma=key[2],
                n_prompts=len({r["prompt_id"] for r in settings1[key]}),
                speedup=est_model(wd.marginal[key]),
                decision_lower_bound=json_num(bound),
                clears=bool(math.isfinite(bound) and bound > 1.0 + margin),
                chosen=False,
                mean_accepted_length=est.mean_accepted_length if est is not None else None,
                alpha=est.accepted_tested if est is not None else None,
                acceptance_source=source,
                stops_paying_at=stop.stops_paying_at if stop is not None else None,
            )
        )

    def point(row: RankingRow) -> float:
        v = row.speedup.value if row.speedup is not None else None
        return float(v) if v is not None and math.isfinite(v) else -math.inf

    rows.sort(key=point, reverse=True)
    for i, row in enumerate(rows):
        row.rank = i + 1
    return rows
