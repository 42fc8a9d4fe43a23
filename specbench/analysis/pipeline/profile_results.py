"""results.json's `profile_decision`: the decision at the deployment profile, from the run's mix
batches (`analysis.serving.mix_batches`) and the stored config's profile (config/profile.py;
`analysis.decide.profile_decision`, docs/theory.md §22). None when the run has no profile or no
mix batch: its decisions are then the per-temperature ones at batch 1."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specbench.analysis.decide.profile_cost import Cost, ServerPrice
from specbench.analysis.decide.profile_decision import (
    Attainment,
    ProfileVerdict,
    decide_at_profile,
)
from specbench.analysis.decide.profile_runs import (
    COST,
    OFF,
    LoadRun,
    SloTargets,
    TimedRequest,
)
from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_profile import (
    ProfileCandidate,
    ProfileDecision,
    ServerPriceJSON,
    SloAttainment,
)
from specbench.analysis.serving.mix_batches import MixBatch, mix_batches
from specbench.analysis.serving.spec_counters import SpecCounters, estimates
from specbench.analysis.stats.latency_tails import Slo
from specbench.analysis.stats.serialize import json_num
from specbench.config.load import SloSpec
from specbench.config.profile import DeploymentProfile
from specbench.record_line import RecordLine

RULE = (
    "ON with the eligible setting of highest gain among those whose simultaneous lower bound "
    "> 1 + margin; OFF when every upper bound < 1 + margin; else UNDECIDED. Units: blocks "
    "(repeats), each setting's steady runs of a block paired with OFF's (Student's t on B − 1 df, "
    "max-T over the candidates; docs/theory.md §22)"
)
METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


def slo_targets(profile: DeploymentProfile, run_slo: SloSpec | None) -> SloTargets:
    """The profile's percentile targets (each target the per-request limit, its percentile the
    share of requests asked to meet it); without them, the run's per-request `slo` limits."""
    if profile.slo.any:
        parts = {m: getattr(profile.slo, m) for m in METRICS}
        limits = Slo(*(p.target if p is not None else None for p in parts.values()))
        return SloTargets(limits, {m: p.percentile for m, p in parts.items() if p is not None})
    s = run_slo
    return SloTargets(Slo(s.ttft_ms, s.tpot_ms, s.e2e_ms) if s is not None else Slo())


def load_shares(profile: DeploymentProfile, measured: Iterable[str]) -> dict[str, float]:
    """Each load point's share of the server's time: the profile's concurrency distribution;
    its rates (or trace) in equal shares; else every mix load point measured, equally. The
    names are the records' `load` (harness.serving.arrivals: "rate=2", "steady c=4", "trace")."""
    load = profile.load
    if load.concurrency:
        return {f"steady c={c}": share for c, share in load.concurrency.items()}
    if load.rates:
        return {f"rate={r:g}": 1.0 / len(load.rates) for r in load.rates}
    names = sorted(set(measured))
    if load.trace is not None:
        names = [n for n in names if n == "trace"] or names
    return {n: 1.0 / len(names) for n in names} if names else {}


def load_runs(batches: Sequence[MixBatch]) -> list[LoadRun]:
    return [
        LoadRun(
            setting=OFF if b.gamma == 0 and not b.schedule else b.setting,
            gamma=b.gamma,
            load=b.load,
            block=b.repeat,
            window_s=b.window_s,
            requests=tuple(
                TimedRequest(
                    q.arrival_s, q.ok, q.ttft_ms, q.tpot_ms, q.e2e_ms, q.new_tokens, q.buffered
                )
                for q in b.requests
            ),
            drafter=b.drafter,
            schedule=tuple((int(a), int(z), int(k)) for a, z, k in b.schedule)
            if b.schedule
            else None,
        )
        for b in batches
    ]


def mix_acceptance(
    records: Iterable[Mapping[str, Any]], names: Mapping[str, str]
) -> dict[str, float]:
    """Per fixed-γ setting, the iid acceptance α its mix batches' engine counters imply
    (τ = 1 + accepted / drafts inverted at γ, docs/theory.md §6); `names` maps a drafter label
    and γ to the setting's name."""
    sums: dict[str, SpecCounters] = {}
    gammas: dict[str, int] = {}
    for r in records:
        if r.get("kind") != "engine_metrics" or not r.get("mix") or not r.get("spec_counters"):
            continue
        if r.get("schedule") or not r.get("gamma"):
            continue
        name = names.get(f"{r.get('drafter', '')}@{r['gamma']}")
        if name is None:
            continue
        c = SpecCounters.from_dict(r["spec_counters"])
        sums[name] = sums[name].plus(c) if name in sums else c
        gammas[name] = int(r["gamma"])
    # τ = 1 + accepted / drafts inverted at γ, as every counter reading (serving.spec_counters)
    alphas = {name: estimates(c, gammas[name]).alpha_from_length for name, c in sums.items()}
    return {name: a for name, a in alphas.items() if a is not None}


