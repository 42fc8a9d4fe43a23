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
from typing import Any, Literal

from specbench.analysis.decide.adaptive_summary import adaptive_summary, is_adaptive
from specbench.analysis.decide.pool import WorkloadInput, pool_recommendation
from specbench.analysis.decide.validity import degenerate_only
from specbench.analysis.documents.results_model import (
    Failure,
    GlobalRecommendation,
    PoolDecision,
    RunEnv,
    RunInfo,
    RunResults,
    RunSampling,
)
from specbench.analysis.documents.results_model_workload import WorkloadResult
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
from specbench.analysis.pipeline.profile_results import profile_section
from specbench.analysis.pipeline.prompt_basis import (
    records_without,
    set_aside,
    without_prompts,
)
from specbench.analysis.pipeline.serving_results import serving_entry
from specbench.analysis.pipeline.transformers_results import transformers_entry
from specbench.analysis.serving.load_cells import by_group, closed_loop, engine_load
from specbench.analysis.serving.mix_batches import mix_section, without_mix
from specbench.analysis.serving.serving_cost import economics_section
from specbench.config.load import SloSpec
from specbench.config.stored import StoredConfig
from specbench.setting import SettingKey

RESULTS_SCHEMA: Literal[3] = 3  # = analysis.documents.results_read's

# A backend's part of the pipeline: the decided entry of one group (workload × temperature), with
# the baseline and settings its verdict rests on (pooled across workloads); None when the group
# has nothing to analyse (no baseline).
Analysed = tuple[WorkloadResult, list[Record], dict[SettingKey, list[Record]]]
EntryAnalysis = Callable[[tuple[str, float], Group, AnalysisSettings], Analysed | None]


def entry_analysis(grp: Group) -> EntryAnalysis:
    """The backend part for a group: engine counters (vllm / openai) or per-round records."""
    return serving_entry if is_engine_group(grp) else transformers_entry


def run_header(config: StoredConfig, s: AnalysisSettings) -> RunInfo:
    """results.json's `run`: what was measured, as the stored config says (its `sampling` as
    stored, key for key)."""
    draft = config.draft
    return RunInfo(
        name=config.name,
        target=config.target.model if config.target else None,
        draft=(draft.model or draft.method) if draft else None,
        drafter=(draft.method or "model") if draft else "model",
        sampling=RunSampling(**config.sampling.model_dump(exclude_unset=True))
        if config.sampling
        else None,
        gammas=config.gammas,
        max_new_tokens=config.max_new_tokens,
        backend=config.backend or "transformers",
        concurrency=config.concurrency,
        margin=s.margin,
        ci_level=s.ci_level,
    )


