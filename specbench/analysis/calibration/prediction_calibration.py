"""How biased are the γ predictions near the end of the budget? A seeded simulation
(docs/theory.md §3, "End of budget"; issue 28).

Per replicate, prompts with acceptance that varies across prompts (α_p ~ Beta, mean 0.6, sd 0.2)
and within them (easy and hard stretches: β_t = α_p ± 0.25, switching with probability 0.1 per
position) are decoded the way decoding/generate.py decodes — a round that starts with r tokens left
drafts max(1, min(γ, r − 1)), the stopper keeps what fits — once at γ_max (the run predictions
are made from) and once at every γ < γ_max (the truth: its measured tokens per round
1 + Σ accepted / Σ rounds, `analysis.estimators.acceptance.estimate_alpha`'s τ). Sampled decoding draws
each position's accept afresh in every run; greedy decoding fixes the match of each position
once per prompt, shared by all runs. Some prompts may stop at EOS before the budget.

The bias of a method is the mean over replicates of predicted / measured − 1, with its Monte Carlo
standard error. Methods: "truncation" and "iid" (`acceptance.truncation_curve`, `iid_curve`),
"replay" (`simulate.replay` of the fixed-γ policy), and the per-round rules they replaced —
"old truncation" (each full round truncated on its own, 1 + mean min(A, γ)), "old iid"
(ā(γ, α_p)) and "old replay" (each recorded round replayed once at min(γ, drafted)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specbench.analysis.arithmetic import roi
from specbench.analysis.arithmetic.timing_model import TimingModel
from specbench.analysis.estimators.acceptance import iid_curve, prompt_truncation, truncation_curve
from specbench.analysis.simulate.replay import replay
from specbench.config import PolicySpec
from specbench.decoding.policies import Policy
from specbench.record_line import RecordLine

METHODS = ("truncation", "iid", "replay", "old truncation", "old iid", "old replay")
_TIMING = TimingModel(t_ar_ms=10.0, t_draft_ms=1.0, t0_ms=10.0, t1_ms=0.5)  # replay needs one


@dataclass(frozen=True)
class Traffic:
    """The simulated workload (module docstring)."""

    budget: int = 16  # max_new_tokens
    prompts: int = 48
    gamma_max: int = 6
    greedy: bool = False  # greedy decoding (a fixed match per position) or sampled
    eos_share: float = 0.0  # prompts that stop at EOS, uniformly in [budget / 4, budget)
    alpha_mean: float = 0.6
    alpha_sd: float = 0.2
    swing: float = 0.25  # within-prompt: β_t = α_p ± swing, by stretches of positions
    switch: float = 0.5  # P(the stretch changes) per position (0.5: no persistence)
    round_sd: float = 0.8  # within-prompt: a round's shared logit shift (sampled decoding)


@dataclass(frozen=True)
class _Prompt:
    beta: list[float]  # (budget,) accept probability of a draft at each output position
    uniform: list[float]  # (budget,) the position's accept draw, shared by the prompt's runs
    length: int  # output tokens (budget, or where EOS falls)


def _prompt(rng: np.random.Generator, tr: Traffic) -> _Prompt:
    m, v = tr.alpha_mean, tr.alpha_sd**2
    k = m * (1 - m) / v - 1
    alpha = rng.beta(m * k, (1 - m) * k)
    flips = rng.random(tr.budget) < tr.switch
    side = np.where(np.cumsum(flips) % 2 == 0, 1.0, -1.0) * rng.choice([-1.0, 1.0])
    beta = np.clip(alpha + tr.swing * side, 0.02, 0.98)
    eos = rng.random() < tr.eos_share
    length = int(rng.integers(max(2, tr.budget // 4), tr.budget)) if eos else tr.budget
    return _Prompt(beta.tolist(), rng.random(tr.budget).tolist(), length)


def decode(
    rng: np.random.Generator, p: _Prompt, gamma: int, budget: int, round_sd: float = 0.0
) -> RecordLine:
    """One prompt decoded at fixed γ as decoding/generate.py does; its record's analysed fields.
    A prompt that stops at EOS has it at output position `length` − 1: a draft accepted there
    was the EOS, and the drafter stops proposing after it.

    A draft at output position t is accepted when the prompt's uniform u_t falls below its
    probability there (shifted on the logit scale by the round's N(0, round_sd) draw). Each run
    tests a position at most once, so sharing u_t between a prompt's runs leaves each run's
    law exact (common random numbers) and makes the bias of a prediction cheaper to measure;
    with round_sd = 0 it is greedy decoding: the match at each position is fixed."""
    out = 1  # the prefill's token
    acc_l, dra_l, asked_l, kept_l, beta_l = [], [], [], [], []
    while out < min(budget, p.length):
        remaining = budget - out
        g = max(1, min(gamma, remaining - 1))  # never draft more than can be emitted
        drafted = g
        shift = math.exp(-rng.normal(0.0, round_sd)) if round_sd > 0 else 1.0
        a = 0
        while a < g:
            b = p.beta[out + a]
            # β shifted by the round on the logit scale: b / (b + (1 − b)·e^(−shift))
            if p.uniform[out + a] >= b / (b + (1.0 - b) * shift):
                break
            a += 1
            if out + a == p.length < budget:  # the draft proposed the EOS: it stops there
                drafted = a
                break
        kept = min(a + 1, remaining, p.length - out)  # stopper: budget, then EOS
        acc_l.append(a)
        dra_l.append(drafted)
        asked_l.append(g)
        kept_l.append(kept)
        beta_l.append(p.beta[out : out + drafted])
        out += kept
    reason = "max_new_tokens" if out >= budget else "eos"
    return {
        "prompt_id": "",
        "temperature": 1.0 if round_sd > 0 else 0.0,
        "new_tokens": out,
        "new_tokens_per_turn": [out],
        "stop_reason": [reason],
        "rounds": {
            "gamma": asked_l,
            "drafted": dra_l,
            "accepted": acc_l,
            "emitted": kept_l,
            "beta": beta_l,
            "draft_top_prob": [[1.0] * d for d in dra_l],
        },
    }


def _measured(records: list[RecordLine]) -> float:
    """τ = 1 + Σ accepted / Σ rounds over the run (what `estimate_alpha` reports)."""
    acc = sum(sum(r["rounds"]["accepted"]) for r in records)
    return 1.0 + acc / sum(len(r["rounds"]["accepted"]) for r in records)


def _old_predictions(records: list[RecordLine], tr: Traffic) -> dict[str, dict[int, float]]:
    """The per-round rules the budget walk replaced (module docstring)."""
    pt = prompt_truncation(records, tr.gamma_max)
    trunc, iid, rep = {}, {}, {}
    gammas = range(1, tr.gamma_max)
    for g in gammas:
        per, per_rep = [], []
        for rec in records:
            acc = np.asarray(rec["rounds"]["accepted"])
            dra = np.asarray(rec["rounds"]["drafted"])
            full = acc[dra == tr.gamma_max]
            per.append(1.0 + np.minimum(full, g).mean() if len(full) else np.nan)
            per_rep.append(1.0 + np.minimum(acc, np.minimum(dra, g)).mean())
        trunc[g] = roi.pooled_tokens_per_round(pt.lengths, per)
        iid[g] = roi.pooled_expected_tokens_iid(g, pt.lengths, pt.alphas)
        rep[g] = roi.pooled_tokens_per_round(pt.lengths, per_rep)
    return {"old truncation": trunc, "old iid": iid, "old replay": rep}


def replicate(rng: np.random.Generator, tr: Traffic) -> dict[str, dict[int, float]]:
    """One replicate: per method, predicted / measured − 1 at each γ < γ_max."""
    prompts = [_prompt(rng, tr) for _ in range(tr.prompts)]
    sd = 0.0 if tr.greedy else tr.round_sd
    at_max = [decode(rng, p, tr.gamma_max, tr.budget, sd) for p in prompts]
    for i, rec in enumerate(at_max):
        rec["prompt_id"] = f"p{i}"
    gammas = range(1, tr.gamma_max)
    measured = {g: _measured([decode(rng, p, g, tr.budget, sd) for p in prompts]) for g in gammas}
    fixed = {g: Policy(PolicySpec(name="fixed", gamma=g)) for g in gammas}
    predicted: dict[str, dict[int, float]] = {
        "truncation": truncation_curve(at_max, tr.gamma_max),
        "iid": iid_curve(at_max, tr.gamma_max),
        "replay": {
            g: replay(fixed[g], at_max, _TIMING, tr.gamma_max, n_boot=2).tokens_per_round.value
            for g in gammas
        },
        **_old_predictions(at_max, tr),
    }
    return {m: {g: predicted[m][g] / measured[g] - 1.0 for g in gammas} for m in METHODS}


@dataclass(frozen=True)
class Bias:
    """Per method and γ: mean relative bias over replicates and its Monte Carlo standard error."""

    mean: dict[str, dict[int, float]]
    se: dict[str, dict[int, float]]
    reps: int

    def worst(self, method: str) -> float:
        """The bias of largest magnitude over γ < γ_max, signed."""
        return max(self.mean[method].values(), key=abs)


def prediction_bias(tr: Traffic, reps: int, seed: int) -> Bias:
    rng = np.random.default_rng(seed)
    runs = [replicate(rng, tr) for _ in range(reps)]
    gammas = range(1, tr.gamma_max)
    mean = {m: {g: float(np.mean([r[m][g] for r in runs])) for g in gammas} for m in METHODS}
    se = {
        m: {g: float(np.std([r[m][g] for r in runs], ddof=1) / np.sqrt(reps)) for g in gammas}
        for m in METHODS
    }
    return Bias(mean, se, reps)


Row = tuple[str, Callable[[], tuple[float, float]], str, Callable[[float, float], bool]]

SETTINGS = (
    ("sampled, 16 tokens", Traffic(budget=16), 701),
    ("sampled, 64 tokens", Traffic(budget=64), 702),
    ("greedy, 16 tokens", Traffic(budget=16, greedy=True), 703),
    ("sampled, 16 tokens, 30 % EOS", Traffic(budget=16, eos_share=0.3), 704),
)  # γ_max = 6, 48 prompts a replicate; worst over γ = 1..5


def prediction_rows(reps: int) -> list[Row]:
    """Rows for benchmarks/bench_calibration.py: per setting and method, the worst bias over
    γ = 1..γ_max − 1, target within ±1 % (up to 2 MC SE). The old per-round rules are shown for
    contrast, and so is the iid model under sampled decoding, where a round's acceptances are
    correlated (round_sd) and no iid model holds — a misfit of the model, not of the budget."""
    out: list[Row] = []
    for label, tr, seed in SETTINGS:
        cache: dict[str, Bias] = {}

        def bias(tr: Traffic = tr, seed: int = seed, cache: dict[str, Bias] = cache) -> Bias:
            if "b" not in cache:  # one simulation feeds every method's row
                cache["b"] = prediction_bias(tr, max(reps // 50, 20), seed)
            return cache["b"]

        for method in METHODS:
            judged = not method.startswith("old") and (method != "iid" or tr.greedy)

            def measure(
                method: str = method, bias: Callable[[], Bias] = bias
            ) -> tuple[float, float]:
                b = bias()
                worst = b.worst(method)
                g = next(k for k, v in b.mean[method].items() if v == worst)
                return worst, b.se[method][g]

            out.append(
                (
                    f"prediction bias, {method}, {label}",
                    measure,
                    "within ±0.01" if judged else "(contrast)",
                    (lambda r, se: abs(r) <= 0.01 + 2 * se) if judged else (lambda r, se: True),
                )
            )
    return out
