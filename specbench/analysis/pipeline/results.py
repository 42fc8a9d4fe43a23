"""From records.jsonl to results.json: the one analysis pipeline, for every backend. Pure
(numpy / scipy / pandas), no models: `specbench report` calls it on stored records.

    records ─ groups.group_records ─▶ per workload × temperature (config order):
        entry = transformers_results.transformers_entry   (per-round records)
              | serving_results.serving_entry             (engine counters, vllm / openai)
              → the analysed and decided entry, and the prompts its verdict rests on
        + failed units, request mix (`request_mix`), latency tails (`serving_cost.add_tails`)
    ─▶ per temperature: one setting for a pool serving every workload (`recommend`)
    ─▶ economics (`serving_cost`), failures, the run's header

Conventions (docs/theory.md; docs/results.md):
- per-token latency (ITL) is decode time ÷ decode tokens (TPOT), TTFT apart; a setting's speedup
  is its pooled decode throughput over the baseline's on the same prompts (`analysis.estimators.latency`);
- predictions: ITL_eff(γ) = round(γ) / ā(γ) with the round cost from the one timing fit
  (`analysis.arithmetic.timing_model`) and ā(γ) per prompt, pooled by tokens (docs/theory.md §3): from the
  truncation of the largest-γ run ("empirical") or the iid model at each prompt's own α ("iid");
- the verdict: `analysis.decide.recommend` (selection-aware, docs/theory.md §8);
- intervals resample prompts, repeats of a prompt as one cluster (`analysis.stats.resampling`).

Schema history: 1 — first version; 2 — speedups are pooled-throughput ratios, predictions pool
ā per prompt, the recommendation carries its simultaneous lower bound and the pool-wide
recommendation aggregates decode time; a workload whose speculative settings all failed is
"not_measured". Additive since: `content` (degenerate answers, α and speedup over the
non-degenerate prompts), `per_prompt_alpha`, `per_position_detail` (docs/theory.md §13); latency
tails (`baseline_tails`, `tails` per measured γ and per engine concurrency cell) and `economics`
(`analysis.serving.serving_cost`); `adaptive` (runs of the adaptive plan: the sequential verdict each
cell stopped on, `analysis.decide.adaptive_summary`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, cast

from specbench.analysis.decide.adaptive_summary import adaptive_summary, is_adaptive
from specbench.analysis.decide.pool import WorkloadInput, pool_recommendation
from specbench.analysis.decide.validity import degenerate_only
from specbench.analysis.documents.results_model import Failure, RunResults
from specbench.analysis.documents.settings import AnalysisSettings
from specbench.analysis.estimators.batch_prediction import batch_prediction
from specbench.analysis.estimators.groups import (
    Group,
    Record,
    failure_rows,
    group_records,
    is_engine_group,
)
from specbench.analysis.estimators.latency import pair
from specbench.analysis.estimators.request_mix import request_mix
from specbench.analysis.estimators.tables import SettingKey
from specbench.analysis.pipeline.profile_results import profile_section
from specbench.analysis.pipeline.prompt_basis import (
    excluded_prompts,
    records_without,
    without_prompts,
)
from specbench.analysis.pipeline.serving_results import serving_entry
from specbench.analysis.pipeline.transformers_results import transformers_entry
from specbench.analysis.serving.load_cells import attach_load, closed_loop
from specbench.analysis.serving.mix_batches import mix_section, without_mix
from specbench.analysis.serving.serving_cost import add_tails, economics_section, with_memory
from specbench.config.load import SloSpec
from specbench.config.stored import StoredConfig

RESULTS_SCHEMA = 3  # = analysis.documents.results_read's

# A backend's part of the pipeline: the decided entry of one group, with the baseline and
# settings its verdict rests on (pooled across workloads); None when the group has nothing to
# analyse (no baseline).
Analysed = tuple[dict[str, Any], list[Record], dict[SettingKey, list[Record]]]
EntryAnalysis = Callable[[Group, AnalysisSettings], Analysed | None]


def entry_analysis(grp: Group) -> EntryAnalysis:
    """The backend part for a group: engine counters (vllm / openai) or per-round records."""
    return serving_entry if is_engine_group(grp) else transformers_entry


def run_header(config: StoredConfig, s: AnalysisSettings) -> dict[str, Any]:
    """results.json's `run`: what was measured, as the stored config says (its `sampling` as
    stored, key for key)."""
    draft = config.draft
    return {
        "name": config.name,
        "target": config.target.model if config.target else None,
        "draft": (draft.model or draft.method) if draft else None,
        "drafter": (draft.method or "model") if draft else "model",
        "sampling": config.sampling.model_dump(exclude_unset=True) if config.sampling else None,
        "gammas": config.gammas,
        "max_new_tokens": config.max_new_tokens,
        "backend": config.backend or "transformers",
        "concurrency": config.concurrency,
        "margin": s.margin,
        "ci_level": s.ci_level,
    }


def build_results(
    records: list[Record],
    config: StoredConfig,
    env: dict[str, Any],
    batch_timing: list[Record] | None = None,
) -> dict[str, Any]:
    """The results.json document (schema RESULTS_SCHEMA); `batch_timing` (the run's
    batch_timing.jsonl) adds the predicted throughput by batch size."""
    s = AnalysisSettings.from_config(config)
    entries = []
    failures: list[Failure] = []
    pool_inputs: dict[float, list[WorkloadInput]] = defaultdict(list)
    mixed, records = records, without_mix(records)  # the profile's mix: `mix` below
    groups = group_records(closed_loop(records))  # open-loop cells: `engine.load` below
    excluded: dict[tuple[str, float], set[str]] = {}
    fig_groups: dict[tuple[str, float], Group] = dict(groups)
    for (workload, temp), grp in sorted(
        groups.items(), key=lambda kv: (s.rank(kv[0][0]), kv[0][1])
    ):
        failures.extend(failure_rows(grp))
        analysed = entry_analysis(grp)(grp, s)
        if analysed is None:
            continue
        body, base1, settings1 = analysed
        body["failed_units"] = len(grp["failed"])
        # the cell's other figures over the prompts of its verdict (`prompt_basis`)
        excluded[(workload, temp)] = excluded_prompts(body)
        fig_groups[(workload, temp)] = without_prompts(grp, excluded[(workload, temp)])
        spec_all = [r for recs in grp["spec"].values() for r in recs]
        if is_adaptive(grp["baseline"] + spec_all):  # the sequential verdict it stopped on (§14)
            body["adaptive"] = adaptive_summary(grp["baseline"], spec_all, config, grp["failed"])
        mix = request_mix(grp["baseline"])
        if mix is not None:
            body["request_sampling"] = mix
        add_tails(
            body, cast(dict[str, Any], fig_groups[(workload, temp)]), s.primary_drafter
        )  # p50/p90/p99 latency (analysis.serving.serving_cost)
        weight = s.weight(workload)
        entries.append({"workload": workload, "temperature": temp, "weight": weight, **body})
        own = (body["recommendation"].get("speedup") or {}).get("value") or 1.0
        base_itl = (body.get("baseline_itl_ms") or {}).get("value")
        if base_itl and not degenerate_only(body):
            pool_inputs[temp].append(
                WorkloadInput(
                    workload,
                    weight,
                    base_itl,
                    {k: pair(base1, recs) for k, recs in settings1.items()},
                    own,
                )
            )
    # tails, SLO goodput per load point; a cell's load table over the prompts of its verdict, too
    attach_load(entries, records_without(records, excluded), config, s.ci_level, s.n_boot)
    out = {
        "schema": RESULTS_SCHEMA,
        "run": run_header(config, s),
        "env": env,
        "workloads": entries,
        "global": global_recommendation(entries, pool_inputs, s),
        "economics": with_memory(
            economics_section(
                entries,
                cast(dict[tuple[str, float], dict[str, Any]], fig_groups),
                config.economics,
                env.get("device"),
            ),
            env,
        ),
        "failures": failures,
    }
    profile_mix = mix_section(mixed, config, s.ci_level, s.n_boot)
    if profile_mix is not None:  # engine runs with a profile and a steady-state load
        out["mix"] = profile_mix.model_dump(mode="json", by_alias=True)
        decided = profile_section(
            mixed,
            config.profile.deployment() if config.profile is not None else None,
            SloSpec(
                **(
                    config.slo.model_dump(include={"ttft_ms", "tpot_ms", "e2e_ms"})
                    if config.slo
                    else {}
                )
            ),
            profile_mix.token_shares,
            s.margin,
            s.ci_level,
            bool(config.engine and config.engine.interleave),
        )
        if decided is not None:  # the decision at the profile (analysis.decide.profile_decision)
            out["profile_decision"] = decided.model_dump(mode="json", by_alias=True)
    predicted = batch_prediction(
        batch_timing or [], fig_groups, s.primary_drafter, s.n_boot, s.ci_level
    )
    if predicted is not None:  # transformers runs with batch_timing (docs/theory.md §18)
        out["batch_prediction"] = predicted
    return out


def build_typed_results(
    records: list[Record],
    config: StoredConfig,
    env: dict[str, Any],
    batch_timing: list[Record] | None = None,
) -> RunResults:
    """The results document as the typed model every reader takes, validated once here.
    results.json itself is written from `build_results`' dict, whose key order it keeps."""
    return RunResults.model_validate(build_results(records, config, env, batch_timing))