def build_results(
    records: list[Record],
    config: StoredConfig,
    env: RunEnv,
    batch_timing: list[Record] | None = None,
) -> RunResults:
    """The results.json document (schema RESULTS_SCHEMA); `batch_timing` (the run's
    batch_timing.jsonl) adds the predicted throughput by batch size."""
    s = AnalysisSettings.from_config(config)
    entries: list[WorkloadResult] = []
    failures: list[Failure] = []
    pool_inputs: dict[float, list[WorkloadInput]] = defaultdict(list)
    mixed, records = records, without_mix(records)  # the profile's mix: `mix` below
    groups = group_records(closed_loop(records))  # open-loop cells: `engine.load` below
    excluded: dict[tuple[str, float], frozenset[str]] = {}
    fig_groups: dict[tuple[str, float], Group] = dict(groups)
    for cell, grp in sorted(groups.items(), key=lambda kv: (s.rank(kv[0][0]), kv[0][1])):
        failures.extend(failure_rows(grp))
        analysed = entry_analysis(grp)(cell, grp, s)
        if analysed is None:
            continue
        entry, base1, settings1 = analysed
        # the cell's other figures over the prompts of its verdict (`prompt_basis`)
        excluded[cell] = set_aside(entry.figures_basis, entry.content)
        fig_groups[cell] = without_prompts(grp, excluded[cell])
        spec_all = [r for recs in grp["spec"].values() for r in recs]
        if is_adaptive(grp["baseline"] + spec_all):  # the sequential verdict it stopped on (§14)
            entry.adaptive = adaptive_summary(grp["baseline"], spec_all, config, grp["failed"])
        mix = request_mix(grp["baseline"])
        if mix is not None:
            entry.request_sampling = mix
        entries.append(entry)
        rec = entry.recommendation
        own = (rec.speedup.value if rec.speedup is not None else None) or 1.0
        base_itl = entry.baseline_itl_ms.value if entry.baseline_itl_ms is not None else None
        if base_itl and not degenerate_only(rec):
            pool_inputs[cell[1]].append(
                WorkloadInput(
                    cell[0],
                    entry.weight,
                    base_itl,
                    {k: pair(base1, recs) for k, recs in settings1.items()},
                    own,
                )
            )
    # tails, SLO goodput per load point; a cell's load table over the prompts of its verdict, too
    grouped = by_group(records_without(records, excluded))
    for e in entries:
        if e.engine is not None:
            load = engine_load(
                grouped.get((e.workload, e.temperature), []), config, s.ci_level, s.n_boot
            )
            e.engine.load, e.engine.slo = load.cells, load.slo
            e.warnings = list(dict.fromkeys([*e.warnings, *load.notes]))
    # the pool-wide decision goes in by its alias, `global`, a Python keyword
    pool_wide: dict[str, Any] = {"global": global_recommendation(entries, pool_inputs, s)}
    out = RunResults(
        schema=RESULTS_SCHEMA,
        run=run_header(config, s),
        env=env,
        workloads=entries,
        economics=economics_section(entries, fig_groups, config.economics, env),
        failures=failures,
        **pool_wide,
    )
    profile_mix = mix_section(mixed, config, s.ci_level, s.n_boot)
    if profile_mix is not None:  # engine runs with a profile and a steady-state load
        out.mix = profile_mix
        decided = profile_section(
            mixed,
            config.deployment_profile(),  # its price's unset parts: economics
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
            out.profile_decision = decided
    predicted = batch_prediction(
        batch_timing or [], fig_groups, s.primary_drafter, s.n_boot, s.ci_level
    )
    if predicted is not None:  # transformers runs with batch_timing (docs/theory.md §18)
        out.batch_prediction = predicted
    return out


def global_recommendation(
    entries: list[WorkloadResult],
    pool_inputs: dict[float, list[WorkloadInput]],
    s: AnalysisSettings,
) -> GlobalRecommendation:
    """Per temperature: one setting (or off) for a pool serving all its workloads, aggregated by
    decode time (`analysis.decide.recommend.pool_recommendation`), with the workloads ON and OFF."""
    out = []
    for temp in sorted({e.temperature for e in entries}):
        group = [e for e in entries if e.temperature == temp]
        if pool_inputs.get(temp):
            pool = pool_recommendation(temp, pool_inputs[temp], s.margin, s.ci_level, s.n_boot)
        else:  # every workload here lacks a verdict (e.g. degenerate output, docs/theory.md §13)
            pool = PoolDecision(
                temperature=temp,
                workloads=[],
                verdict="not_measured",
                gamma=0,
                speedup=None,
                reason="no workload at this temperature has a measured verdict",
                on_for=[],
                off_for=[],
                not_measured=[],
            )
        by_verdict: dict[str, list[str]] = {v: [] for v in ("on", "off", "not_measured")}
        for e in group:
            by_verdict.setdefault(e.recommendation.verdict, []).append(e.workload)
        pool.on_for = by_verdict["on"]
        pool.off_for = by_verdict["off"]
        pool.not_measured = by_verdict["not_measured"]
        out.append(pool)
    return GlobalRecommendation(by_temperature=out)
