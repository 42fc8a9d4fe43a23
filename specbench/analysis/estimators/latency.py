"""Measured latency of a setting against the baseline beside it, paired by prompt.

Per-token latency is decode time ÷ decode tokens (the tokens after the first of each turn: TPOT,
docs/theory.md §9); TTFT is reported apart. A setting's ITL and throughput are pooled over its
prompts (Σ decode ms / Σ decode tokens), and its **speedup is the ratio of pooled decode
throughputs**, speculation over baseline, on the prompts both measured:

    speedup = (Σ_p tok_spec,p / Σ_p ms_spec,p) / (Σ_p tok_base,p / Σ_p ms_base,p)

— time, not a mean of per-prompt ratios, because traffic is tokens (docs/theory.md §7): this is
the decode time a deployment saves, and it is exactly what the speed model predicts from the
token-pooled tokens per round. The end-to-end speedup (prefill included) is reported beside it.
Intervals resample prompts (repeats of a prompt are one cluster); when the records come from
interleaved engine starts (`engine_start`, engine.interleave) they resample prompts and starts,
two crossed factors (`analysis.stats.crossed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_base import EstimateJSON, est_model
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.analysis.stats import signflip
from specbench.analysis.stats.crossed import MIN_STARTS, crossed_ratio_ci
from specbench.analysis.stats.resampling import Estimate, cluster_sums, ratio_ci
from specbench.analysis.stats.signflip import throughput_pivots
from specbench.record_line import RecordLine


def decode_tokens_ms(rec: RecordLine) -> tuple[float, float] | None:
    """(decode tokens, decode ms) of one record, or None when it decoded nothing measurable."""
    turns = len(rec.get("ttft_ms") or [0])
    tokens = float(rec.get("new_tokens") or 0) - turns
    tpot = rec.get("tpot_ms")
    if tokens <= 0 or not tpot or not math.isfinite(float(tpot)):
        return None
    ms = rec.get("decode_ms")
    ms = float(ms) if ms is not None else float(tpot) * tokens
    return (tokens, ms) if ms > 0 else None


def e2e_tokens_ms(rec: RecordLine) -> tuple[float, float] | None:
    tokens, wall = rec.get("new_tokens"), rec.get("wall_ms")
    if not tokens or not wall or wall <= 0:
        return None
    return float(tokens), float(wall)


@dataclass(frozen=True)
class Paired:
    """Per (prompt, repeat) measured on both sides: tokens and ms of each side."""

    keys: list[tuple[str, int]]
    tok_new: np.ndarray
    ms_new: np.ndarray
    tok_base: np.ndarray
    ms_base: np.ndarray
    crossed: bool = False  # every unit from an interleaved engine start: keys[1] is the start

    @property
    def clusters(self) -> list[str]:
        return [k[0] for k in self.keys]

    @property
    def by_start(self) -> bool:
        """Resample engine starts too: interleaved, with at least MIN_STARTS of them."""
        return self.crossed and len({k[1] for k in self.keys}) >= MIN_STARTS

    def __len__(self) -> int:
        return len(self.keys)

    def restricted(self, keys: list[tuple[str, int]]) -> Paired:
        pos = {k: i for i, k in enumerate(self.keys)}
        idx = [pos[k] for k in keys]
        return Paired(
            keys,
            self.tok_new[idx],
            self.ms_new[idx],
            self.tok_base[idx],
            self.ms_base[idx],
            self.crossed,
        )

    def arrays(self) -> list[np.ndarray]:
        return [self.tok_new, self.ms_new, self.tok_base, self.ms_base]


def _key(rec: RecordLine) -> tuple[str, int]:
    return str(rec["prompt_id"]), int(rec.get("repeat", 0))


def pair(base: list[RecordLine], recs: list[RecordLine], end_to_end: bool = False) -> Paired:
    """The prompts measured by both the baseline and the setting, in the setting's order."""
    measure = e2e_tokens_ms if end_to_end else decode_tokens_ms
    # a join on (prompt, repeat) where the last baseline record wins: a dict does it in two
    # lines, a pandas merge would need a drop_duplicates and a reindex for the same
    by_key = {_key(r): measure(r) for r in base}
    keys, rows = [], []
    for r in recs:
        b, s = by_key.get(_key(r)), measure(r)
        if b is not None and s is not None:
            keys.append(_key(r))
            rows.append((*s, *b))
    arr = np.asarray(rows, float).reshape(len(rows), 4)
    crossed = bool(rows) and all("engine_start" in r for r in [*base, *recs])
    return Paired(keys, arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], crossed)