def profile_section(
    records: Sequence[RecordLine],
    profile: DeploymentProfile | None,
    run_slo: SloSpec | None,
    mix: Mapping[str, float],
    margin: float,
    level: float,
    interleaved: bool,
) -> ProfileDecision | None:
    """results.json's `profile_decision` as its model, or None."""
    if profile is None:
        return None
    batches = mix_batches(records)
    if not batches:
        return None
    runs = load_runs(batches)
    slo = slo_targets(profile, run_slo)
    shares = load_shares(profile, (r.load for r in runs))
    names = {f"{r.drafter}@{r.gamma}": r.setting for r in runs if r.setting != OFF}
    acc = mix_acceptance(records, names)
    p = profile.price  # with a price: the costs per 10⁶ good output tokens (§22)
    price = ServerPrice(p.gpu_hour_usd, p.gpus_per_server or 1) if p.gpu_hour_usd else None
    v = decide_at_profile(
        runs, slo, shares, profile.objective, margin, level, interleaved, acceptance=acc,
        price=price,
    )  # fmt: skip
    return _document(v, slo, mix, acc)


def _attain(a: Sequence[Attainment]) -> list[SloAttainment]:
    return [
        SloAttainment(load=x.load, shares={k: json_num(v) for k, v in x.shares.items()}, met=x.met)
        for x in a
    ]


def _cost(c: Cost | None) -> EstimateJSON | None:
    if c is None:
        return None
    return EstimateJSON(
        value=json_num(c.usd_per_mtok), ci95=(json_num(c.ci95[0]), json_num(c.ci95[1]))
    )


def _sched(s: Sequence[Sequence[int]] | None) -> list[list[int]] | None:
    return [list(x) for x in s] if s else None


def _document(
    v: ProfileVerdict, slo: SloTargets, mix: Mapping[str, float], acc: Mapping[str, float]
) -> ProfileDecision:
    chosen = next((c for c in v.candidates if c.setting == v.chosen), None)
    slo_text = {}
    for m in METRICS:
        limit = getattr(slo.limits, m)
        if limit is not None:
            pct = slo.percentiles.get(m)
            slo_text[m] = f"p{pct:g} ≤ {limit:g} ms" if pct else f"each ≤ {limit:g} ms"
    price = v.price
    return ProfileDecision(
        verdict=v.verdict,
        chosen=v.chosen,
        drafter=chosen.drafter if chosen else None,
        gamma=chosen.gamma if chosen else 0,
        schedule=_sched(chosen.schedule) if chosen else None,
        objective=v.objective,
        unit="good output tokens/s" if v.objective == COST else "good requests/s",
        margin=v.margin,
        false_on_rate=v.false_on_rate,
        false_off_rate=v.false_off_rate,
        off_rate_per_s=json_num(v.off_rate),
        off_attainment=_attain(v.off_attainment),
        price=None
        if price is None
        else ServerPriceJSON(gpu_hour_usd=price.gpu_hour_usd, gpus_per_server=price.gpus),
        off_cost_per_mtok=_cost(v.off_cost),
        candidates=[
            ProfileCandidate(
                setting=c.setting,
                drafter=c.drafter,
                gamma=c.gamma,
                schedule=_sched(c.schedule),
                gain=EstimateJSON(
                    value=json_num(c.gain), ci95=(json_num(c.ci95[0]), json_num(c.ci95[1]))
                ),
                decision_lower_bound=json_num(c.lower),
                decision_upper_bound=json_num(c.upper),
                rate_per_s=json_num(c.rate),
                attainment=_attain(c.attainment),
                eligible=c.eligible,
                acceptance=json_num(acc.get(c.setting)),
                break_even_alpha=json_num(c.break_even_alpha),
                cost_per_mtok=_cost(c.cost),
            )
            for c in v.candidates
        ],
        loads=dict(v.loads),
        mix=dict(mix),
        slo=slo_text,
        blocks=v.blocks,
        critical_value=json_num(v.critical_value) if math.isfinite(v.critical_value) else None,
        blocks_needed=v.blocks_needed,
        interleaved=v.interleaved,
        rule=RULE,
        reason=v.reason,
    )
