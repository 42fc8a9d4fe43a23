"""From teacher-forced scores to `specbench accept`'s result: α per bucket and the rollout plan
each implies (analysis/rollout.py), the timing model each bucket is planned with, and the
labels under which the sampling settings are reported. numpy only: the scores come in from
decoding/teacher_forced.py, this module never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from specbench.analysis import rollout
from specbench.analysis.documents.accept_model import LoggedSetting, SamplingSetting
from specbench.analysis.documents.results_read import read_timing_source
from specbench.analysis.rollout.timing import ForwardLatency
from specbench.errors import malformed_file

OVERALL = "(all)"  # the bucket of every request together

TimeModelFor = Callable[[str | None], rollout.TimeModel]  # bucket (None: overall) → timing


class Sampling(Protocol):
    """A sampling setting as `spec.sampling.SamplingParams` holds it."""

    @property
    def temperature(self) -> float: ...
    @property
    def top_k(self) -> int: ...
    @property
    def top_p(self) -> float: ...
    @property
    def greedy(self) -> bool: ...


class BucketScores(Protocol):
    """One request's scores (`spec.teacher_forced.RequestScores` fits): its index and what
    `rollout.Scored` reads."""

    @property
    def request(self) -> int: ...
    @property
    def positions(self) -> np.ndarray: ...
    @property
    def beta(self) -> np.ndarray: ...
    @property
    def agree(self) -> np.ndarray: ...
    @property
    def target_nll(self) -> np.ndarray: ...


def setting_label(p: Sampling) -> str:
    """'T=0.7 top-p=0.9': how a setting is named in tables and accept.json."""
    parts = [f"T={p.temperature:g}"]
    if not p.greedy and p.top_p < 1:
        parts.append(f"top-p={p.top_p:g}")
    if not p.greedy and p.top_k > 0:
        parts.append(f"top-k={p.top_k}")
    return " ".join(parts)


def settings_meta(
    settings: Sequence[Sampling], logged_requests: int | None
) -> list[SamplingSetting | LoggedSetting]:
    """accept.json's `settings`: each setting, then 'logged' when requests carry their own."""
    out: list[SamplingSetting | LoggedSetting] = [
        SamplingSetting(
            label=setting_label(p), temperature=p.temperature, top_p=p.top_p, top_k=p.top_k
        )
        for p in settings
    ]
    if logged_requests is not None:
        out.append(LoggedSetting(label="logged", requests=logged_requests))
    return out


def time_model_resolver(
    timings: Path | None,
    t_target: float | None,
    t_draft: float | None,
    verify_slope: float,
    cost_ratio: float | None,
    measured: ForwardLatency | None,
    default_cost_ratio: float,
) -> TimeModelFor:
    """bucket → TimeModel from exactly one timing source (validated by the caller): a run's
    results.json (per workload where it has one), timings measured here, --t-target/--t-draft,
    --cost-ratio, else `default_cost_ratio` (the plan is then provisional)."""
    if timings is not None:
        path = timings / "results.json" if timings.is_dir() else timings
        # the schema version and the fields accept reads, typed (one line naming the field)
        results = read_timing_source(path)
        try:  # fail now, not per bucket
            rollout.time_model_from_results(results, None, str(path))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise malformed_file(path, exc, "results.json") from None
        return lambda bucket: rollout.time_model_from_results(results, bucket, str(path))
    if measured is not None:
        tm = rollout.time_model_from_measurement(measured)
    elif t_target is not None and t_draft is not None:
        tm = rollout.time_model_from_flags(t_target, t_draft, verify_slope)
    elif cost_ratio is not None:
        tm = rollout.time_model_relative(cost_ratio, verify_slope, "flags")
    else:
        tm = rollout.time_model_relative(default_cost_ratio, verify_slope, "default")
    return lambda _bucket: tm


def plan_buckets(
    scores: Sequence[BucketScores],
    bucket_of: Sequence[str],
    labels: Sequence[str],
    edges: Sequence[int],
    time_model_for: TimeModelFor,
    n_boot: int,
    level: float,
    target_halfwidth: float,
    gamma_max: int,
    margin: float,
) -> tuple[list[rollout.BucketResult], rollout.BucketResult]:
    """(per bucket, overall): α per setting with its CI and position profile, and the rollout
    plan at each bucket's timing. `bucket_of[i]` is request i's bucket; buckets keep the order
    in which their first request appears."""
    by_bucket: dict[str, list[BucketScores]] = {}
    for s in scores:
        by_bucket.setdefault(bucket_of[s.request], []).append(s)

    def summarize(
        name: str, scored: Sequence[rollout.Scored], tm: rollout.TimeModel
    ) -> rollout.BucketResult:
        acc = rollout.summarize_bucket(name, scored, labels, edges, n_boot, level, target_halfwidth)
        return rollout.bucket_result(acc, tm, gamma_max, margin, target_halfwidth)

    buckets = [summarize(b, sc, time_model_for(b)) for b, sc in by_bucket.items()]
    return buckets, summarize(OVERALL, scores, time_model_for(None))