def pooled_itl(recs: list[RecordLine], n_boot: int, level: float) -> Estimate | None:
    """Σ decode ms / Σ decode tokens over the records (ITL, ms per token)."""
    rows: list[tuple[float, float, str]] = []
    for r in recs:
        m = decode_tokens_ms(r)
        if m is not None:
            rows.append((m[0], m[1], str(r["prompt_id"])))
    if not rows:
        return None
    tok = np.asarray([t for t, _, _ in rows])
    ms = np.asarray([m for _, m, _ in rows])
    return ratio_ci(ms, tok, n_boot, level, clusters=[c for _, _, c in rows])


def tokens_per_s(itl: Estimate | None) -> Estimate | None:
    if itl is None:
        return None
    inv = [
        1000.0 / x if x and math.isfinite(x) and x > 0 else math.nan
        for x in (itl.value, itl.hi, itl.lo)
    ]
    return Estimate(*inv)


def speedup_of(p: Paired, n_boot: int, level: float) -> Estimate | None:
    if len(p) == 0:
        return None
    if p.by_start:
        return crossed_ratio_ci(p.arrays(), p.clusters, [k[1] for k in p.keys], level)
    # the sign-flip test of the speedup's ratio-of-sums pivot, inverted (docs/theory.md §8): the
    # same statistic the verdict tests, so a table's interval and the verdict cannot disagree,
    # and below the test's resolution (5 prompts at 95 %) the interval is honestly unbounded
    del n_boot
    piv = throughput_pivots(*cluster_sums(p.arrays(), p.clusters))
    lo, hi = signflip.interval(piv, level)
    return Estimate(float(piv.estimates[0]), lo, hi)


@dataclass(frozen=True)
class MeasuredLatency:
    """A setting's measured latency columns in results.json (a γ row's, a method's)."""

    itl_ms: EstimateJSON | None
    tokens_per_s: EstimateJSON | None
    measured_speedup: EstimateJSON | None
    measured_e2e_speedup: EstimateJSON | None


def measured_latency(
    base: list[RecordLine], recs: list[RecordLine], n_boot: int, level: float
) -> MeasuredLatency:
    """ITL, decode tokens/s and the speedups (decode and end to end, paired by prompt) of a
    setting's records against the baseline's — shared by every backend's analysis."""
    itl = pooled_itl(recs, n_boot, level)
    return MeasuredLatency(
        itl_ms=est_model(itl),
        tokens_per_s=est_model(tokens_per_s(itl)),
        measured_speedup=est_model(speedup_of(pair(base, recs), n_boot, level)),
        measured_e2e_speedup=est_model(
            speedup_of(pair(base, recs, end_to_end=True), n_boot, level)
        ),
    )


@dataclass(frozen=True)
class LatencyDistribution:
    """Per-request TPOT (ms) of one workload × temperature at its reference concurrency: the
    baseline's and the shown setting's (γ = `gamma`), what the report's histogram draws."""

    gamma: int
    baseline_ms: list[float]
    setting_ms: list[float]


def shown_gamma(e: WorkloadResult) -> int:
    """The γ whose latency the distribution shows: the verdict's, else its best measured
    setting's — a verdict not measured (degenerate output) still shows its best setting's."""
    rec = e.recommendation
    best = rec.best_measured
    st = e.content.speedup_setting if e.content else None
    return rec.gamma or (best.gamma if best else None) or (st.gamma if st else 0)


def latency_distributions(
    results: RunResults, records: list[RecordLine]
) -> dict[tuple[str, float], LatencyDistribution]:
    """Each workload × temperature's per-request TPOT, baseline and shown setting, from the
    closed-loop records (open-loop cells are in results.json only)."""
    out = {}
    for e in results.workloads:
        gamma = shown_gamma(e)
        c_ref = e.engine.reference_concurrency if e.engine else 1
        mine = [
            r
            for r in records
            if r["kind"] in ("baseline", "spec")
            and r["workload"] == e.workload
            and float(r["temperature"]) == e.temperature
            and r.get("concurrency", 1) == c_ref
        ]
        base = [x for r in mine if r["kind"] == "baseline" and (x := r.get("tpot_ms"))]
        spec = [
            x
            for r in mine
            if r["kind"] == "spec" and r["gamma"] == gamma and (x := r.get("tpot_ms"))
        ]
        out[(e.workload, e.temperature)] = LatencyDistribution(gamma, base, spec)
    return out
