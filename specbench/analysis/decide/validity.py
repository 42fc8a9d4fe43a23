"""Is the measurement about real text? Degenerate answers and the verdict without them.

Per workload × temperature (docs/theory.md §13):
- every answer's content checks (`specbench.analysis.estimators.content`, stored with the record by `run`, computed
  from the answers for older records), plus "identical across prompts": an answer of at least
  IDENTICAL_MIN_TOKENS tokens that the same setting also gave to another prompt;
- a prompt is **degenerate** when any of its answers (baseline or speculative, any repeat) is;
- α and the speedup over the non-degenerate prompts only, beside the all-prompt figures, with a
  warning when they differ beyond their intervals;
- the verdict rule: when any prompt is degenerate, the ON/OFF decision (`analysis.decide.recommend`,
  unchanged) is made on the non-degenerate prompts only and says so; with fewer than
  `recommend.MIN_PROMPTS` left it is "not_measured" (degenerate output), never ON or OFF;
- the target's mean log-probability of its answers, averaged within each prompt then over the
  prompts (recorded by specbench's own loops; engine backends have none);
- engine runs (vllm / openai) get the same checks from their stored answers (`engine_validity`).

Per-prompt α, heterogeneity and per-position acceptance are in `analysis.pipeline.acceptance_detail`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.analysis.decide.recommend import MIN_PROMPTS, QuotedFigures, decide_entry, recommend
from specbench.analysis.documents.results_model_base import SettingLabel, est_model
from specbench.analysis.documents.results_model_workload import (
    ContentCheck,
    ContentSubset,
    DegeneratePrompt,
    ItlPair,
    Recommendation,
    VerdictBasis,
)
from specbench.analysis.estimators.acceptance import estimate_alpha
from specbench.analysis.estimators.content import (
    IDENTICAL_MIN_TOKENS,
    AnswerCheck,
    degenerate_reason,
    record_checks,
)
from specbench.analysis.estimators.latency import pair, pooled_itl, speedup_of
from specbench.analysis.stats.resampling import Estimate
from specbench.analysis.stats.serialize import json_num
from specbench.record_line import RecordLine
from specbench.setting import SettingKey

Records = list[RecordLine]


@dataclass
class Validity:
    """Which prompts of a workload × temperature are degenerate, and the records without them."""

    n_prompts: int
    degenerate: dict[str, str]  # prompt id → reason
    clean_base: Records
    clean_settings: dict[SettingKey, Records]
    summary: ContentCheck

    @property
    def n_clean(self) -> int:
        return self.n_prompts - len(self.degenerate)


def _answer_text(rec: RecordLine) -> str:
    return "\x1e".join(str(a) for a in rec.get("answers") or [])


def _answer_key(rec: RecordLine) -> str | None:
    """What "identical across prompts" compares: the answers' text or, for a private prompt
    (data/privacy.py), their keyed digest; None for an answer too short or empty to count."""
    checks = record_checks(rec)
    if sum(c.tokens for c in checks) < IDENTICAL_MIN_TOKENS:
        return None
    if isinstance(rec.get("answers"), list):
        text = _answer_text(rec)
        return text if text.strip() else None
    digest = rec.get("answer_digest")
    if digest and checks and not all(c.empty for c in checks):
        return f"digest {digest}"
    return None


def _setting(rec: RecordLine) -> tuple[str, int, str, str]:
    return (rec["kind"], int(rec["gamma"]), rec.get("drafter", ""), rec.get("policy", ""))


def identical_across_prompts(records: Records) -> dict[int, str]:
    """{id(record): reason} for answers that the same setting gave, verbatim, to another prompt."""
    seen: dict[tuple[Any, str], set[str]] = defaultdict(set)
    keys = {id(r): _answer_key(r) for r in records}
    for r in records:
        if (key := keys[id(r)]) is not None:
            seen[(_setting(r), key)].add(str(r["prompt_id"]))
    out = {}
    for r in records:
        if (key := keys[id(r)]) is None:
            continue
        others = seen.get((_setting(r), key), set()) - {str(r["prompt_id"])}
        if others:
            out[id(r)] = f"identical to the answer to {len(others)} other prompt(s)"
    return out


def _category(reason: str) -> str:
    """ "empty", "repetition" or "identical" (the reasons' leading words, docs/theory.md §13)."""
    for kind in ("empty", "repetition", "identical"):
        if kind in reason:
            return kind
    return "other"


def _share(flags: list[bool]) -> float | None:
    return json_num(sum(flags) / len(flags)) if flags else None


def assess(base: Records, settings: dict[SettingKey, Records]) -> Validity:
    """Flag degenerate prompts and split off the records of the non-degenerate ones."""
    everything = [*base, *(r for recs in settings.values() for r in recs)]
    identical = identical_across_prompts(everything)
    prompts = {str(r["prompt_id"]) for r in everything}
    degenerate: dict[str, str] = {}
    examples: dict[str, str] = {}
    turns: list[AnswerCheck] = []
    logprobs: dict[str, list[float]] = defaultdict(list)  # prompt → its answers' mean log p
    for r in everything:
        checks = record_checks(r)
        turns.extend(checks)
        logprobs[str(r["prompt_id"])] += [
            c.target_mean_logprob for c in checks if c.target_mean_logprob is not None
        ]
        reason = degenerate_reason(checks) or identical.get(id(r))
        pid = str(r["prompt_id"])
        if reason and pid not in degenerate:
            degenerate[pid] = reason
            examples[pid] = _answer_text(r).replace("\x1e", " ")[-80:]
    clean_base = [r for r in base if str(r["prompt_id"]) not in degenerate]
    clean_settings = {
        k: [r for r in recs if str(r["prompt_id"]) not in degenerate]
        for k, recs in settings.items()
    }
    kinds = Counter(_category(reason) for reason in degenerate.values())
    summary = ContentCheck(
        checked=bool(turns),
        n_prompts=len(prompts),
        n_degenerate=len(degenerate),
        degenerate_share=json_num(len(degenerate) / len(prompts)) if prompts else None,
        reasons=dict(sorted(kinds.items())),
        degenerate_prompts=[
            DegeneratePrompt(prompt_id=pid, reason=degenerate[pid], answer_tail=examples[pid])
            for pid in sorted(degenerate)
        ],
        answers=len(turns),
        hit_length_limit_share=_share([c.hit_length_limit for c in turns]),
        early_eos_share=_share([c.early_eos for c in turns]),
        empty_share=_share([c.empty for c in turns]),
        median_repeated_ngram_share=_median([c.repeated_ngram_share for c in turns]),
        median_compression_ratio=_median([c.compression_ratio for c in turns]),
        # docs/theory.md §13: near 0 with repetition = the target loops; low = sampled noise
        mean_target_logprob=_prompt_mean(logprobs, lambda pid: True),
        mean_target_logprob_degenerate=_prompt_mean(logprobs, lambda pid: pid in degenerate),
        mean_target_logprob_non_degenerate=_prompt_mean(
            logprobs, lambda pid: pid not in degenerate
        ),
    )
    return Validity(len(prompts), degenerate, clean_base, clean_settings, summary)


def _prompt_mean(by_prompt: dict[str, list[float]], keep: Callable[[str], bool]) -> float | None:
    """Mean over the kept prompts of each prompt's mean (each prompt weighs the same, however
    many answers and settings it has); None when no kept prompt has a value."""
    means = [float(np.mean(v)) for pid, v in by_prompt.items() if v and keep(pid)]
    return json_num(round(float(np.mean(means)), 4)) if means else None


def _median(values: list[Any]) -> float | None:
    v = [float(x) for x in values if x is not None]
    return json_num(float(np.median(v))) if v else None


def _disjoint(a: Estimate | None, b: Estimate | None) -> bool:
    """The two intervals do not overlap (both fully known). A subset of a few prompts has a wide
    interval, so a warning then needs a difference the data can actually show."""
    if a is None or b is None:
        return False
    if not all(math.isfinite(x) for x in (a.lo, a.hi, b.lo, b.hi)):
        return False
    return a.hi < b.lo or b.hi < a.lo


@dataclass(frozen=True)
class CleanComparison:
    """An entry's content section (α and the speedup over all and over the non-degenerate
    prompts) and the warnings it adds (docs/theory.md §13)."""

    content: ContentCheck
    warnings: list[str]


def compare_clean(
    v: Validity,
    rec: Recommendation,
    base: Records,
    primary: dict[int, Records],
    settings: dict[SettingKey, Records],
    margin: float,
    level: float,
    n_boot: int,
) -> CleanComparison:
    """α and the speedup over all and over the non-degenerate prompts beside the entry's
    recommendation `rec`, and a warning when a workload has degenerate answers
    (docs/theory.md §13)."""
    summary = v.summary.model_copy()
    warnings: list[str] = []
    if not v.degenerate:
        return CleanComparison(summary, warnings)
    gamma_max = max(primary) if primary else 0
    # what the verdict would have been with the degenerate answers counted, and its setting
    all_rec = recommend(base, settings, margin, level, n_boot)
    chosen = all_rec if all_rec.verdict == "on" else all_rec.best_measured
    key: SettingKey | None = (
        (chosen.drafter or "", chosen.policy or "fixed", int(chosen.gamma))
        if chosen is not None and chosen.gamma
        else None
    )
    if key is not None and key not in settings:
        key = None
    all_alpha = clean_alpha = all_speed = clean_speed = None
    if gamma_max:
        all_spec = [r for rs in primary.values() for r in rs]
        clean_spec = [r for r in all_spec if str(r["prompt_id"]) not in v.degenerate]
        all_alpha = estimate_alpha(all_spec, gamma_max, n_boot, level).exact_beta
        if clean_spec:
            clean_alpha = estimate_alpha(clean_spec, gamma_max, n_boot, level).exact_beta
    if key is not None:
        all_speed = speedup_of(pair(base, settings[key]), n_boot, level)
        clean_speed = speedup_of(pair(v.clean_base, v.clean_settings[key]), n_boot, level)
    summary.all_prompts = ContentSubset(
        n_prompts=v.n_prompts,
        alpha=est_model(all_alpha),
        speedup=est_model(all_speed),
        verdict=all_rec.verdict,
    )
    summary.non_degenerate = ContentSubset(
        n_prompts=v.n_clean,
        alpha=est_model(clean_alpha),
        speedup=est_model(clean_speed),
        verdict=rec.verdict,
    )
    summary.speedup_setting = (
        SettingLabel(drafter=key[0], policy=key[1], gamma=key[2]) if key is not None else None
    )
    reasons = ", ".join(f"{k} {n}" for k, n in summary.reasons.items())
    basis = (
        f"the verdict uses the {v.n_clean} non-degenerate prompts"
        if v.n_clean >= MIN_PROMPTS
        else "too few answers are real text for a verdict: not measured"
    )
    warnings.append(
        f"degenerate output: {len(v.degenerate)} of {v.n_prompts} prompts' answers are degenerate "
        f"({reasons}); {basis} (docs/theory.md §13)"
    )
    if _disjoint(all_alpha, clean_alpha) or _disjoint(all_speed, clean_speed):
        a_all = f"{all_alpha.value:.2f}" if all_alpha else "–"
        a_cl = f"{clean_alpha.value:.2f}" if clean_alpha else "–"
        s_all = f"{all_speed.value:.2f}×" if all_speed else "–"
        s_cl = f"{clean_speed.value:.2f}×" if clean_speed else "–"
        higher = (all_speed.value if all_speed else 0) > (clean_speed.value if clean_speed else 0)
        word = (
            "inflated"
            if higher or (all_alpha and clean_alpha and all_alpha.value > clean_alpha.value)
            else "distorted"
        )
        warnings.append(
            f"α {a_all} over all prompts, {a_cl} over the {v.n_clean} of {v.n_prompts} "
            f"non-degenerate ones (speedup {s_all} vs {s_cl}): the workload's speedup is {word} "
            "by repetition; make max_new_tokens realistic, use the chat template, or use sampling"
        )
        summary.differs_beyond_intervals = True
    else:
        summary.differs_beyond_intervals = False
    return CleanComparison(summary, warnings)


def restrict_verdict(v: Validity, rec: Recommendation, n_boot: int, level: float) -> None:
    """Label the recommendation (already made on the non-degenerate prompts) with its basis, or
    turn it into "not_measured" when too few prompts are left (module docstring); in place."""
    rec.basis = VerdictBasis(
        prompts="non_degenerate" if v.degenerate else "all",
        n_used=v.n_clean,
        n_degenerate_excluded=len(v.degenerate),
    )
    if not v.degenerate:
        return
    if v.n_clean < MIN_PROMPTS:
        base_itl = rec.itl_ms.baseline if rec.itl_ms is not None else None
        rec.verdict = "not_measured"
        rec.gamma = 0
        rec.speedup = None
        rec.itl_ms = ItlPair(baseline=base_itl, speculative=base_itl)
        rec.reason = (
            f"degenerate output ({len(v.degenerate)} of {v.n_prompts} "
            f"prompts' answers are degenerate, {v.n_clean} left)"
        )
        return
    if rec.verdict == "on":
        key = (rec.drafter or "", rec.policy or "fixed", int(rec.gamma))
        base_itl_est = pooled_itl(v.clean_base, n_boot, level)
        spec_itl = pooled_itl(v.clean_settings.get(key, []), n_boot, level)
        rec.itl_ms = ItlPair(
            baseline=json_num(base_itl_est.value) if base_itl_est else None,
            speculative=json_num(spec_itl.value) if spec_itl else None,
        )
    rec.reason = (
        f"over the {v.n_clean} of {v.n_prompts} non-degenerate prompts "
        f"({len(v.degenerate)} degenerate excluded): {rec.reason}"
    )


@dataclass(frozen=True)
class CheckedVerdict:
    """An engine entry's verdict after its content checks (`engine_validity`): the
    recommendation (remade on the non-degenerate prompts when some are degenerate), the content
    section, the warnings the checks add, and the records the verdict rests on."""

    recommendation: Recommendation
    content: ContentCheck
    warnings: list[str]
    base: Records
    settings: dict[SettingKey, Records]


def engine_validity(
    rec: Recommendation,
    quoted: QuotedFigures,
    base: Records,
    settings: dict[SettingKey, Records],
    failed: Records,
    margin: float,
    level: float,
    n_boot: int,
) -> CheckedVerdict:
    """Content checks for an engine run's entry (vllm / openai) whose recommendation over every
    prompt is `rec`: the same checks, computed from the stored answers (and token ids when kept),
    on the reference-concurrency records the verdict uses. With degenerate prompts the decision is
    remade on the rest, exactly as for the transformers backend; α over all vs non-degenerate
    prompts is not available (the engine's counters are per batch, not per prompt), the speedup
    is."""
    v = assess(base, settings)
    if v.degenerate:
        rec = decide_entry(quoted, v.clean_base, v.clean_settings, failed, margin, level, n_boot)
    restrict_verdict(v, rec, n_boot, level)
    clean = compare_clean(v, rec, base, {}, settings, margin, level, n_boot)
    if v.degenerate:
        return CheckedVerdict(rec, clean.content, clean.warnings, v.clean_base, v.clean_settings)
    return CheckedVerdict(rec, clean.content, clean.warnings, base, settings)


def degenerate_only(rec: Recommendation) -> bool:
    """True when the workload has no verdict because too few answers are real text: it then
    stays out of the pool-wide decision (which pairs every workload's prompts)."""
    excluded = rec.basis.n_degenerate_excluded if rec.basis is not None else 0
    return rec.verdict == "not_measured" and excluded > 0
