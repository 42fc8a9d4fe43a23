"""The ON/OFF/UNDECIDED decision, aware of selection: per workload and for one setting across the
traffic.

Rule (docs/theory.md §8). A workload's candidates are every measured setting (drafter × policy ×
γ), each paired with the baseline on the same prompts. The speedup is a ratio of sums over
prompts; the three-outcome test (`analysis.stats.signflip`) flips every candidate's pivot with one sign
a prompt: ON when the max-T statistic over the K candidates clears its critical value (the
chosen candidate the highest point speedup among those that clear), OFF when every candidate's
own test shows it below 1 + margin, else UNDECIDED — each error ≤ 2.5 % at level 0.95, whatever
K, and nothing decided below 6 prompts. The bounds printed are the tests inverted, so "lower
bound > 1 + margin" and ON are one statement. Records from interleaved engine starts (prompts ×
starts crossed) keep the two-way multivariate-t max-T of `analysis.stats.crossed` (`_crossed_decision`).
`workload_decision` is the one place the test is run; `recommend` words it and the engine
ranking's "clears" reads it.

Across workloads (one configuration per serving pool): traffic is tokens, so the pool's speedup
for a setting k is a ratio of decode times, not a mean of speedups,

    O_k = Σ_w a_w / Σ_w a_w / S_wk,     a_w = W_w · ITL_base,w

with W_w the workload's share of output tokens (its config `weight`). The same test on the pooled
pivots decides "one setting for the pool" (`analysis.decide.pool`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.documents.results_model_base import (
    DecisionNumbers,
    EstimateJSON,
    ModelOptimum,
    SettingSpeedup,
    est_model,
)
from specbench.analysis.documents.results_model_workload import ItlPair, Recommendation
from specbench.analysis.estimators.latency import Paired, pair, speedup_of
from specbench.analysis.stats import signflip
from specbench.analysis.stats.crossed import MIN_STARTS, crossed_replicates
from specbench.analysis.stats.resampling import (
    DEFAULT_SEED,
    THROUGHPUT_RATIO_COEFS,
    Estimate,
    Replicates,
    cluster_sums,
    log_linear_replicates,
    simultaneous_lower,
)
from specbench.analysis.stats.serialize import json_num
from specbench.analysis.stats.signflip import Decision, RatioPivots, throughput_pivots
from specbench.record_line import RecordLine
from specbench.setting import SettingKey

MIN_PROMPTS = 2
RULE = "sign-flip max-T: ON if a lower bound > 1 + margin, OFF if every upper bound < 1 + margin"


def one_sided(level: float) -> float:
    """The one-sided confidence of a two-sided `level` interval's lower end (0.95 → 0.975)."""
    return 1.0 - (1.0 - level) / 2.0


def joint_replicates(
    paired: Sequence[Paired], n_boot: int, seed: int
) -> tuple[Replicates, int] | None:
    """Replicates of every candidate's speedup over the prompts all of them measured (jointly
    resampled, repeats clustered). None when fewer than MIN_PROMPTS prompts are common."""
    common = set(paired[0].keys)
    for p in paired[1:]:
        common &= set(p.keys)
    keys = [k for k in paired[0].keys if k in common]
    clusters = [k[0] for k in keys]
    if len(set(clusters)) < MIN_PROMPTS:
        return None
    if all(p.by_start for p in paired) and len({k[1] for k in keys}) >= MIN_STARTS:
        cands = [p.restricted(keys).arrays() for p in paired]  # units: (prompt, engine start)
        starts = [k[1] for k in keys]
        return crossed_replicates(cands, clusters, starts, n_boot=n_boot, seed=seed), len(
            set(clusters)
        )
    arrays = [cluster_sums(p.restricted(keys).arrays(), clusters) for p in paired]
    return log_linear_replicates(arrays, THROUGHPUT_RATIO_COEFS, n_boot, seed), len(set(clusters))


def _value(e: Estimate | None) -> float:
    return e.value if e is not None else math.nan


def setting_name(key: SettingKey) -> str:
    """A setting in a sentence: "γ=4", "ngram γ=4", or an engine setting's own label."""
    drafter, policy, gamma = key
    name = drafter if "γ=" in drafter else f"{drafter} γ={gamma}"
    name = f"γ={gamma}" if drafter in ("", "model") else name
    return name if policy in ("", "fixed") else f"{name} ({policy})"


