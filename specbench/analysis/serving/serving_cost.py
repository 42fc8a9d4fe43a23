"""Tail latency and serving economics of a run: additive results.json fields (schema 2).

Tails (`tails` under each measured γ row, `baseline_tails` per entry, and per setting of an engine
run's concurrency rows): p50 / p90 / p99 of TTFT (first turn), TPOT and end-to-end latency over a
setting's requests, numpy's linear-interpolation percentile. A percentile p is reported only when
the sample holds at least 1 / (1 − p) requests (p90 ≥ 10, p99 ≥ 100; p50 ≥ 2): below that the
"tail" would be the sample's maximum, not a p-quantile. No interval: a tail is shown as measured.

Economics (`economics` at the top level), from the GPU-hour price and the GPUs serving the target
(`--gpu-hour-usd`, `--gpus`, or the config's `economics:` section), via the one cost formula
`analysis.arithmetic.roi.economics`:
- transformers runs (batch 1): USD per 10⁶ output tokens at the baseline's and at the recommended
  setting's decode ITL — for a workload that stays OFF, at its best measured γ's, what turning it
  on would cost (prefill excluded, as in `specbench roi`);
- engine runs, at each measured concurrency: USD per 10⁶ output tokens from the whole batch's
  output tokens/s, baseline and each γ;
- per workload also the TTFT change (mean over the same prompts, speculation − baseline) and the
  draft's memory as the CUDA peak-memory delta of the recommended γ over the baseline (null on
  CPU, where the process's peak RSS only grows and cannot separate the draft; engine runs: null).

The draft's memory (`draft_memory`, `kv_capacity` at the top of `economics`), from env.json's
`memory`: each draft's weights and KV bytes per token (the transformers runner's loaded models;
engine runs: computed from config.json and the safetensors headers, `source: "computed"`), and
for engine runs the KV-cache capacity in tokens each engine reported (`source: "engine"`) and
the share of it that speculation takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from specbench.analysis.arithmetic.roi import economics
from specbench.analysis.documents.results_model import (
    CostAtLoad,
    DraftMemory,
    Economics,
    KvCapacity,
    KvCapacityAtGamma,
    RunEnv,
    WorkloadEconomics,
)
from specbench.analysis.documents.results_model_base import LatencyTails, Percentiles
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.analysis.estimators.groups import Group
from specbench.analysis.stats.serialize import json_num
from specbench.config.stored import StoredEconomics
from specbench.record_line import RecordLine

PERCENTILES = (50, 90, 99)


def _percentiles(values: list[float]) -> Percentiles:
    arr = np.asarray([v for v in values if v is not None], float)
    out: dict[str, float | None] = {}
    for p in PERCENTILES:
        enough = len(arr) >= max(2, int(np.ceil(1.0 / (1.0 - p / 100.0) - 1e-9)))
        out[f"p{p}"] = json_num(float(np.percentile(arr, p))) if enough else None
    return Percentiles(p50=out["p50"], p90=out["p90"], p99=out["p99"])


def latency_tails(recs: list[RecordLine]) -> LatencyTails | None:
    """p50/p90/p99 of TTFT (first turn), TPOT and e2e (ms) over requests; None without records."""
    ok = [r for r in recs if r.get("status", "ok") == "ok"]
    if not ok:
        return None
    return LatencyTails(
        n=len(ok),
        ttft_ms=_percentiles([r["ttft_ms"][0] for r in ok if r.get("ttft_ms")]),
        tpot_ms=_percentiles([x for r in ok if (x := r.get("tpot_ms"))]),
        e2e_ms=_percentiles([r["wall_ms"] for r in ok if r.get("wall_ms") is not None]),
    )


def _conc(r: RecordLine) -> int:
    return int(r.get("concurrency", 1))


@dataclass(frozen=True)
class EntryTails:
    """The tails of one analysed entry (`entry_tails`): the baseline's (`baseline_tails`), each γ's
    for the entry's γ rows (`gammas[].tails`), and for engine runs each (concurrency, γ) cell's,
    γ = 0 the baseline (`engine.concurrency[].baseline.tails` / `.gammas[γ].tails`)."""

    baseline: LatencyTails | None
    by_gamma: dict[int, LatencyTails | None]
    by_cell: dict[tuple[int, int], LatencyTails | None]

    def gamma(self, g: int) -> LatencyTails | None:
        return self.by_gamma.get(g)

    def cell(self, c: int, g: int) -> LatencyTails | None:
        return self.by_cell.get((c, g))


def entry_tails(grp: Group, primary: str | None, c_ref: int | None) -> EntryTails:
    """The tails of an analysed entry (`EntryTails`): γ rows from the primary drafter at a fixed
    γ, or for engine runs (`c_ref`: the engine section's reference concurrency, None for the
    transformers backend) every setting at that γ at the reference concurrency; and for engine
    runs every (concurrency, γ) cell measured."""
    engine = c_ref is not None

    def spec_at(g: int, c: int | None) -> list[RecordLine]:
        return [
            r
            for (drafter, policy, gamma), rs in grp["spec"].items()
            if gamma == g and (engine or (drafter == primary and policy == "fixed"))
            for r in rs
            if c is None or _conc(r) == c
        ]

    gammas = sorted({key[2] for key in grp["spec"]})
    base = [r for r in grp["baseline"] if not engine or _conc(r) == c_ref]
    by_cell: dict[tuple[int, int], LatencyTails | None] = {}
    if engine:
        levels = sorted({_conc(r) for r in grp["baseline"]} | {
            _conc(r) for rs in grp["spec"].values() for r in rs
        })  # fmt: skip
        for c in levels:
            by_cell[(c, 0)] = latency_tails([r for r in grp["baseline"] if _conc(r) == c])
            by_cell.update({(c, g): latency_tails(spec_at(g, c)) for g in gammas})
    return EntryTails(
        latency_tails(base), {g: latency_tails(spec_at(g, c_ref)) for g in gammas}, by_cell
    )


def _mean_ttft_by_prompt(recs: list[RecordLine]) -> dict[tuple[str, int], float]:
    by: dict[tuple[str, int], list[float]] = {}
    for r in recs:
        if r.get("ttft_ms"):
            by.setdefault((r["prompt_id"], r.get("repeat", 0)), []).append(r["ttft_ms"][0])
    return {k: float(np.mean(v)) for k, v in by.items()}


def _usd(
    itl_off: float | None, itl_on: float | None, price: float | None, gpus: int
) -> tuple[float | None, float | None]:
    """(off, on) USD per 10⁶ output tokens; a side without a measured time is None."""

    def one(itl: float | None) -> float | None:
        if price is None or not itl:
            return None
        return json_num(economics(itl, itl, price, gpus).usd_per_million_tokens_off)

    return one(itl_off), one(itl_on)


class _Footprint(BaseModel):
    """One model's profile in env.json's `memory` (the harness writes it; other keys ignored)."""

    model_config = ConfigDict(extra="ignore")

    weight_bytes: int | float | None = None
    kv_bytes_per_token: int | float | None = None
    source: Literal["loaded", "computed"] | None = "loaded"


class _KvReport(BaseModel):
    """One engine's reported KV-cache capacity (`harness.serving.metrics.engine_memory`)."""

    model_config = ConfigDict(extra="ignore")

    gamma: int
    tokens: int
    label: str | None = None