def global_recommendation(
    entries: list[dict[str, Any]],
    pool_inputs: dict[float, list[WorkloadInput]],
    s: AnalysisSettings,
) -> dict[str, Any]:
    """Per temperature: one setting (or off) for a pool serving all its workloads, aggregated by
    decode time (`analysis.decide.recommend.pool_recommendation`), with the workloads ON and OFF."""
    out = []
    for temp in sorted({e["temperature"] for e in entries}):
        group = [e for e in entries if e["temperature"] == temp]
        if pool_inputs.get(temp):
            pool = pool_recommendation(temp, pool_inputs[temp], s.margin, s.ci_level, s.n_boot)
        else:  # every workload here lacks a verdict (e.g. degenerate output, docs/theory.md §13)
            pool = {
                "temperature": temp,
                "workloads": [],
                "verdict": "not_measured",
                "gamma": 0,
                "speedup": None,
                "reason": "no workload at this temperature has a measured verdict",
            }
        by_verdict: dict[str, list[str]] = {v: [] for v in ("on", "off", "not_measured")}
        for e in group:
            by_verdict.setdefault(e["recommendation"]["verdict"], []).append(e["workload"])
        pool["on_for"] = by_verdict["on"]
        pool["off_for"] = by_verdict["off"]
        pool["not_measured"] = by_verdict["not_measured"]
        out.append(pool)
    return {"by_temperature": out}