def setting_speedup(
    key: SettingKey,
    speedup: EstimateJSON | None,
    bounds: tuple[float | None, float | None] | None = None,
) -> SettingSpeedup:
    """A measured setting with its speedup and, where the rule computed them, its decision
    bounds (lower, upper; without them the keys stay out of results.json)."""
    out = SettingSpeedup(drafter=key[0], policy=key[1], gamma=key[2], speedup=speedup)
    if bounds is not None:
        out.decision_lower_bound, out.decision_upper_bound = bounds
    return out


@dataclass(frozen=True)
class QuotedFigures:
    """What an entry's recommendation quotes from the figures it was decided beside: the
    baseline's ITL, each measured setting's (the methods table's; else the γ table's at that γ),
    and the timing model's optimum."""

    baseline_itl_ms: float | None
    method_itl_ms: dict[SettingKey, float | None]
    gamma_itl_ms: dict[int, float | None]
    model_optimum: ModelOptimum | None

    def itl_at(self, rec: Recommendation) -> float | None:
        key = (rec.drafter or "", rec.policy or "", rec.gamma)
        if key in self.method_itl_ms:
            return self.method_itl_ms[key]
        return self.gamma_itl_ms.get(rec.gamma)


@dataclass(frozen=True)
class Candidates:
    """Every measured setting of one workload × temperature, each paired with the baseline: its
    marginal speedup estimate and, when at least MIN_PROMPTS prompts are common to all, its
    simultaneous one-sided lower bound (`bounds`, in `keys` order; None otherwise)."""

    keys: list[SettingKey]
    marginal: dict[SettingKey, Estimate | None]
    bounds: dict[SettingKey, float] | None
    critical_value: float | None
    n_common: int


def candidates(
    keys: list[SettingKey],
    paired: list[Paired],
    marginal: dict[SettingKey, Estimate | None],
    level: float,
    n_boot: int,
    seed: int = DEFAULT_SEED,
) -> Candidates:
    """The K candidates of the ON rule (every drafter × policy × γ, and on engine runs every
    method × γ × endpoint), already paired with the baseline and estimated, with their max-T
    simultaneous bounds."""
    joint = joint_replicates(paired, n_boot, seed)
    if joint is None:
        return Candidates(keys, marginal, None, None, 0)
    rep, n_common = joint
    bounds, crit = simultaneous_lower(rep, level)
    return Candidates(keys, marginal, dict(zip(keys, bounds, strict=True)), crit, n_common)


def _crossed_decision(cand: Candidates, margin: float, alpha: float) -> Decision | None:
    """Interleaved engine starts (prompts × starts crossed, `analysis.stats.crossed`): the two-way
    multivariate-t max-T bounds decide ON, every marginal upper end below the line decides OFF,
    else UNDECIDED (docs/theory.md §15). Not the sign-flip test: flipping prompts with each
    prompt's starts summed into it leaves out the start-to-start variance that every prompt of a
    start shares, and 2–4 starts give too few flips for a 2.5 % tail. Below the prompt-level
    resolution (6 prompts) it is UNDECIDED, as every verdict is (§8)."""
    if cand.bounds is None:
        return None
    if cand.n_common < signflip.min_prompts(alpha):
        nan = np.full(len(cand.keys), math.nan)
        return Decision("undecided", None, nan, nan, math.inf, cand.n_common, math.nan)
    lower = np.asarray([cand.bounds[k] for k in cand.keys])
    upper = np.asarray([_upper(cand.marginal[k]) for k in cand.keys])
    line = 1.0 + margin
    points = np.asarray([_value(cand.marginal[k]) for k in cand.keys])
    clears = [i for i in range(len(lower)) if lower[i] > line]
    outcome = "on" if clears else ("off" if np.all(upper < line) else "undecided")
    chosen = max(clears, key=lambda i: points[i]) if clears else None
    crit = cand.critical_value if cand.critical_value is not None else math.nan
    return Decision(outcome, chosen, lower, upper, crit, cand.n_common, math.nan)


def _upper(e: Estimate | None) -> float:
    return e.hi if e is not None else math.nan


