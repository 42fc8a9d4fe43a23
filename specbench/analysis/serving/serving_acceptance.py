"""Acceptance of an engine run (`backend: vllm` / `openai`) from the engine's spec-decode
counters, with specbench's estimators (docs/theory.md §2):

- accepted / tested (the iid MLE), accepted / proposed, the mean accepted length τ and α solved
  from it, the per-position conditional curve and its truncation (docs/theory.md §3);
- intervals over the units — prompts when the engine reported each request's acceptance (any
  concurrency) or the counters were read per request (concurrency 1), else batches — each a
  ratio of sums with the sign-flip test inverted (docs/theory.md §7, §8): unbounded (a rate's
  range [0, 1]) below 6 units. Counters found polluted by other traffic are left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis.arithmetic import roi
from specbench.analysis.documents.results_model_base import est_model
from specbench.analysis.documents.results_model_engine import EngineGammaCounters
from specbench.analysis.serving.spec_counters import SpecCounters, estimates
from specbench.analysis.stats.resampling import Estimate
from specbench.analysis.stats.serialize import json_num
from specbench.analysis.stats.signflip import rate_estimate, ratio_estimate
from specbench.record_line import RecordLine

Record = RecordLine
UnitKey = Any  # (prompt id, repeat) per request, (concurrency, repeat) per batch


def concurrency_of(rec: Record) -> int:
    return int(rec.get("concurrency", 1))


def counter_arrays(units: Sequence[SpecCounters], gamma: int) -> dict[str, np.ndarray]:
    """Per-unit arrays (prompt or batch) of the counters at γ; `tested` (accepted + rejections)
    needs the per-position counters, NaN without them."""
    per = np.asarray(
        [list(u.per_pos[:gamma]) + [0.0] * (gamma - len(u.per_pos[:gamma])) for u in units], float
    ).reshape(len(units), gamma)
    drafts = np.asarray([u.drafts for u in units], float)
    accepted = np.asarray([u.accepted for u in units], float)
    has_per = all(len(u.per_pos) >= gamma for u in units)
    tested = accepted + drafts - per[:, gamma - 1] if has_per else np.full(len(units), np.nan)
    return {
        "drafts": drafts,
        "draft_tokens": np.asarray([u.draft_tokens for u in units], float),
        "accepted": accepted,
        "tested": tested,
        "per_pos": per if has_per else np.empty((len(units), 0)),
    }


def counter_estimators(
    units: Sequence[SpecCounters], gamma: int, n_boot: int, level: float, source: str
) -> EngineGammaCounters:
    """specbench's estimators with bootstrap intervals over the units (prompts or batches), the
    units' counters read from `source` (`counter_units`)."""
    a = counter_arrays(units, gamma)
    tau = ratio_estimate(a["accepted"] + a["drafts"], a["drafts"], level)  # tokens / rounds

    def solve(t: float) -> float:
        if not math.isfinite(t):
            return math.nan
        return roi.alpha_from_accepted(min(max(t, 1.0), gamma + 1.0), gamma)

    per_pos = a["per_pos"]
    conditional = []
    for i in range(per_pos.shape[1]):
        den = a["drafts"] if i == 0 else per_pos[:, i - 1]
        conditional.append(
            est_model(rate_estimate(per_pos[:, i], den, level)) if den.sum() > 0 else None
        )
    total = units[0]
    for u in units[1:]:
        total = total.plus(u)
    point = estimates(total, gamma)
    return EngineGammaCounters(
        gamma=gamma,
        units=len(units),
        rounds=json_num(float(a["drafts"].sum())),
        mean_accepted_length=est_model(tau),
        accepted_proposed=est_model(rate_estimate(a["accepted"], a["draft_tokens"], level)),
        accepted_tested=est_model(rate_estimate(a["accepted"], a["tested"], level))
        if per_pos.shape[1]
        else None,
        from_accepted_length=est_model(Estimate(solve(tau.value), solve(tau.lo), solve(tau.hi))),
        per_position=conditional,
        per_position_rate=[json_num(x) if x is not None else None for x in point.per_position_rate],
        histogram=point.histogram,
        truncation={str(g): json_num(v) for g, v in point.truncation.items()},
        counters=total.to_json(),
        source=source,
    )


