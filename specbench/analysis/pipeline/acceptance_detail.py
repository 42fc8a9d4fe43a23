"""How acceptance varies inside a workload: α per prompt and its spread, what that spread does
to the tokens-per-round prediction (docs/theory.md §3), and per-position conditional acceptance
with intervals (docs/theory.md §2 (d)), from the primary drafter's runs.

`results.py` stores these beside the validity checks (`analysis.decide.validity`); per-prompt α marks the
prompts `validity.assess` found degenerate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from specbench.analysis.arithmetic import roi
from specbench.analysis.decide.validity import Records, Validity
from specbench.analysis.documents.results_model_base import EstimateJSON, est_model
from specbench.analysis.documents.results_model_workload import (
    AlphaSpread,
    HeterogeneityRow,
    PerPromptAlpha,
    PositionDetail,
    PromptAlpha,
)
from specbench.analysis.estimators.acceptance import per_prompt, prompt_truncation
from specbench.analysis.stats.serialize import json_num
from specbench.analysis.stats.signflip import rate_estimate

MIN_POSITION_ROUNDS = 20  # per-position rates over fewer rounds are shown greyed out, not as points


def per_prompt_alpha(
    records: Records,
    at_max: Records,
    gamma_max: int,
    degenerate: dict[str, str],
    n_boot: int,
    level: float,
) -> PerPromptAlpha | None:
    """α per prompt (exact β pooled within the prompt over every γ run of the primary drafter,
    repeats summed — so the token-pooled figure is the headline α), the request-level mean beside
    it, the spread, and the heterogeneity effect on ā at the γ_max run (docs/theory.md §3)."""
    if not records:
        return None
    pp = per_prompt(records)
    by_prompt: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for i, pid in enumerate(pp.prompt_ids):
        row = by_prompt[pid]
        row[0] += pp.beta_sum[i]
        row[1] += pp.verified[i]
        row[2] += float(records[i].get("new_tokens") or 0)
    ids = [p for p in by_prompt if by_prompt[p][1] > 0]
    if not ids:
        return None
    alphas = np.asarray([by_prompt[p][0] / by_prompt[p][1] for p in ids])
    clean = np.asarray([p not in degenerate for p in ids])

    def request_mean(mask: np.ndarray) -> EstimateJSON | None:
        if not mask.any():
            return None
        a = alphas[mask]
        return est_model(
            rate_estimate(
                a,
                np.ones_like(a),
                level,
                clusters=[p for p, m in zip(ids, mask, strict=True) if m],
            )
        )

    token_pooled = rate_estimate(pp.beta_sum, pp.verified, level, clusters=pp.prompt_ids)
    q = np.percentile(alphas, [0, 10, 25, 50, 75, 90, 100])
    return PerPromptAlpha(
        estimator="exact_beta",
        at_gamma=gamma_max,  # the heterogeneity rows' run; α per prompt pools every γ run
        n_prompts=len(ids),
        token_pooled=est_model(token_pooled),
        request_mean=request_mean(np.ones(len(ids), bool)),
        request_mean_non_degenerate=request_mean(clean) if not clean.all() else None,
        spread=AlphaSpread(
            sd=json_num(float(alphas.std(ddof=1))) if len(alphas) > 1 else None,
            min=json_num(q[0]),
            p10=json_num(q[1]),
            p25=json_num(q[2]),
            median=json_num(q[3]),
            p75=json_num(q[4]),
            p90=json_num(q[5]),
            max=json_num(q[6]),
        ),
        values=[
            PromptAlpha(
                prompt_id=p,
                alpha=json_num(float(a)),
                tokens=int(by_prompt[p][2]),
                degenerate=p in degenerate,
            )
            for p, a in zip(ids, alphas, strict=True)
        ],
        heterogeneity=heterogeneity(at_max, gamma_max),
    )


def heterogeneity(records: Records, gamma_max: int) -> list[HeterogeneityRow]:
    """Per γ ≤ γ_max, tokens per round four ways (docs/theory.md §3): pooled per prompt by tokens
    (what a γ run measures), pooled over rounds (biased low when α varies), the iid model per
    prompt and the iid model at the pooled α (biased high). The ratios say how much pooling the
    wrong way would misstate the prediction on this workload."""
    pt = prompt_truncation(records, gamma_max)
    acc = np.asarray([a for r in records for a in r["rounds"]["accepted"]], int)
    dra = np.asarray([d for r in records for d in r["rounds"]["drafted"]], int)
    full = acc[dra == gamma_max]
    pp = per_prompt(records)
    pooled_alpha = float(pp.beta_sum.sum() / pp.verified.sum()) if pp.verified.sum() else math.nan
    keep = np.isfinite(pt.alphas)
    rows = []
    for g in range(1, gamma_max + 1):
        per_prompt_pooled = roi.pooled_tokens_per_round(pt.lengths, pt.expected[:, g - 1])
        round_pooled = float(1.0 + np.minimum(full, g).mean()) if len(full) else math.nan
        iid_pp = (
            roi.pooled_expected_tokens_iid(g, pt.lengths[keep], pt.alphas[keep])
            if keep.any()
            else math.nan
        )
        iid_pooled = (
            roi.expected_tokens(g, min(max(pooled_alpha, 0.0), 1.0))
            if math.isfinite(pooled_alpha)
            else math.nan
        )
        rows.append(
            HeterogeneityRow(
                gamma=g,
                per_prompt_pooled=json_num(per_prompt_pooled),
                round_pooled=json_num(round_pooled),
                round_over_per_prompt=json_num(round_pooled / per_prompt_pooled)
                if per_prompt_pooled
                else None,
                iid_per_prompt=json_num(iid_pp),
                iid_at_pooled_alpha=json_num(iid_pooled),
                iid_pooled_over_per_prompt=json_num(iid_pooled / iid_pp) if iid_pp else None,
            )
        )
    return rows


def per_position_intervals(
    records: Records, gamma_max: int, n_boot: int, level: float
) -> list[PositionDetail]:
    """a_i = #(A ≥ i) / #(A ≥ i − 1) over rounds that drafted ≥ i (docs/theory.md §2 (d)), with a
    sign-flip interval over prompts (docs/theory.md §7) and the rounds behind it; `enough` is False under
    MIN_POSITION_ROUNDS rounds (plots grey those out instead of drawing a 0 or a 1)."""
    out = []
    for i in range(1, gamma_max + 1):
        hits, reached, ids = [], [], []
        for r in records:
            acc = np.asarray(r["rounds"]["accepted"], int)
            dra = np.asarray(r["rounds"]["drafted"], int)
            eligible = dra >= i
            n_reached = int(((acc >= i - 1) & eligible).sum())
            if n_reached:
                hits.append(float(((acc >= i) & eligible).sum()))
                reached.append(float(n_reached))
                ids.append(str(r["prompt_id"]))
        rounds = int(sum(reached))
        est = (
            rate_estimate(np.asarray(hits), np.asarray(reached), level, clusters=ids)
            if rounds
            else None
        )
        out.append(
            PositionDetail(
                position=i,
                rate=json_num(est.value) if est else None,
                ci95=(json_num(est.lo), json_num(est.hi)) if est else (None, None),
                rounds=rounds,
                prompts=len(set(ids)),
                enough=rounds >= MIN_POSITION_ROUNDS,
            )
        )
    return out


@dataclass(frozen=True)
class AcceptanceDetail:
    """An entry's `per_prompt_alpha` and `per_position_detail`."""

    per_prompt_alpha: PerPromptAlpha | None
    per_position_detail: list[PositionDetail]


def acceptance_detail(
    primary: dict[int, Records], v: Validity, n_boot: int, level: float
) -> AcceptanceDetail:
    """Per-prompt α and per-position acceptance with intervals, from the primary drafter's
    largest-γ run (the run the headline α and the predictions use)."""
    if not primary:
        return AcceptanceDetail(None, [])
    gamma_max = max(primary)
    return AcceptanceDetail(
        per_prompt_alpha(
            [r for recs in primary.values() for r in recs],
            primary[gamma_max],
            gamma_max,
            v.degenerate,
            n_boot,
            level,
        ),
        per_position_intervals(primary[gamma_max], gamma_max, n_boot, level),
    )
