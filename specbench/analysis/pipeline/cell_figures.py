"""What every backend's entry holds before and beside its verdict, as typed parts, and the one
place a results.json entry (`WorkloadResult`) is put together from them.

A backend analyses a workload × temperature into `CellFigures` (the baseline, the timing model,
α, the γ table, the engine section), decides (`analysis.decide.recommend`), checks the answers
(`analysis.decide.validity`), and `CellFigures.entry` builds the entry once those exist; the
pipeline then sets the fields it adds later (`adaptive`, `request_sampling`) by attribute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from specbench.analysis.decide.recommend import QuotedFigures
from specbench.analysis.documents.results_model_base import AlphaJSON, EstimateJSON
from specbench.analysis.documents.results_model_engine import EngineSection
from specbench.analysis.documents.results_model_workload import (
    AlphaEstimators,
    ContentCheck,
    FiguresBasis,
    MethodRow,
    PerPromptAlpha,
    PositionDetail,
    Recommendation,
    Timing,
    WorkloadResult,
)
from specbench.analysis.documents.settings import AnalysisSettings
from specbench.analysis.estimators.groups import Group
from specbench.analysis.estimators.predictions import GammaTable
from specbench.analysis.pipeline.prompt_basis import set_aside, without_prompts
from specbench.analysis.serving.serving_cost import entry_tails
from specbench.analysis.stats.resampling import Estimate
from specbench.analysis.stats.serialize import json_num


def alpha_json(e: Estimate, estimator: Literal["exact_beta", "accepted_tested"]) -> AlphaJSON:
    """The headline α with the estimator behind it (docs/theory.md §2)."""
    return AlphaJSON(
        value=json_num(e.value), ci95=(json_num(e.lo), json_num(e.hi)), estimator=estimator
    )


@dataclass(frozen=True)
class BaselineSummary:
    """The baseline's pooled ITL, mean TTFT and decode throughput."""

    itl_ms: EstimateJSON | None
    ttft_ms: EstimateJSON | None
    tokens_per_s: EstimateJSON | None


@dataclass(frozen=True)
class MeasuredAcceptance:
    """The acceptance parts an entry has only with a measured γ: every α estimator, a_i at the
    largest γ and the accepted-length histogram."""

    estimators: AlphaEstimators
    per_position: list[float | None]
    histogram: list[int]


@dataclass(frozen=True)
class TransformersDetail:
    """The parts only specbench's own decoding measures: every setting ranked, per-prompt α and
    per-position acceptance with intervals."""

    methods: list[MethodRow]
    per_prompt_alpha: PerPromptAlpha | None
    per_position_detail: list[PositionDetail]


@dataclass
class CellFigures:
    """One workload × temperature's figures before its verdict, for every backend.

    `table` is the γ table (`estimators.predictions.gamma_table`: its rows, prediction errors
    and optimum) and `engine` the engine section (`pipeline.serving_results`)."""

    n_prompts: int
    baseline: BaselineSummary
    baseline_step_ms: float | None
    baseline_peak_memory_mb: float | None
    timing: Timing
    alpha: AlphaJSON | None
    measured: MeasuredAcceptance | None
    table: GammaTable
    warnings: list[str]
    engine: EngineSection | None = None

    def quoted(self, methods: Sequence[MethodRow] = ()) -> QuotedFigures:
        """What a recommendation quotes of these figures: the baseline's ITL, each method's
        (`methods`: the transformers ranking), each γ row's, the model's optimum."""
        gamma_itl: dict[int, float | None] = {}
        for row in self.table.rows:
            if row.itl_ms is not None and row.gamma not in gamma_itl:
                gamma_itl[row.gamma] = row.itl_ms.value
        method_itl: dict[tuple[str, str, int], float | None] = {}
        for m in methods:
            method_itl.setdefault(
                (m.drafter, m.policy, m.gamma), m.itl_ms.value if m.itl_ms else None
            )
        base = self.baseline.itl_ms
        return QuotedFigures(
            base.value if base is not None else None,
            method_itl,
            gamma_itl,
            self.table.model_optimum,
        )

    def entry(
        self,
        cell: tuple[str, float],
        s: AnalysisSettings,
        recommendation: Recommendation,
        content: ContentCheck,
        basis: FiguresBasis,
        grp: Group,
        detail: TransformersDetail | None = None,
    ) -> WorkloadResult:
        """The results.json entry of `cell` (its group `grp`): these figures, the verdict and its
        content checks, and the latency tails over the prompts of the verdict (`prompt_basis`)."""
        fig_group = without_prompts(grp, set_aside(basis, content))
        # p50/p90/p99 latency (analysis.serving.serving_cost) of the measured γ rows and the
        # engine's concurrency cells, set before the entry validates them
        eng = self.engine
        tails = entry_tails(
            fig_group, s.primary_drafter, eng.reference_concurrency if eng is not None else None
        )
        for row in self.table.rows:
            if row.measured:
                row.tails = tails.gamma(row.gamma)
        for crow in eng.concurrency if eng is not None else []:
            crow.baseline.tails = tails.cell(crow.concurrency, 0)
            for g, gcell in crow.gammas.items():
                gcell.tails = tails.cell(crow.concurrency, int(g))
        entry = WorkloadResult(
            workload=cell[0],
            temperature=cell[1],
            weight=s.weight(cell[0]),
            n_prompts=self.n_prompts,
            baseline_itl_ms=self.baseline.itl_ms,
            baseline_step_ms=self.baseline_step_ms,
            ttft_ms=self.baseline.ttft_ms,
            baseline_tokens_per_s=self.baseline.tokens_per_s,
            baseline_peak_memory_mb=self.baseline_peak_memory_mb,
            timing=self.timing,
            alpha=self.alpha,
            warnings=self.warnings,
            content=content,
            figures_basis=basis,
            recommendation=recommendation,
            failed_units=len(fig_group["failed"]),
            gammas=self.table.rows,
            prediction_error=self.table.prediction_error,
            model_optimum=self.table.model_optimum,
            baseline_tails=tails.baseline,
        )
        if eng is not None:  # engine runs (`pipeline.serving_results`)
            entry.engine = eng
        if self.measured is not None:
            entry.alpha_estimators = self.measured.estimators
            entry.per_position_acceptance = self.measured.per_position
            entry.accepted_histogram = self.measured.histogram
        if detail is not None:
            entry.methods = detail.methods
            entry.per_prompt_alpha = detail.per_prompt_alpha
            entry.per_position_detail = detail.per_position_detail
        return entry