def counter_units(
    recs: Sequence[Record], metrics: Sequence[Record], c_ref: int
) -> tuple[list[tuple[UnitKey, SpecCounters]], str]:
    """(unit key, counters) and the source, the first available of:
    - "per_request_response": the engine's own per-request figures (`response_spec`, read from
      each response by harness/serving/metrics/request_metrics.py) at the reference concurrency, whatever
      it is, so the prompts are the bootstrap units at concurrency > 1 too;
    - "per_request_counters": counter deltas read around each request (concurrency 1);
    - "batch_counters": counter deltas per batch;
    leaving out counters found polluted by other traffic (docs/theory.md §17); "polluted" when
    every counter was, "unavailable" when the engine reported none."""
    at_ref = [r for r in recs if concurrency_of(r) == c_ref]
    response = [(r, x) for r in at_ref if (x := r.get("response_spec"))]
    if response and len(response) == len(at_ref):
        keyed = [(_prompt_key(r), SpecCounters.from_dict(x)) for r, x in response]
        return keyed, "per_request_response"
    per_request = [
        (_prompt_key(r), SpecCounters.from_dict(x))
        for r in at_ref
        if (x := r.get("spec_counters")) and not r.get("counters_polluted")
    ]
    if per_request:
        return per_request, "per_request_counters"
    # a resumed batch adds a partial metrics record for the rest of its prompts: one unit per
    # (concurrency, repeat), its counters summed
    by_batch: dict[UnitKey, SpecCounters] = {}
    polluted = False
    for m in metrics:
        counters = m.get("spec_counters")
        if counters and m.get("counters_polluted"):
            polluted = True
        elif counters:
            key = (concurrency_of(m), m.get("repeat", 0))
            c = SpecCounters.from_dict(counters)
            by_batch[key] = by_batch[key].plus(c) if key in by_batch else c
    batches = list(by_batch.items())
    if batches:
        return batches, "batch_counters"
    return batches, ("polluted" if polluted else "unavailable")


def request_counts(r: Record) -> SpecCounters | None:
    """A request's own acceptance counts: the engine's per-request figures, else its counter
    deltas unless they were polluted; None without either."""
    if response := r.get("response_spec"):
        return SpecCounters.from_dict(response)
    if (counters := r.get("spec_counters")) and not r.get("counters_polluted"):
        return SpecCounters.from_dict(counters)
    return None


def _prompt_key(r: Record) -> UnitKey:
    return (r["prompt_id"], r.get("repeat", 0))


def polluted_batches(metrics: Sequence[Record]) -> int:
    """How many batches' counter deltas showed other traffic (docs/theory.md §17)."""
    return sum(1 for m in metrics if m.get("counters_polluted"))


def pooled_alpha(
    per_gamma_units: Sequence[tuple[list[tuple[UnitKey, SpecCounters]], int]],
    n_boot: int,
    level: float,
) -> Estimate | None:
    """accepted / tested with prompts as the units, a prompt's counts summed over the γ it was
    run at (per-request counters only; None without them)."""
    rows = []
    for keyed, gamma in per_gamma_units:
        arr = counter_arrays([u for _, u in keyed], gamma)
        if np.isfinite(arr["tested"]).all():
            rows += [
                (key, acc, tst)
                for (key, _), acc, tst in zip(keyed, arr["accepted"], arr["tested"], strict=True)
            ]
    if not rows:
        return None
    frame = pd.DataFrame(
        {
            "key": [k for k, _, _ in rows],
            "accepted": [a for _, a, _ in rows],
            "tested": [t for _, _, t in rows],
        }
    )
    per_prompt = frame.groupby("key", sort=False)[["accepted", "tested"]].sum()
    return rate_estimate(
        per_prompt["accepted"].to_numpy(float), per_prompt["tested"].to_numpy(float), level
    )