def common_prompts(paired: list[Paired]) -> list[Paired]:
    """Every candidate restricted to the prompts all of them measured (one cluster a prompt:
    repeats summed, as the resampling unit is the prompt — docs/theory.md §7)."""
    common = set(paired[0].keys)
    for p in paired[1:]:
        common &= set(p.keys)
    keys = [k for k in paired[0].keys if k in common]
    return [p.restricted(keys) for p in paired]


def cluster_pivots(paired: list[Paired]) -> RatioPivots:
    """The K candidates' speedup pivots over their common prompts, repeats summed per prompt."""
    common = common_prompts(paired)
    clusters = common[0].clusters
    arrays = [cluster_sums(p.arrays(), clusters) for p in common]
    tn, mn, tb, mb = (np.stack([a[j] for a in arrays]) for j in range(4))
    return throughput_pivots(tn, mn, tb, mb)


def decision_numbers(
    piv: RatioPivots, d: Decision, k: int, margin: float, alpha: float
) -> DecisionNumbers:
    """What every verdict states beside its outcome: prompts, effective prompts, the test's
    resolution, the speedup it detects with 80 % power, and for UNDECIDED the prompts that would
    likely settle it (docs/theory.md §8)."""
    line = 1.0 + margin
    n, k_count = d.n, piv.y.shape[0]
    se = signflip.se_log(piv, k, line) if n >= 2 else math.nan
    ratio = signflip.detectable_ratio(se, n, alpha, k_count)
    detectable = line * ratio if ratio <= MAX_RELATIVE else None
    out = DecisionNumbers(
        n_prompts=n,
        n_eff=json_num(d.n_eff),
        min_prompts=signflip.min_prompts(alpha),
        detectable_speedup=json_num(detectable),
    )
    if d.outcome == "undecided":
        est = float(piv.estimates[k])
        effect = abs(math.log(est / line)) if est > 0 else math.nan
        need = signflip.prompts_for_power(effect, se * math.sqrt(n), alpha, k_count)
        if n < signflip.min_prompts(alpha) and need is not None:
            need = max(need, signflip.min_prompts(alpha))
        out.prompts_needed = need
    return out


MAX_RELATIVE = 11.0  # a detectable change above +1000 % is printed as unbounded


def need_text(need: int | None, n: int) -> str:
    if need is None:
        return f"not settled within {signflip.MORE_CAP:,} prompts at the measured effect"
    return f"needs about {need} prompts in all ({max(need - n, 0)} more) for 80 % power"


@dataclass(frozen=True)
class WorkloadDecision:
    """The three-outcome test over a workload's K measured settings (in `keys` order), with the
    marginal estimates and the pivots it rests on: what `recommend` words and what the engine
    ranking's "clears" reads, so the two cannot disagree."""

    keys: list[SettingKey]
    marginal: dict[SettingKey, Estimate | None]
    pivots: RatioPivots
    decision: Decision


def workload_decision(
    base: list[RecordLine],
    settings: dict[SettingKey, list[RecordLine]],
    margin: float,
    level: float,
    n_boot: int,
    seed: int = DEFAULT_SEED,
) -> WorkloadDecision | None:
    """ON / OFF / UNDECIDED over every measured setting paired with the baseline (module
    docstring; docs/theory.md §8, §15 for interleaved engine starts); None when none was."""
    paired = {k: pair(base, recs) for k, recs in settings.items()}
    paired = {k: p for k, p in paired.items() if len(p)}
    keys = list(paired)
    if not keys:
        return None
    marginal = {k: speedup_of(paired[k], n_boot, level) for k in keys}
    plist = [paired[k] for k in keys]
    piv = cluster_pivots(plist)
    alpha = 1.0 - one_sided(level)
    crossed = all(p.by_start for p in plist)
    d = (
        _crossed_decision(candidates(keys, plist, marginal, level, n_boot, seed), margin, alpha)
        if crossed
        else None
    ) or signflip.decide(piv, 1.0 + margin, alpha)
    return WorkloadDecision(keys, marginal, piv, d)