class MemoryProfile(BaseModel):
    """env.json's `memory` as this module reads it: the target's and each draft's footprint and
    the engines' KV-cache capacities. Read once from the env.json section (`of`)."""

    model_config = ConfigDict(extra="ignore")

    target: _Footprint | None = None
    drafts: dict[str, _Footprint] | None = None
    kv_capacity: list[_KvReport] | None = None

    @classmethod
    def of(cls, env: RunEnv) -> MemoryProfile:
        return cls.model_validate(env.memory or {})


def draft_memory(env: RunEnv) -> dict[str, DraftMemory] | None:
    """What each draft costs in memory (docs/theory.md §12), from env.json's model profiles:
    its weights, its own KV cache per token, and the target-KV capacity it takes — the tokens of
    target KV cache its weights would otherwise hold, and the share of each sequence's cache that
    the draft's KV adds (draft / (target + draft) KV bytes per token). `source`: "computed" for
    an engine run's profiles (config.json and safetensors headers), "loaded" for the transformers
    runner's (the loaded parameters)."""
    mem = MemoryProfile.of(env)
    target = mem.target or _Footprint()
    t_kv = target.kv_bytes_per_token
    t_w = target.weight_bytes
    out = {}
    for label, d in (mem.drafts or {}).items():
        d_kv = d.kv_bytes_per_token
        d_w = d.weight_bytes
        out[label] = DraftMemory(
            weights_mib=json_num(d_w / 2**20) if d_w is not None else None,
            weights_share_of_target=json_num(d_w / t_w) if d_w is not None and t_w else None,
            kv_kib_per_token=json_num(d_kv / 1024) if d_kv else None,
            target_kv_tokens_displaced=int(d_w // t_kv) if d_w is not None and t_kv else None,
            kv_share_per_sequence=json_num(d_kv / (t_kv + d_kv)) if t_kv and d_kv else None,
            source=d.source,
        )
    return out or None


def kv_capacity_taken(env: RunEnv) -> KvCapacity | None:
    """The KV-cache capacity speculation takes, from the capacities the engines reported
    (env.json `memory.kv_capacity`, `harness.serving.metrics.engine_memory`): per γ, the capacity in
    tokens of the speculative engine, and (capacity off − capacity on) / capacity off against the
    engine without speculation — the draft's weights and its own KV cache, as the engine sized
    them. None when no engine reported its capacity."""
    caps = MemoryProfile.of(env).kv_capacity or []
    if not caps:
        return None
    base = next((c.tokens for c in caps if c.gamma == 0), None)
    by_gamma = {}
    for c in sorted(caps, key=lambda c: c.gamma):
        if c.gamma == 0:
            continue
        taken = base - c.tokens if base else None
        by_gamma[str(c.gamma)] = KvCapacityAtGamma(
            label=c.label,
            tokens=c.tokens,
            taken_tokens=taken,
            taken_share=json_num(taken / base) if taken is not None and base else None,
        )
    return KvCapacity(source="engine", baseline_tokens=base, by_gamma=by_gamma)


def _loads(
    e: WorkloadResult, gamma: int | None, price: float | None, gpus: int
) -> list[CostAtLoad]:
    """The cost per 10⁶ output tokens off and on at each measured load of one entry."""
    rec, eng = e.recommendation, e.engine
    if eng is not None:
        loads = []
        for crow in eng.concurrency:
            cell = crow.gammas.get(str(gamma)) if gamma else None
            tp_off = crow.baseline.output_tokens_per_s
            tp_on = cell.output_tokens_per_s if cell is not None else None
            # a batch's cost per token is its time per token: 1000 / tokens-per-s ms
            off, on = _usd(
                1000.0 / tp_off if tp_off else None,
                1000.0 / tp_on if tp_on else None,
                price,
                gpus,
            )
            loads.append(
                CostAtLoad(
                    concurrency=crow.concurrency,
                    usd_per_million_off=off,
                    usd_per_million_on=on,
                    basis="batch output tokens/s",
                )
            )
        return loads
    grow = next((g for g in e.gammas if g.gamma == gamma), None)
    off_itl = (rec.itl_ms.baseline if rec.itl_ms else None) or (
        e.baseline_itl_ms.value if e.baseline_itl_ms else None
    )
    # ON: the recommended setting; OFF: the best measured γ (what turning it on costs)
    if rec.verdict == "on":
        on_itl = rec.itl_ms.speculative if rec.itl_ms else None
    else:
        on_itl = grow.itl_ms.value if grow is not None and grow.itl_ms else None
    off, on = _usd(off_itl, on_itl, price, gpus)
    return [
        CostAtLoad(
            concurrency=1,
            usd_per_million_off=off,
            usd_per_million_on=on,
            basis="batch-1 decode ITL",
        )
    ]


def _ttft_change(grp: Group | None, gamma: int | None, c_ref: int | None) -> float | None:
    """Mean TTFT change (speculation − baseline, ms) over the prompts both measured; engine runs
    (`c_ref` set) at the reference concurrency."""
    if grp is None or not gamma:
        return None
    base = _mean_ttft_by_prompt([r for r in grp["baseline"] if c_ref is None or _conc(r) == c_ref])
    spec = _mean_ttft_by_prompt(
        [
            r
            for (_, _, g), rs in grp["spec"].items()
            if g == gamma
            for r in rs
            if c_ref is None or _conc(r) == c_ref
        ]
    )
    common = sorted(set(base) & set(spec), key=str)
    return json_num(float(np.mean([spec[k] - base[k] for k in common]))) if common else None


def economics_section(
    entries: Sequence[WorkloadResult],
    groups: Mapping[tuple[str, float], Group],
    settings: StoredEconomics | None,
    env: RunEnv,
) -> Economics:
    """The `economics` block: inputs, and per workload × temperature the cost per 10⁶ output
    tokens with and without speculation at each measured load, the TTFT change and draft memory;
    the draft's memory and, for engine runs that report it, the KV capacity speculation takes."""
    price = settings.gpu_hour_usd if settings else None
    gpus = int((settings.gpus if settings else None) or 1)
    device = env.device
    measurable = device is not None and str(device).startswith("cuda")
    rows = []
    for e in entries:
        rec = e.recommendation
        gamma = rec.gamma or (rec.best_measured.gamma if rec.best_measured else None)
        grow = next((g for g in e.gammas if g.gamma == gamma), None)
        base_mem = e.baseline_peak_memory_mb
        on_mem = grow.peak_memory_mb if grow is not None else None
        c_ref = e.engine.reference_concurrency if e.engine is not None else None
        rows.append(
            WorkloadEconomics(
                workload=e.workload,
                temperature=e.temperature,
                gamma=gamma,
                verdict=rec.verdict,
                loads=_loads(e, gamma, price, gpus),
                ttft_change_ms=_ttft_change(groups.get((e.workload, e.temperature)), gamma, c_ref),
                draft_memory_mb=json_num(on_mem - base_mem)
                if measurable and on_mem is not None and base_mem is not None
                else None,
            )
        )
    return Economics(
        gpu_hour_usd=price,
        gpus=gpus,
        by_workload=rows,
        draft_memory=draft_memory(env),
        kv_capacity=kv_capacity_taken(env),
    )
