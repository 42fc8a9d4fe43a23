"""Predicted throughput by batch size (docs/theory.md §18): the transformers backend's batched
forward timings (`batch_timing` records) combined with the per-prompt acceptance of its batch-1
run. A prediction, never a measurement: no engine ran these batches.

Per workload × temperature, for each timed batch size b and γ of the grid (γ = 0: no speculation):

    step(b, γ)        = γ·T_d(b) + T_t(b, γ)                       (T: medians over repetitions)
    ā_pool(γ)         = Σ_p L_p / Σ_p (L_p / ā_p(γ))               (§3, ā_p by truncation of
                                                                    the γ_max run's rounds, each
                                                                    turn walked down its budget)
    throughput(b, γ)  = b · ā_pool(γ) / step(b, γ)                 tokens/s, all b sequences
    throughput(b, 0)  = b / T_t(b, 0)                              one token per sequence a step
    speedup(b, γ)     = throughput(b, γ) / throughput(b, 0) = ā_pool(γ) · T_t(b, 0) / step(b, γ)

The intervals resample prompts (ā_pool is a ratio of sums over prompts, §7); the timings are
taken as exact, so the interval says how well the acceptance is known, not the timing noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.analysis.arithmetic.roi import pooled_tokens_per_round
from specbench.analysis.documents.results_model_base import EstimateJSON, est_model
from specbench.analysis.documents.results_model_batch import (
    BatchPrediction,
    PredictedCell,
    PredictionEntry,
)
from specbench.analysis.estimators.acceptance import prompt_truncation
from specbench.analysis.estimators.groups import Group, GroupKey
from specbench.analysis.stats.resampling import Estimate, ratio_ci
from specbench.record_line import RecordLine

BATCH_TIMING_KIND = "batch_timing"


@dataclass(frozen=True)
class StepCosts:
    """One workload's batched forward costs, milliseconds (medians over repetitions)."""

    draft_ms: dict[int, float]  # b → T_d(b)
    verify_ms: dict[tuple[int, int], float]  # (b, γ) → T_t(b, γ); γ = 0 is the decode step
    context_len: int
    repeats: int

    @property
    def batch_sizes(self) -> list[int]:
        return sorted(self.draft_ms)

    def step_ms(self, b: int, gamma: int) -> float:
        """γ·T_d(b) + T_t(b, γ): one engine step with b sequences at draft length γ."""
        return gamma * self.draft_ms[b] + self.verify_ms[(b, gamma)]


def step_costs(records: Sequence[RecordLine]) -> dict[str, StepCosts]:
    """Per workload, the median of each batched forward over its `batch_timing` records (the
    draft step by batch size, the verify forward by batch size × γ; context of the last one)."""
    timed = pd.DataFrame(
        [r for r in records if r.get("kind") == BATCH_TIMING_KIND],
        columns=["workload", "batch_size", "draft_ms", "context_len", "gammas", "verify_ms"],
    )
    # one row per verify forward timed: (workload, b, γ, ms)
    verify = timed.explode(["gammas", "verify_ms"]).astype({"gammas": int, "verify_ms": float})
    out = {}
    for w, rows in timed.groupby("workload", sort=False):
        draft = rows.groupby("batch_size")["draft_ms"].agg(["median", "size"])
        ver = verify[verify["workload"] == w].groupby(["batch_size", "gammas"], as_index=False)
        out[str(w)] = StepCosts(
            {int(b): float(ms) for b, ms in zip(draft.index, draft["median"], strict=True)},
            {
                (int(b), int(g)): float(ms)
                for b, g, ms in ver["verify_ms"].median().itertuples(False)
            },
            int(rows["context_len"].iloc[-1]),
            int(draft["size"].min()),
        )
    return out


def throughput_per_step(accept_lengths: Sequence[float] | np.ndarray, step_time_s: float) -> float:
    """Σ_i ā_i / step time: tokens per second of one step over the sequences in it (§18)."""
    return float(np.sum(np.asarray(accept_lengths, float)) / step_time_s)


def predicted_throughput(tokens_per_step: float, batch_size: int, step_ms: float) -> float:
    """b · ā / step(b, γ), tokens/s: b sequences each emitting ā tokens per step on average."""
    return throughput_per_step(np.full(batch_size, tokens_per_step), step_ms / 1000.0)