def recommend(
    base: list[RecordLine],
    settings: dict[SettingKey, list[RecordLine]],
    margin: float,
    level: float,
    n_boot: int,
    seed: int = DEFAULT_SEED,
) -> Recommendation:
    """The selection-aware three-outcome verdict for one workload × temperature (module
    docstring; docs/theory.md §8). Its `itl_ms` and `model_optimum` are the entry's
    (`decide_entry` sets them)."""
    alpha = 1.0 - one_sided(level)
    rec = Recommendation(
        rule=RULE,
        candidates=0,
        false_on_rate=json_num(alpha),
        false_off_rate=json_num(alpha),
        margin=margin,
        gamma=0,
        verdict="not_measured",
        speedup=None,
        reason="no speculative setting was measured (only the baseline): not a verdict",
        itl_ms=None,
        model_optimum=None,
    )
    wd = workload_decision(base, settings, margin, level, n_boot, seed)
    if wd is None:
        return rec
    keys, marginal, piv, d = wd.keys, wd.marginal, wd.pivots, wd.decision
    rec.candidates = len(keys)
    points = {k: _value(marginal[k]) for k in keys}
    best = max(keys, key=lambda k: points[k] if math.isfinite(points[k]) else -math.inf)
    kb = keys.index(best)
    numbers = decision_numbers(piv, d, d.chosen if d.chosen is not None else kb, margin, alpha)
    for name in numbers.model_fields_set:
        setattr(rec, name, getattr(numbers, name))
    rec.critical_value = json_num(d.critical_on)
    line = 1.0 + margin
    basis = (
        f"{d.n} prompts, effective {d.n_eff:.1f}" if math.isfinite(d.n_eff) else f"{d.n} prompts"
    )
    if d.outcome == "on" and d.chosen is not None:
        chosen = keys[d.chosen]
        rec.drafter, rec.policy, rec.gamma = chosen
        rec.verdict = "on"
        rec.speedup = est_model(marginal[chosen])
        rec.decision_lower_bound = json_num(d.lower[d.chosen])
        rec.reason = (
            f"simultaneous lower bound {d.lower[d.chosen]:.3f} > 1 + margin {margin:g} "
            f"(best of {len(keys)} settings, selection accounted for; {basis})"
        )
        return rec
    rec.speedup = EstimateJSON(value=1.0, ci95=(1.0, 1.0))
    rec.best_measured = setting_speedup(
        best, est_model(marginal[best]), (json_num(d.lower[kb]), json_num(d.upper[kb]))
    )
    if d.outcome == "off":
        worst = min(keys, key=lambda k: points[k] if math.isfinite(points[k]) else math.inf)
        rec.verdict = "off"
        rec.reason = (
            f"shown not to pay: every setting's upper bound is below 1 + margin {line:g} "
            f"(best {setting_name(best)}: {points[best]:.3f}×, upper bound {d.upper[kb]:.3f}; {basis})"
        )
        rec.loss_avoided = setting_speedup(worst, est_model(marginal[worst]))
        return rec
    if d.n < signflip.min_prompts(alpha):
        why = (
            f"{d.n} prompts cannot decide at a {alpha:.1%} error rate (the test needs at least "
            f"{signflip.min_prompts(alpha)})"
        )
    else:
        why = (
            f"best setting {setting_name(best)} gives {points[best]:.3f}×; its bounds "
            f"[{fmt_bound(d.lower[kb])}, {fmt_bound(d.upper[kb])}] contain 1 + margin {line:g} ({basis})"
        )
    rec.verdict = "undecided"
    rec.reason = f"undecided, speculation stays off: {why}; " + need_text(rec.prompts_needed, d.n)
    return rec


def fmt_bound(x: float) -> str:
    return f"{x:.3f}" if math.isfinite(x) else "unbounded"


def decide_entry(
    quoted: QuotedFigures,
    base: list[RecordLine],
    settings: dict[SettingKey, list[RecordLine]],
    failed: list[RecordLine],
    margin: float,
    level: float,
    n_boot: int,
) -> Recommendation:
    """The workload's recommendation over every measured setting (`analysis.decide.recommend`), or
    "not_measured" when its speculative settings produced no record but failures; with the ITLs
    it compares and the model's optimum, from the entry's figures."""
    rec = recommend(base, settings, margin, level, n_boot)
    measured = any(recs for recs in settings.values())
    if not measured and any(f.get("gamma") for f in failed):
        rec.verdict = "not_measured"
        rec.reason = f"every speculative setting failed ({len(failed)} failed units): not a verdict"
    base_itl = quoted.baseline_itl_ms
    rec.itl_ms = ItlPair(
        baseline=base_itl, speculative=quoted.itl_at(rec) if rec.verdict == "on" else base_itl
    )
    rec.model_optimum = quoted.model_optimum
    return rec
