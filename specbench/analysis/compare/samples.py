"""Per-prompt samples of one run's metrics (the unit of compare's tests) and stored summaries
(value and interval, when only results.json is given).

A sample's statistic is a ratio of sums over prompts, Σ num / Σ den (docs/theory.md §7); keys
pair a prompt (and repeat) across runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.analysis.acceptance import per_prompt


@dataclass(frozen=True)
class Samples:
    """Per-prompt (num, den): the statistic is Σ num / Σ den. Keys pair prompts across runs."""

    keys: tuple[str, ...]
    num: np.ndarray
    den: np.ndarray

    @property
    def value(self) -> float:
        d = float(self.den.sum())
        return float(self.num.sum()) / d if d else math.nan

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class Summary:
    """A stored estimate (results.json): value and its confidence interval."""

    value: float | None
    lo: float | None
    hi: float | None


def _key(rec: dict[str, Any]) -> str:
    return f"{rec['prompt_id']}#{rec.get('repeat', 0)}"


def _tps(rec: dict[str, Any]) -> float | None:
    tpot = rec.get("tpot_ms")
    return 1000.0 / tpot if tpot else None


def _samples(rows: list[tuple[str, float, float]]) -> Samples:
    return Samples(
        tuple(k for k, _, _ in rows),
        np.asarray([n for _, n, _ in rows], float),
        np.asarray([d for _, _, d in rows], float),
    )


def sum_by_key(parts: list[Samples]) -> Samples:
    """Add several per-prompt samples key by key (α pooled over several γ)."""
    acc: dict[str, list[float]] = {}
    for s in parts:
        for k, n, d in zip(s.keys, s.num, s.den, strict=True):
            cur = acc.setdefault(k, [0.0, 0.0])
            cur[0] += float(n)
            cur[1] += float(d)
    return _samples([(k, v[0], v[1]) for k, v in sorted(acc.items())])


def speedup_samples(baseline: list[dict[str, Any]], recs: list[dict[str, Any]]) -> Samples:
    """Per prompt: decode tokens/s with speculation (num) and without (den), same prompt."""
    base_tps = {_key(r): _tps(r) for r in baseline}
    return _samples(
        [
            (_key(r), v, b)
            for r in recs
            if (v := _tps(r)) is not None and (b := base_tps.get(_key(r))) is not None
        ]
    )


def group_samples(
    baseline: list[dict[str, Any]], specs: dict[int, list[dict[str, Any]]]
) -> dict[str, Samples]:
    """Per-prompt samples of every metric of one workload × temperature, keyed "name" or
    "name@γ" (α per γ as "alpha@γ"; compare pools α over the γ both runs measured)."""
    out = {
        "baseline_itl_ms": _samples(
            [(_key(r), r["tpot_ms"], 1.0) for r in baseline if r.get("tpot_ms")]
        ),
        "baseline_tokens_per_s": _samples(
            [(_key(r), v, 1.0) for r in baseline if (v := _tps(r)) is not None]
        ),
    }
    for g, recs in specs.items():
        pp = per_prompt(recs)
        keys = tuple(_key(r) for r in recs)
        out[f"alpha@{g}"] = sum_by_key([Samples(keys, pp.beta_sum, pp.verified)])
        out[f"accepted_length@{g}"] = sum_by_key(
            [Samples(keys, pp.rounds + pp.accepted, pp.rounds)]
        )
        out[f"itl_ms@{g}"] = _samples(
            [(_key(r), r["tpot_ms"], 1.0) for r in recs if r.get("tpot_ms")]
        )
        out[f"tokens_per_s@{g}"] = _samples(
            [(_key(r), v, 1.0) for r in recs if (v := _tps(r)) is not None]
        )
        out[f"speedup@{g}"] = speedup_samples(baseline, recs)
    return out


def setting_key(setting: str, gamma: int) -> str:
    """The metric key of the speedup of one drafter/policy setting at γ."""
    return f"speedup[{setting}]@{gamma}"