@dataclass(frozen=True)
class PromptTokens:
    """Per prompt of the γ_max run: tokens L_p and ā_p(γ) for γ = 1..γ_max (NaN: no full round)."""

    lengths: np.ndarray  # (P,)
    expected: np.ndarray  # (P, γ_max)
    prompt_ids: list[str]

    def pooled(self, gamma: int, n_boot: int, level: float) -> Estimate:
        """ā_pool(γ) with its prompt-resampled interval (γ = 0: exactly 1)."""
        if gamma == 0:
            return Estimate(1.0, 1.0, 1.0)
        per = self.expected[:, gamma - 1]
        keep = np.isfinite(per) & (per > 0) & (self.lengths > 0)
        if not keep.any():
            return Estimate(float("nan"), float("nan"), float("nan"))
        value = pooled_tokens_per_round(self.lengths[keep], per[keep])
        ids = [p for p, k in zip(self.prompt_ids, keep, strict=True) if k]
        est = ratio_ci(
            self.lengths[keep], self.lengths[keep] / per[keep], n_boot, level, clusters=ids
        )
        return Estimate(value, est.lo, est.hi)


def prompt_tokens(spec_records: Sequence[RecordLine], gamma_max: int) -> PromptTokens:
    recs = [r for r in spec_records if r.get("rounds")]
    pt = prompt_truncation(recs, gamma_max)
    return PromptTokens(pt.lengths, pt.expected, [str(r["prompt_id"]) for r in recs])


def _scaled(est: Estimate, factor: float) -> EstimateJSON:
    return est_model(Estimate(est.value * factor, est.lo * factor, est.hi * factor))


def predict_cells(
    costs: StepCosts, tokens: PromptTokens, gammas: Sequence[int], n_boot: int, level: float
) -> list[PredictedCell]:
    """One row per (b, γ), γ = 0 included: step time, ā_pool, throughput and speedup vs off."""
    rows = []
    pooled = {g: tokens.pooled(g, n_boot, level) for g in [0, *gammas]}
    for b in costs.batch_sizes:
        off_ms = costs.verify_ms[(b, 0)]
        for g in [0, *gammas]:
            if (b, g) not in costs.verify_ms:
                continue
            step = costs.step_ms(b, g)
            a = pooled[g]
            rows.append(
                PredictedCell(
                    batch_size=b,
                    gamma=g,
                    draft_ms=costs.draft_ms[b],
                    verify_ms=costs.verify_ms[(b, g)],
                    step_ms=step,
                    tokens_per_step=est_model(a),
                    throughput_tokens_per_s=_scaled(a, b * 1000.0 / step),
                    speedup_vs_off=_scaled(a, off_ms / step),
                )
            )
    return rows


def best_gamma(cells: Sequence[PredictedCell]) -> dict[str, int]:
    """Per batch size, the γ (0 = off) with the highest predicted throughput (point estimates;
    the first γ on a tie)."""
    frame = pd.DataFrame(
        [(c.batch_size, c.gamma, c.throughput_tokens_per_s.value) for c in cells],
        columns=["batch_size", "gamma", "throughput"],
    ).dropna()
    best = frame.loc[frame.groupby("batch_size")["throughput"].idxmax()]
    return {str(b): int(g) for b, g in zip(best["batch_size"], best["gamma"], strict=True)}


def batch_prediction(
    records: Sequence[RecordLine],
    groups: Mapping[GroupKey, Group],
    primary_drafter: str,
    n_boot: int,
    level: float,
) -> BatchPrediction | None:
    """results.json's `batch_prediction` (None without batch_timing records): per workload ×
    temperature, the predicted cells from the primary drafter's fixed-γ γ_max run."""
    costs = step_costs(records)
    if not costs:
        return None
    entries = []
    for (workload, temp), grp in groups.items():
        if workload not in costs:
            continue
        fixed = {
            k[2]: recs
            for k, recs in grp["spec"].items()
            if k[0] == primary_drafter and k[1] == "fixed" and recs
        }
        timed = sorted({g for (_, g) in costs[workload].verify_ms if g > 0})
        if not fixed or not timed:
            continue
        gamma_max = max(fixed)
        tokens = prompt_tokens(fixed[gamma_max], gamma_max)
        gammas = [g for g in timed if g <= gamma_max]
        cells = predict_cells(costs[workload], tokens, gammas, n_boot, level)
        entries.append(
            PredictionEntry(
                workload=workload,
                temperature=temp,
                gamma_max=gamma_max,
                context_len=costs[workload].context_len,
                repeats=costs[workload].repeats,
                prompts=len(set(tokens.prompt_ids)),
                cells=cells,
                best_gamma=best_gamma(cells),
            )
        )
    return BatchPrediction(
        kind="prediction",
        basis="batched forward timings (transformers backend) × per-prompt acceptance of the "
        "batch-1 run; no engine ran these batches (docs/theory.md §18)",
        entries=entries,
    )
