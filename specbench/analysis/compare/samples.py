"""Per-prompt samples of one run's metrics (the unit of compare's tests) and stored summaries
(value and interval, when only results.json is given).

A sample's statistic is a product of powers of sums over prompts, S = Π_j (Σ_p x_jp)^{c_j}
(docs/theory.md §7): a ratio Σ num / Σ den for α and τ, timing pooled over prompts (Σ decode ms
/ Σ decode tokens), and for the speedup the ratio of pooled decode throughputs paired by prompt —
the report's conventions, through the same functions (`analysis/estimators/latency.py`, docs/theory.md §9).
Keys pair a prompt (and repeat) across runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.analysis.estimators.acceptance import per_prompt
from specbench.analysis.estimators.latency import decode_tokens_ms, pair
from specbench.analysis.stats.resampling import THROUGHPUT_RATIO_COEFS
from specbench.record_line import RecordLine

RATIO = (1.0, -1.0)  # Σ num / Σ den


def pooled(sums: Sequence[Any], coefs: Sequence[float]) -> Any:
    """Π_j sums_j^{c_j} of scalars or of arrays of bootstrap resamples alike; c = ±1 multiplies
    or divides, so a ratio is exactly Σ num / Σ den."""
    out: Any = 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        for s, c in zip(sums, coefs, strict=True):
            out = out * s if c == 1 else out / s if c == -1 else out * np.power(s, c)
    return out


@dataclass(frozen=True)
class Samples:
    """Per-prompt arrays x_j (aligned with `keys`) of the statistic Π_j (Σ x_j)^{c_j}."""

    keys: tuple[str, ...]
    arrays: tuple[np.ndarray, ...]
    coefs: tuple[float, ...] = RATIO

    @property
    def value(self) -> float:
        sums = [float(a.sum()) for a in self.arrays]
        if any(s == 0 for s, c in zip(sums, self.coefs, strict=True) if c < 0):
            return math.nan
        return float(pooled(sums, self.coefs))

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class Summary:
    """A stored estimate (results.json): value and its confidence interval."""

    value: float | None
    lo: float | None
    hi: float | None


def _key(rec: RecordLine) -> str:
    return f"{rec['prompt_id']}#{rec.get('repeat', 0)}"


def timing_samples(recs: list[RecordLine]) -> tuple[Samples, Samples]:
    """(ITL ms, decode tokens/s) pooled over prompts as the report pools them: Σ decode ms /
    Σ decode tokens and 1000 · Σ decode tokens / Σ decode ms (`latency.decode_tokens_ms`)."""
    rows = [(_key(r), m) for r in recs if (m := decode_tokens_ms(r)) is not None]
    keys = tuple(k for k, _ in rows)
    tokens = np.asarray([m[0] for _, m in rows], float)
    ms = np.asarray([m[1] for _, m in rows], float)
    return Samples(keys, (ms, tokens)), Samples(keys, (1000.0 * tokens, ms))


def sum_by_key(parts: list[Samples]) -> Samples:
    """Add several per-prompt samples of one statistic key by key (α pooled over several γ, a
    side's runs merged)."""
    coefs = parts[0].coefs
    acc: dict[str, list[float]] = {}
    for s in parts:
        assert s.coefs == coefs, "only samples of one statistic add up"
        for i, k in enumerate(s.keys):
            cur = acc.setdefault(k, [0.0] * len(coefs))
            for j, a in enumerate(s.arrays):
                cur[j] += float(a[i])
    keys = sorted(acc)
    arrays = tuple(np.asarray([acc[k][j] for k in keys], float) for j in range(len(coefs)))
    return Samples(tuple(keys), arrays, coefs)


def speedup_samples(baseline: list[RecordLine], recs: list[RecordLine]) -> Samples:
    """Per prompt measured on both sides (`latency.pair`): decode tokens and ms with speculation
    and without; the statistic is the speedup of pooled decode throughput, the report's."""
    p = pair(baseline, recs)
    keys = tuple(f"{pid}#{rep}" for pid, rep in p.keys)
    return Samples(keys, tuple(p.arrays()), THROUGHPUT_RATIO_COEFS)


def group_samples(
    baseline: list[RecordLine], specs: dict[int, list[RecordLine]]
) -> dict[str, Samples]:
    """Per-prompt samples of every metric of one workload × temperature, keyed "name" or
    "name@γ" (α per γ as "alpha@γ"; compare pools α over the γ both runs measured)."""
    out: dict[str, Samples] = {}
    out["baseline_itl_ms"], out["baseline_tokens_per_s"] = timing_samples(baseline)
    for g, recs in specs.items():
        pp = per_prompt(recs)
        keys = tuple(_key(r) for r in recs)
        out[f"alpha@{g}"] = sum_by_key([Samples(keys, (pp.beta_sum, pp.verified))])
        out[f"accepted_length@{g}"] = sum_by_key(
            [Samples(keys, (pp.rounds + pp.accepted, pp.rounds))]
        )
        out[f"itl_ms@{g}"], out[f"tokens_per_s@{g}"] = timing_samples(recs)
        out[f"speedup@{g}"] = speedup_samples(baseline, recs)
    return out


def setting_key(setting: str, gamma: int) -> str:
    """The metric key of the speedup of one drafter/policy setting at γ."""
    return f"speedup[{setting}]@{gamma}"


def setting_name(key: str) -> str:
    """A `setting_key`'s label as a run names it: "ngram γ=4" (the drafter, with γ added when
    the drafter's own label does not hold it; the policy when it is not the fixed one)."""
    inner, _, gamma = key.removeprefix("speedup[").rpartition("]@")
    drafter, _, policy = inner.rpartition("/")
    name = drafter if "γ=" in drafter else f"{drafter} γ={gamma}"
    return name if policy in ("fixed", "") else f"{name} ({policy})"


def prompt_of(key: str) -> str:
    """The prompt id of a sample key "prompt_id#repeat"."""
    return key.rpartition("#")[0]


def without_prompts(s: Samples, excluded: frozenset[str]) -> Samples:
    """The samples less those of the excluded prompts (every repeat of each)."""
    keep = [i for i, k in enumerate(s.keys) if prompt_of(k) not in excluded]
    if len(keep) == len(s.keys):
        return s
    idx = np.asarray(keep, dtype=int)
    return Samples(tuple(s.keys[i] for i in keep), tuple(a[idx] for a in s.arrays), s.coefs)
