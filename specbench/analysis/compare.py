"""Compare two runs: which metrics moved, per workload × temperature, and is it a regression?

Pure (numpy); `specbench compare BASE NEW` loads the two sides and renders the rows.

A change is a **regression** only if it is statistically significant (two-sided p < significance,
default 0.05) AND worse than a minimum effect (defaults: α drop 0.02 absolute; accepted length,
speedup and tokens/s drop 5 %; per-token latency rise 5 %, relative to the base value). Each row:

    regressed / improved      significant and beyond the minimum effect
    not significant           beyond the minimum effect, but p ≥ significance (measure more)
    unchanged                 within the minimum effect (collapsed into one line by reports)
    not comparable            missing on a side, or timing that cannot be compared (below)

A verdict flip ON → OFF is always reported (its row is never collapsed); it counts as a
regression when the speedup behind it — measured at the base's recommended setting in both runs —
regressed, and is marked "not significant" when that speedup did not move beyond noise and the
minimum effect (a verdict sitting on its threshold, CI low end vs 1 + margin, flips on noise).

Timing rows are "not comparable" (acceptance rows are still compared) when the hardware or
software differs (env.json: device, gpu, cpu, cpu_threads, torch, transformers), when a run flagged
its own timing as unstable for that workload × temperature, or when the machine's speed drifted
between the runs: same specbench commit, models, prompts and environment, yet the target-only
baseline latency (the control) moved significantly beyond the minimum latency effect. A
per-prompt test cannot see such run-level drift. `gate_unstable_timing` gates timing anyway.

Statistics. Every metric is a ratio of sums over prompts, Σ num / Σ den (α = Σ β over verified
positions / their count; accepted length τ = Σ (rounds + accepted) / Σ rounds; latency = mean
per-prompt TPOT; speedup = mean spec tokens/s ÷ mean baseline tokens/s over the same prompts, as in
results.json). With per-prompt records on both sides the p-value comes from a bootstrap of
Δ = new − base: paired (prompts resampled jointly) when both sides ran the same prompts, else two
independent resamples; p = 2·min(P*(Δ* ≤ 0), P*(Δ* ≥ 0)), at least 1/B. With only results.json on
a side, the stored confidence intervals are used under a normal approximation
(se = CI width / (2·z)), and the comparison says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as sps

from specbench.analysis.acceptance import per_prompt

IMPROVED = "improved"
REGRESSED = "regressed"
UNCHANGED = "unchanged"
NOT_SIGNIFICANT = "not significant"
NOT_COMPARABLE = "not comparable"
STATUSES = (REGRESSED, IMPROVED, NOT_SIGNIFICANT, NOT_COMPARABLE, UNCHANGED)

ACCEPTANCE, TIMING = "acceptance", "timing"
ENV_KEYS = ("device", "gpu", "cpu", "cpu_threads", "torch", "transformers")
FEW_PROMPTS = 10
MISSING = "missing on one side"
OTHER_HARDWARE = "different hardware/software"


class Thresholds(BaseModel):
    """When a change counts: significance and minimum effects (YAML keys of `--thresholds`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    significance: float = Field(default=0.05, gt=0.0, lt=1.0)
    alpha_drop: float = Field(default=0.02, ge=0.0)  # absolute drop of α (exact β)
    accepted_length_drop: float = Field(default=0.05, ge=0.0)  # relative drop of τ
    speedup_drop: float = Field(default=0.05, ge=0.0)  # relative drop of the measured speedup
    latency_rise: float = Field(default=0.05, ge=0.0)  # relative rise of per-token latency
    throughput_drop: float = Field(default=0.05, ge=0.0)  # relative drop of decode tokens/s
    bootstrap: int = Field(default=2000, ge=200)
    seed: int = 20240101


@dataclass(frozen=True)
class Metric:
    """How one metric is judged."""

    name: str
    label: str
    kind: str  # ACCEPTANCE or TIMING
    higher_is_better: bool
    threshold: str  # the Thresholds field giving its minimum effect
    relative: bool  # minimum effect relative to the base value (else absolute)


METRICS = {
    m.name: m
    for m in (
        Metric("alpha", "α (exact β)", ACCEPTANCE, True, "alpha_drop", False),
        Metric(
            "accepted_length", "accepted length τ", ACCEPTANCE, True, "accepted_length_drop", True
        ),
        Metric("baseline_itl_ms", "baseline ITL ms", TIMING, False, "latency_rise", True),
        Metric("baseline_tokens_per_s", "baseline tokens/s", TIMING, True, "throughput_drop", True),
        Metric("itl_ms", "ITL ms", TIMING, False, "latency_rise", True),
        Metric("tokens_per_s", "tokens/s", TIMING, True, "throughput_drop", True),
        Metric("speedup", "speedup", TIMING, True, "speedup_drop", True),
        Metric("speedup_recommended", "speedup at recommended", TIMING, True, "speedup_drop", True),
    )
}


# ---------------------------------------------------------------------------------------------
# per-prompt samples and stored summaries


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


def _sum_by_key(parts: list[Samples]) -> Samples:
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
        out[f"alpha@{g}"] = _sum_by_key([Samples(keys, pp.beta_sum, pp.verified)])
        out[f"accepted_length@{g}"] = _sum_by_key(
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


# ---------------------------------------------------------------------------------------------
# the two sides


@dataclass(frozen=True)
class Recommendation:
    verdict: str  # "on" | "off"
    gamma: int  # 0 when off
    setting: str  # "drafter/policy" of the recommendation
    best_gamma: int | None  # γ of the best measured speedup (ON or not)

    def text(self) -> str:
        if self.verdict == "on":
            return f"ON γ={self.gamma}"
        return f"OFF (best measured γ={self.best_gamma})" if self.best_gamma else "OFF"


@dataclass
class Group:
    """One workload × temperature of one run."""

    workload: str
    temperature: float
    gammas: list[int]  # measured γ of the primary drafter, fixed policy
    summaries: dict[str, Summary]
    samples: dict[str, Samples] | None = None  # None: only results.json was given
    recommendation: Recommendation | None = None
    n_prompts: int = 0
    timing_warnings: list[str] = field(default_factory=list)  # the run's "unstable timing" notes
    primary: str = "model/fixed"  # the primary drafter with the fixed policy


@dataclass
class Side:
    label: str
    identity: dict[str, Any]  # what must match to compare at all
    env: dict[str, Any]
    groups: dict[tuple[str, float], Group]
    ci_level: float = 0.95
    has_records: bool = False

    @property
    def code(self) -> str | None:
        """The specbench git commit that produced the run (env.json), if known."""
        return self.env.get("specbench_git_commit") or None


def _summary(est: dict[str, Any] | None) -> Summary:
    if not est:
        return Summary(None, None, None)
    lo, hi = (est.get("ci95") or [None, None])[:2]
    return Summary(est.get("value"), lo, hi)


def _recommendation(entry: dict[str, Any], primary: str) -> Recommendation:
    rec = entry.get("recommendation") or {}
    measured = [
        r for r in entry.get("gammas", []) if (r.get("measured_speedup") or {}).get("value")
    ]
    best = max(measured, key=lambda r: r["measured_speedup"]["value"], default=None)
    return Recommendation(
        verdict=str(rec.get("verdict", "off")),
        gamma=int(rec.get("gamma") or 0),
        setting=f"{rec.get('drafter') or primary}/{rec.get('policy') or 'fixed'}",
        best_gamma=best["gamma"] if best else None,
    )


def _timing_warnings(entry: dict[str, Any]) -> list[str]:
    return [w for w in entry.get("warnings", []) if str(w).startswith("unstable timing")]


def _entry_summaries(entry: dict[str, Any], primary: str) -> tuple[list[int], dict[str, Summary]]:
    out = {
        "alpha": _summary(entry.get("alpha")),
        "baseline_itl_ms": _summary(entry.get("baseline_itl_ms")),
        "baseline_tokens_per_s": _summary(entry.get("baseline_tokens_per_s")),
    }
    for m in entry.get("methods", []):
        out[setting_key(f"{m['drafter']}/{m['policy']}", int(m["gamma"]))] = _summary(
            m.get("measured_speedup")
        )
    gammas = []
    for row in entry.get("gammas", []):
        if not row.get("measured"):
            continue
        g = int(row["gamma"])
        gammas.append(g)
        out[f"accepted_length@{g}"] = _summary(row.get("mean_tokens_per_round"))
        out[f"itl_ms@{g}"] = _summary(row.get("itl_ms"))
        out[f"tokens_per_s@{g}"] = _summary(row.get("tokens_per_s"))
        out[f"speedup@{g}"] = _summary(row.get("measured_speedup"))
        out.setdefault(setting_key(primary, g), out[f"speedup@{g}"])
    return gammas, out


def _identity(run: dict[str, Any], schema: Any, config: dict[str, Any] | None) -> dict[str, Any]:
    sampling = run.get("sampling") or {}
    ident: dict[str, Any] = {
        "results schema": schema,
        "target model": run.get("target"),
        "draft model": run.get("draft"),
        "top_p": sampling.get("top_p"),
        "top_k": sampling.get("top_k"),
        "max_new_tokens": run.get("max_new_tokens"),
    }
    for role in ("target", "draft"):
        spec = (config or {}).get(role) or {}
        ident[f"{role} revision"] = spec.get("revision")
        ident[f"{role} dtype"] = spec.get("dtype")
    return ident


def side_from_results(results: dict[str, Any], label: str) -> Side:
    """A side known only by its results.json (stored CIs, no per-prompt values)."""
    run = results.get("run") or {}
    groups = {}
    for e in results.get("workloads", []):
        # build_results names the primary drafter in the fixed-γ recommendation (kept apart as
        # `fixed_gamma_recommendation` when another drafter/policy won)
        rec = e.get("recommendation") or {}
        own = (rec.get("fixed_gamma_recommendation") or rec).get("drafter")
        prim = f"{own or run.get('drafter') or 'model'}/fixed"
        gammas, summaries = _entry_summaries(e, prim)
        groups[(e["workload"], float(e["temperature"]))] = Group(
            e["workload"],
            float(e["temperature"]),
            gammas,
            summaries,
            None,
            _recommendation(e, prim.split("/")[0]),
            int(e.get("n_prompts") or 0),
            _timing_warnings(e),
            prim,
        )
    level = float(run.get("ci_level") or 0.95)
    return Side(
        label,
        _identity(run, results.get("schema"), None),
        results.get("env") or {},
        groups,
        level,
        False,
    )


def side_from_records(
    records: list[dict[str, Any]],
    config: dict[str, Any],
    env: dict[str, Any],
    label: str,
    results: dict[str, Any] | None = None,
) -> Side:
    """A side from a run's records (per-prompt values), with its results (recommendation) when
    given — `build_results(records, config, env)` computes them."""
    draft = config.get("draft") or {}
    label_primary = draft.get("name") or draft.get("method", "model")
    primary = f"{label_primary}/fixed"
    by_group: dict[tuple[str, float], dict[str, Any]] = {}
    for rec in records:
        key = (rec["workload"], float(rec["temperature"]))
        grp = by_group.setdefault(key, {"baseline": [], "settings": {}})
        if rec["kind"] == "baseline":
            grp["baseline"].append(rec)
        elif rec["kind"] == "spec":
            setting = f"{rec.get('drafter') or label_primary}/{rec.get('policy') or 'fixed'}"
            grp["settings"].setdefault(setting, {}).setdefault(int(rec["gamma"]), []).append(rec)
    entries = {
        (e["workload"], float(e["temperature"])): e for e in (results or {}).get("workloads", [])
    }
    groups = {}
    for key, grp in by_group.items():
        if not grp["baseline"]:
            continue
        fixed = grp["settings"].get(primary, {})
        samples = group_samples(grp["baseline"], fixed)
        for setting, by_gamma in grp["settings"].items():
            for g, recs in by_gamma.items():
                samples[setting_key(setting, g)] = speedup_samples(grp["baseline"], recs)
        entry = entries.get(key)
        groups[key] = Group(
            key[0],
            key[1],
            sorted(fixed),
            _entry_summaries(entry, primary)[1] if entry else {},
            samples,
            _recommendation(entry, label_primary) if entry else None,
            len({r["prompt_id"] for r in grp["baseline"]}),
            _timing_warnings(entry) if entry else [],
            primary,
        )
    run = (results or {}).get("run") or {
        "target": (config.get("target") or {}).get("model"),
        "draft": draft.get("model") or draft.get("method"),
        "sampling": config.get("sampling"),
        "max_new_tokens": config.get("max_new_tokens"),
    }
    ident = _identity(run, (results or {}).get("schema"), config)
    ident["records schema"] = sorted({int(r.get("schema", 0)) for r in records})
    level = float((config.get("decision") or {}).get("ci_level") or 0.95)
    return Side(label, ident, env, groups, level, True)


# ---------------------------------------------------------------------------------------------
# comparability


@dataclass(frozen=True)
class Difference:
    field: str
    base: Any
    new: Any


def identity_differences(base: Side, new: Side) -> list[Difference]:
    """Schema, models or sampling settings that differ: the runs measure different things."""
    out = []
    for k in sorted(set(base.identity) & set(new.identity)):
        b, n = base.identity[k], new.identity[k]
        if b is None or n is None:
            continue  # unknown on one side (e.g. only results.json there)
        if b != n:
            out.append(Difference(k, b, n))
    return out


def env_differences(base: Side, new: Side) -> list[Difference]:
    """Hardware or software that differs: timings are not comparable."""
    return [
        Difference(k, base.env.get(k), new.env.get(k))
        for k in ENV_KEYS
        if (base.env.get(k) or None) != (new.env.get(k) or None)
    ]


# ---------------------------------------------------------------------------------------------
# tests


@dataclass(frozen=True)
class DiffTest:
    change: float  # new − base
    p_value: float | None
    ci: tuple[float, float] | None  # (1 − significance) interval of the change
    method: str


def bootstrap_difference(
    base: Samples, new: Samples, n_boot: int, level: float, seed: int
) -> DiffTest:
    """Bootstrap of Δ = new − base of a ratio-of-sums statistic; paired when the keys match."""
    change = new.value - base.value
    if len(base) < 2 or len(new) < 2:
        return DiffTest(change, None, None, "too few prompts to test")
    rng = np.random.default_rng(seed)
    paired = set(base.keys) == set(new.keys) and len(set(base.keys)) == len(base.keys)
    if paired:
        order = {k: i for i, k in enumerate(base.keys)}
        j = np.asarray([order[k] for k in new.keys])
        bn, bd = base.num, base.den
        nn, nd = np.empty_like(new.num), np.empty_like(new.den)
        nn[j], nd[j] = new.num, new.den
        idx = rng.integers(0, len(base), size=(n_boot, len(base)))
        ib = idx_n = idx
        method = f"paired bootstrap over {len(base)} prompts"
    else:
        bn, bd, nn, nd = base.num, base.den, new.num, new.den
        ib = rng.integers(0, len(base), size=(n_boot, len(base)))
        idx_n = rng.integers(0, len(new), size=(n_boot, len(new)))
        method = f"two-sample bootstrap ({len(base)} vs {len(new)} prompts)"
    with np.errstate(invalid="ignore", divide="ignore"):
        delta = nn[idx_n].sum(1) / nd[idx_n].sum(1) - bn[ib].sum(1) / bd[ib].sum(1)
    delta = delta[np.isfinite(delta)]
    if len(delta) == 0:
        return DiffTest(change, None, None, method)
    eps = 1e-12 * max(1.0, abs(change))
    p = 2 * min(float(np.mean(delta <= eps)), float(np.mean(delta >= -eps)))
    p = min(1.0, max(p, 1.0 / n_boot))
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(delta, [tail, 100 - tail])
    return DiffTest(change, p, (float(lo), float(hi)), method)


def normal_difference(base: Summary, new: Summary, ci_level: float, level: float) -> DiffTest:
    """Δ = new − base with se from the stored CIs: se = (hi − lo) / (2·z_{(1+ci_level)/2})."""
    assert base.value is not None and new.value is not None
    change = new.value - base.value
    method = "normal approximation from stored CIs"
    if None in (base.lo, base.hi, new.lo, new.hi):
        return DiffTest(change, None, None, method + " (a CI is missing)")
    z = float(sps.norm.ppf(0.5 + ci_level / 2))
    se = math.hypot((base.hi - base.lo) / (2 * z), (new.hi - new.lo) / (2 * z))  # type: ignore[operator]
    if se == 0:
        return DiffTest(change, 0.0 if change else 1.0, (change, change), method)
    p = float(2 * sps.norm.sf(abs(change) / se))
    half = float(sps.norm.ppf(0.5 + level / 2)) * se
    return DiffTest(change, p, (change - half, change + half), method)


def judge(
    metric: Metric, base_value: float, test: DiffTest, th: Thresholds
) -> tuple[str, float | None]:
    """(status, relative change) of one metric from its test and the thresholds."""
    rel = test.change / base_value if base_value else None
    effect = abs(rel) if metric.relative and rel is not None else abs(test.change)
    if metric.relative and rel is None:
        effect = math.inf if test.change else 0.0
    minimum = float(getattr(th, metric.threshold))
    if not effect > minimum:
        return UNCHANGED, rel
    if test.p_value is None or test.p_value >= th.significance:
        return NOT_SIGNIFICANT, rel
    worse = test.change < 0 if metric.higher_is_better else test.change > 0
    return (REGRESSED if worse else IMPROVED), rel


# ---------------------------------------------------------------------------------------------
# the comparison


@dataclass(frozen=True)
class Row:
    workload: str
    temperature: float
    metric: str  # "alpha", "speedup@4", "speedup_recommended", "verdict", …
    label: str
    kind: str
    status: str
    base: float | str | None
    new: float | str | None
    change: float | None = None
    relative_change: float | None = None
    p_value: float | None = None
    ci: tuple[float, float] | None = None
    method: str = ""
    note: str = ""
    reason: str = ""  # why a row is not comparable (hardware/software, unstable timing, drift)


@dataclass
class Comparison:
    base_label: str
    new_label: str
    mode: str  # "per-prompt records" | "stored CIs (normal approximation)"
    thresholds: Thresholds
    rows: list[Row]
    env_differences: list[Difference] = field(default_factory=list)
    forced_differences: list[Difference] = field(default_factory=list)
    only_in_base: list[tuple[str, float]] = field(default_factory=list)
    only_in_new: list[tuple[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.status == REGRESSED]

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.rows) for s in STATUSES}

    @property
    def exit_code(self) -> int:
        """0 no regression, 1 at least one regression (2, bad input, is raised before)."""
        return 1 if self.regressions else 0


Pair = tuple[Samples, Samples] | tuple[Summary, Summary]


def _values(
    key: str, b: Group, n: Group, shared: list[int], both_records: bool
) -> tuple[float, float, Pair] | None:
    """(base value, new value, what to test) of a metric, or None when a side lacks it."""
    if both_records:
        assert b.samples is not None and n.samples is not None
        if key == "alpha":  # pooled over the γ both runs measured
            parts = [f"alpha@{g}" for g in shared]
            if not parts:
                return None
            bs, ns = (
                _sum_by_key([b.samples[k] for k in parts]),
                _sum_by_key([n.samples[k] for k in parts]),
            )
        else:
            bs, ns = b.samples.get(key), n.samples.get(key)  # type: ignore[assignment]
        if bs is None or ns is None or not len(bs) or not len(ns):
            return None
        return bs.value, ns.value, (bs, ns)
    bsum, nsum = b.summaries.get(key), n.summaries.get(key)
    if bsum is None or nsum is None or bsum.value is None or nsum.value is None:
        return None
    return bsum.value, nsum.value, (bsum, nsum)


def _test(pair: Pair, th: Thresholds, ci_level: float) -> DiffTest:
    if isinstance(pair[0], Samples) and isinstance(pair[1], Samples):
        return bootstrap_difference(pair[0], pair[1], th.bootstrap, 1 - th.significance, th.seed)
    assert isinstance(pair[0], Summary) and isinstance(pair[1], Summary)
    return normal_difference(pair[0], pair[1], ci_level, 1 - th.significance)


def _row(
    b: Group,
    n: Group,
    key: str,
    metric: Metric,
    label: str,
    note: str,
    ctx: _Ctx,
    shared: list[int],
    row_id: str | None = None,
) -> Row:
    """Test one metric (`key` in the samples or summaries) and judge it."""
    head = (b.workload, b.temperature, row_id or key, label, metric.kind)
    values = _values(key, b, n, shared, ctx.both_records)
    if values is None:
        return Row(*head, NOT_COMPARABLE, None, None, note=note, reason=MISSING)
    base_v, new_v, pair = values
    if metric.kind == TIMING and ctx.timing_block(b, n):
        rel = (new_v - base_v) / base_v if base_v else None
        return Row(
            *head,
            NOT_COMPARABLE,
            base_v,
            new_v,
            new_v - base_v,
            rel,
            note=note,
            reason=ctx.timing_block(b, n),
        )
    test = _test(pair, ctx.th, ctx.ci_level)
    status, rel = judge(metric, base_v, test, ctx.th)
    return Row(
        *head, status, base_v, new_v, test.change, rel, test.p_value, test.ci, test.method, note
    )


@dataclass
class _Ctx:
    th: Thresholds
    ci_level: float
    both_records: bool
    env_block: str  # hardware/software differ, or the machine drifted between the runs
    gate_unstable: bool

    def timing_block(self, b: Group, n: Group) -> str:
        if self.env_block:
            return self.env_block
        if self.gate_unstable:
            return ""
        parts = [
            f"unstable timing in {who}: {w.removeprefix('unstable timing: ')}"
            for who, g in (("base", b), ("new", n))
            for w in g.timing_warnings
        ]
        return "; ".join(parts)


def _group_rows(b: Group, n: Group, ctx: _Ctx) -> list[Row]:
    """Every row of one workload × temperature both sides measured."""
    shared = sorted(set(b.gammas) & set(n.gammas))
    rows = []
    names = [
        "alpha",
        *[f"accepted_length@{g}" for g in shared],
        "baseline_itl_ms",
        "baseline_tokens_per_s",
    ]
    names += [f"{m}@{g}" for g in shared for m in ("itl_ms", "tokens_per_s", "speedup")]
    for name in names:
        metric = METRICS[name.split("@")[0]]
        gamma = name.partition("@")[2]
        label = f"{metric.label} @γ={gamma}" if gamma else metric.label
        note = ""
        if name == "alpha" and ctx.both_records and shared != sorted(set(b.gammas) | set(n.gammas)):
            note = f"pooled over the shared γ {shared}"
        rows.append(_row(b, n, name, metric, label, note, ctx, shared))
    rec_row = _recommended_row(b, n, ctx, shared)
    if rec_row is not None:
        rows.append(rec_row)
        rows.append(_verdict_row(b, n, rec_row, ctx))
    return rows


def _recommended_row(b: Group, n: Group, ctx: _Ctx, shared: list[int]) -> Row | None:
    """The speedup at the base's recommended setting (the new one's when the base was OFF),
    measured in both runs; None when both recommend OFF."""
    rb, rn = b.recommendation, n.recommendation
    if rb is None or rn is None:
        return None
    chosen = rb if rb.verdict == "on" else rn if rn.verdict == "on" else None
    if chosen is None:
        return None
    label = f"speedup at recommended γ={chosen.gamma}"
    if chosen.setting != b.primary:
        label += f" ({chosen.setting})"
    note = (
        ""
        if rb == rn
        else f"recommendation {rb.text()} → {rn.text()}; measured at γ={chosen.gamma} in both runs"
    )
    key = setting_key(chosen.setting, chosen.gamma)
    metric = METRICS["speedup_recommended"]
    return _row(b, n, key, metric, label, note, ctx, shared, "speedup_recommended")


def _verdict_row(b: Group, n: Group, rec_row: Row, ctx: _Ctx) -> Row:
    """The recommendation (optimal γ and verdict). A flip is always listed; ON → OFF is a
    regression when the speedup behind it regressed."""
    rb, rn = b.recommendation, n.recommendation
    assert rb is not None and rn is not None
    flip = {("on", "off"): "ON → OFF", ("off", "on"): "OFF → ON"}.get((rb.verdict, rn.verdict))
    block = ctx.timing_block(b, n)
    if flip is None:
        status = NOT_COMPARABLE if block else UNCHANGED
        note = f"recommended γ moved {rb.gamma} → {rn.gamma}" if rb.gamma != rn.gamma else ""
    else:
        good = IMPROVED if flip == "OFF → ON" else REGRESSED
        if block or rec_row.status == NOT_COMPARABLE:
            status = NOT_COMPARABLE
        else:
            status = good if rec_row.status == good else NOT_SIGNIFICANT
        rel = rec_row.relative_change
        moved = f"{100 * rel:+.1f} %" if rel is not None else "–"
        if status == good:
            why = f"the speedup at the recommended γ {status} ({moved})"
        elif status == NOT_COMPARABLE:  # the reason says why (timing blocked, or missing)
            why = "" if block else f"the speedup behind it is {rec_row.reason or 'not comparable'}"
        else:
            why = (
                f"the speedup behind it moved {moved}, not beyond noise and the minimum effect: "
                "the verdict sits near its threshold"
            )
        note = f"verdict flip {flip} (always reported)" + (f"; {why}" if why else "")
    label = "recommendation (optimal γ, verdict)"
    head = (b.workload, b.temperature, "verdict", label, TIMING, status, rb.text(), rn.text())
    return Row(*head, note=note, method="verdict", reason=block)


def machine_drift(base: Side, new: Side, th: Thresholds) -> str:
    """Why timing between the runs is not comparable although code, models and environment are
    the same: the target-only baseline (the control) moved beyond noise and the minimum effect.
    (Not asked when models or settings differ, under --force: the baseline may move then.)"""
    if not base.code or base.code != new.code or env_differences(base, new):
        return ""
    both = base.has_records and new.has_records
    level = min(base.ci_level, new.ci_level)
    for key in [k for k in base.groups if k in new.groups]:
        b, n = base.groups[key], new.groups[key]
        values = _values("baseline_itl_ms", b, n, [], both)
        if values is None:
            continue
        base_v, _, pair = values
        if isinstance(pair[0], Samples) and set(pair[0].keys) != set(pair[1].keys):
            continue  # other prompts: the baseline may move legitimately
        status, rel = judge(METRICS["baseline_itl_ms"], base_v, _test(pair, th, level), th)
        if status in (REGRESSED, IMPROVED) and rel is not None:
            return (
                "the machine's speed changed between the runs: same specbench commit "
                f"({base.code[:10]}), models, prompts and environment, yet the target-only baseline "
                f"latency moved {100 * rel:+.0f} % ({key[0]} T={key[1]:g})"
            )
    return ""


def compare(
    base: Side,
    new: Side,
    th: Thresholds,
    forced: list[Difference] | None = None,
    gate_unstable_timing: bool = False,
) -> Comparison:
    """Compare every workload × temperature both sides measured."""
    env_diff = env_differences(base, new)
    both_records = base.has_records and new.has_records
    mode = "per-prompt records" if both_records else "stored CIs (normal approximation)"
    notes: list[str] = []
    if not both_records:
        notes.append(
            "only results.json on at least one side: p-values use the stored confidence intervals "
            "under a normal approximation (no per-prompt values); pass run directories for the "
            "bootstrap test"
        )
    env_block = ""
    if env_diff:
        env_block = OTHER_HARDWARE
        notes.append(
            "different hardware/software ("
            + ", ".join(f"{d.field}: {d.base} vs {d.new}" for d in env_diff)
            + "): timing rows are not comparable; acceptance rows are still compared"
        )
    elif not gate_unstable_timing and not forced and (drift := machine_drift(base, new, th)):
        env_block = drift
        notes.append(
            f"{drift}: timing rows are not comparable, acceptance rows are still compared; rerun "
            "both on a quiet machine, or pass --gate-unstable-timing to gate on timing anyway"
        )
    ctx = _Ctx(th, min(base.ci_level, new.ci_level), both_records, env_block, gate_unstable_timing)
    rows: list[Row] = []
    few, unstable = [], []
    for key in [k for k in base.groups if k in new.groups]:
        b, n = base.groups[key], new.groups[key]
        rows += _group_rows(b, n, ctx)
        if not env_block and ctx.timing_block(b, n):
            unstable.append(f"{key[0]} T={key[1]:g}")
        if min(b.n_prompts, n.n_prompts) < FEW_PROMPTS:
            few.append(f"{key[0]} T={key[1]:g}")
    if unstable:
        notes.append(
            f"unstable timing in {', '.join(unstable)}: timing rows there are not comparable "
            "(acceptance is still compared); rerun on a quiet machine, raise repeats, or pass "
            "--gate-unstable-timing to gate on them anyway"
        )
    if few and both_records:
        notes.append(
            f"few prompts (< {FEW_PROMPTS}) in {', '.join(few)}: bootstrap p-values are optimistic "
            "at this size; raise the workloads' n for a trustworthy gate"
        )
    return Comparison(
        base.label,
        new.label,
        mode,
        th,
        rows,
        env_diff,
        list(forced or []),
        [k for k in base.groups if k not in new.groups],
        [k for k in new.groups if k not in base.groups],
        notes,
    )
