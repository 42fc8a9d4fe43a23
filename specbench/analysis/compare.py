"""Compare two runs (or two sets of runs): which metrics moved, and is it a regression?

Pure (numpy/scipy); `specbench compare BASE NEW` loads the sides and renders the rows. The
statistics, their error rates and the measured run-to-run noise are written down in
docs/compare.md; in short:

- Rows come in three classes. **Acceptance** (α, τ) is a within-run statistic: at T = 0 on the
  same prompts it is deterministic and compared exactly (no test); at T > 0 it is tested with a
  bootstrap over prompts (paired when both sides ran the same prompts). **Speedup** (spec ÷
  baseline tokens/s, measured side by side in one run) is tested on the log scale with its
  standard error inflated by a run-to-run component, se² = se²_prompts + σ_r²·(1/k_base + 1/k_new)
  (σ_r measured on this project's CPU runs, `Thresholds.run_to_run_cv`), or with runs as the unit
  (Welch t on per-run log speedups) when both sides give several runs. **Absolute timing**
  (latency, tokens/s) moves with the machine: it is informational unless both sides give several
  runs (Welch t over runs) or the environment change is the subject (`subject="env"`: the same
  model as speedup with `Thresholds.timing_run_to_run_cv`).
- Every tested row's p-value is Holm-adjusted over all tested rows of the comparison, so the
  probability of any false "regressed" when nothing changed stays at `significance` (family-wise).
- A regression is significant (adjusted p < significance) AND worse than the minimum effect.
- Environment differences are listed and never disqualify a row; for engine runs (vllm, openai)
  the environment is the server's as env.json records it.
- Failed records and settings the base measured but the new run did not are listed always and
  fail the comparison under `strict`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as sps

from specbench.analysis.acceptance import per_prompt
from specbench.analysis.multiple_testing import (
    holm,
    min_detectable_effect,
    normal_p_value,
    satterthwaite_df,
    z_two_sided,
)
from specbench.analysis.stats import bootstrap

IMPROVED = "improved"
REGRESSED = "regressed"
UNCHANGED = "unchanged"
NOT_SIGNIFICANT = "not significant"
NOT_COMPARABLE = "not comparable"
INFORMATIONAL = "informational"
STATUSES = (REGRESSED, IMPROVED, NOT_SIGNIFICANT, NOT_COMPARABLE, INFORMATIONAL, UNCHANGED)

ACCEPTANCE, SPEEDUP, TIMING = "acceptance", "speedup", "timing"
CODE, ENV = "code", "env"  # what the comparison is about (`subject`)
# the machine and software a transformers run measured on (the client is the machine)
ENV_KEYS = ("device", "gpu", "cpu", "cpu_threads", "torch", "transformers")
# engine runs: the server is the machine (engine version, GPU, engine flags), not the client
ENGINE_ENV_KEYS = (
    "vllm",
    "device",
    "gpu",
    "cuda",
    "torch",
    "engine_args",
    "speculative_config",
    "server_info",
    "servers",
)
ENGINE_BACKENDS = ("vllm", "openai")
FEW_PROMPTS = 10
MISSING = "missing on one side"
# Run-to-run coefficient of variation measured on this project's CPU (docs/compare.md §noise):
# `specbench run configs/tiny.yaml` three times, each row's log-speedup difference between runs
# less its per-prompt bootstrap variance (method of moments), pooled over the rows.
RUN_TO_RUN_CV_SPEEDUP = 0.07
RUN_TO_RUN_CV_TIMING = 0.95  # absolute tokens/s moved up to 4× between runs on this shared host


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
    # run-to-run noise not visible inside one run (log scale ≈ CV): of the speedup ratio, and of
    # absolute timing (used only when the environment change is the subject)
    run_to_run_cv: float = Field(default=RUN_TO_RUN_CV_SPEEDUP, ge=0.0, le=1.0)
    timing_run_to_run_cv: float = Field(default=RUN_TO_RUN_CV_TIMING, ge=0.0, le=1.0)
    power: float = Field(default=0.8, gt=0.5, lt=1.0)  # for the minimum detectable effect


@dataclass(frozen=True)
class Metric:
    """How one metric is judged."""

    name: str
    label: str
    kind: str  # ACCEPTANCE, SPEEDUP (within-run ratio) or TIMING (absolute)
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
        Metric("speedup", "speedup", SPEEDUP, True, "speedup_drop", True),
        Metric(
            "speedup_recommended", "speedup at recommended", SPEEDUP, True, "speedup_drop", True
        ),
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
    per_run: list[Group] = field(default_factory=list)  # the runs behind a multi-run side


@dataclass
class Side:
    label: str
    identity: dict[str, Any]  # what must match to compare at all
    env: dict[str, Any]
    groups: dict[tuple[str, float], Group]
    ci_level: float = 0.95
    has_records: bool = False
    failed: list[str] = field(default_factory=list)  # "workload T=… setting: k failed records"
    n_runs: int = 1

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
    failed: dict[str, int] = {}
    for rec in records:
        if rec.get("kind") == "failed" or rec.get("status", "ok") != "ok":
            what = (
                "baseline"
                if rec.get("unit_kind", rec.get("kind")) == "baseline" or not rec.get("gamma")
                else f"{rec.get('drafter') or label_primary}/{rec.get('policy') or 'fixed'} "
                f"γ={rec.get('gamma')}"
            )
            name = f"{rec.get('workload')} T={float(rec.get('temperature', 0)):g} {what}"
            failed[name] = failed.get(name, 0) + 1
            continue
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
    fails = [f"{k}: {v} failed record{'s' if v > 1 else ''}" for k, v in sorted(failed.items())]
    return Side(label, ident, env, groups, level, True, fails)


def merge_runs(runs: list[Side]) -> Side:
    """Several runs of one side as one: per-prompt values summed over the runs (the prompt stays
    the unit, repeats clustered inside it) and each run kept for the run-as-unit tests. The
    caller checks that the runs measured the same thing (`identity_differences`)."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    groups = {}
    for key, g0 in first.groups.items():
        parts = [r.groups.get(key) for r in runs]
        if any(p is None or p.samples is None for p in parts):
            continue
        gs = [p for p in parts if p is not None]
        names = set.intersection(*[set(p.samples or {}) for p in gs])
        samples = {k: _sum_by_key([(p.samples or {})[k] for p in gs]) for k in sorted(names)}
        recs = {p.recommendation for p in gs}
        groups[key] = Group(
            g0.workload,
            g0.temperature,
            sorted(set.intersection(*[set(p.gammas) for p in gs])),
            {},
            samples,
            recs.pop() if len(recs) == 1 else None,  # runs disagree: no single verdict
            g0.n_prompts,
            [w for p in gs for w in p.timing_warnings],
            g0.primary,
            gs,
        )
    label = " + ".join(r.label for r in runs)
    failed = [f"{r.label}: {f}" for r in runs for f in r.failed]
    dropped = [k for k in first.groups if k not in groups]
    failed += [f"{k[0]} T={k[1]:g}: not measured in every run of {label}" for k in dropped]
    level = min(r.ci_level for r in runs)
    return Side(label, first.identity, first.env, groups, level, True, failed, len(runs))


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


def env_keys(env: dict[str, Any]) -> tuple[str, ...]:
    """The keys of env.json that describe the machine that did the measured work: the server's
    for engine backends (the client only sends requests), the local machine's otherwise."""
    return ENGINE_ENV_KEYS if env.get("backend") in ENGINE_BACKENDS else ENV_KEYS


def env_differences(base: Side, new: Side) -> list[Difference]:
    """Hardware or software that differs. Listed, never disqualifying: within-run ratios stay
    comparable; absolute timing gates across it only when it is the subject."""
    keys = dict.fromkeys([*env_keys(base.env), *env_keys(new.env)])
    return [
        Difference(k, base.env.get(k), new.env.get(k))
        for k in keys
        if (base.env.get(k) or None) != (new.env.get(k) or None)
    ]


# ---------------------------------------------------------------------------------------------
# tests


@dataclass(frozen=True)
class DiffTest:
    change: float  # new − base
    p_value: float | None  # unadjusted, two-sided; None: not tested (exact, or untestable)
    ci: tuple[float, float] | None  # (1 − significance) interval of the change (unadjusted)
    method: str
    se: float | None = None  # standard error on the test scale (log for relative metrics)
    se_prompts: float | None = None  # its part from prompt sampling (the bootstrap)
    se_runs: float | None = None  # its part from run-to-run variation (model or runs)
    df: float = math.inf  # degrees of freedom of the t reference (∞: normal)


def _z(level: float) -> float:
    return float(sps.norm.ppf(0.5 + level / 2))


def _bootstrap_se(stat: Any, arrays: list[np.ndarray], n_boot: int, seed: int) -> float | None:
    """Standard error of a statistic from the resampling layer's 95 % interval (width / 2z):
    the one bootstrap of the project (analysis/stats.py), prompts as the unit."""
    est = bootstrap(stat, arrays, n_boot, 0.95, seed)
    if not (math.isfinite(est.lo) and math.isfinite(est.hi)):
        return None
    return (est.hi - est.lo) / (2 * _z(0.95))


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return num.sum(axis=-1) / den.sum(axis=-1)


def _unbias(se: float | None, n: int) -> float | None:
    """The bootstrap variance of a mean is (n − 1)/n of the unbiased one: scaled back up (it
    matters at the shipped 8 prompts)."""
    return se * math.sqrt(n / (n - 1)) if se is not None and n > 1 else se


def prompt_se(
    base: Samples, new: Samples, log: bool, n_boot: int, seed: int
) -> tuple[float | None, str]:
    """Standard error of Δ = new − base (or log new − log base) of a ratio-of-sums statistic from
    prompt resampling: paired (prompts resampled jointly) when both sides ran the same prompts,
    else the two sides resampled apart and the variances added."""
    if len(base) < 2 or len(new) < 2:
        return None, "too few prompts to test"
    f = np.log if log else (lambda x: x)
    paired = set(base.keys) == set(new.keys) and len(set(base.keys)) == len(base.keys)
    if paired:
        order = {k: i for i, k in enumerate(base.keys)}
        j = np.asarray([order[k] for k in new.keys])
        nn, nd = np.empty_like(new.num), np.empty_like(new.den)
        nn[j], nd[j] = new.num, new.den

        def delta(bn: np.ndarray, bd: np.ndarray, n_: np.ndarray, d_: np.ndarray) -> np.ndarray:
            with np.errstate(invalid="ignore", divide="ignore"):
                return f(_ratio(n_, d_)) - f(_ratio(bn, bd))

        se = _bootstrap_se(delta, [base.num, base.den, nn, nd], n_boot, seed)
        return _unbias(se, len(base)), f"paired bootstrap over {len(base)} prompts"

    def one(n_: np.ndarray, d_: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return f(_ratio(n_, d_))

    sb = _unbias(_bootstrap_se(one, [base.num, base.den], n_boot, seed), len(base))
    sn = _unbias(_bootstrap_se(one, [new.num, new.den], n_boot, seed + 1), len(new))
    se = math.hypot(sb, sn) if sb is not None and sn is not None else None
    return se, f"two-sample bootstrap ({len(base)} vs {len(new)} prompts)"


def _finish(
    change: float,
    d: float,
    se: float | None,
    base_v: float,
    log: bool,
    level: float,
    method: str,
    se_p: float | None,
    se_r: float | None,
    df: float = math.inf,
) -> DiffTest:
    """p-value and interval of a t-test of d (the change on the test scale) with standard error
    se and df degrees of freedom (∞: a z-test)."""
    if se is None:
        return DiffTest(change, None, None, method)
    p = normal_p_value(d, se, df)
    h = z_two_sided(1 - level, df) * se
    ci = (base_v * math.expm1(d - h), base_v * math.expm1(d + h)) if log else (d - h, d + h)
    return DiffTest(change, p, ci, method, se, se_p, se_r, df)


def model_test(
    base: Samples, new: Samples, log: bool, th: Thresholds, run_cv: float, k_base: int, k_new: int
) -> DiffTest:
    """z-test of a change with se² = se²_prompts + run_cv²·(1/k_base + 1/k_new) (run_cv = 0:
    prompts only, as for acceptance)."""
    bv, nv = base.value, new.value
    change = nv - bv
    if log and not (bv > 0 and nv > 0):
        return DiffTest(change, None, None, "not positive: cannot test")
    d = math.log(nv / bv) if log else change
    se_p, method = prompt_se(base, new, log, th.bootstrap, th.seed)
    se_r = run_cv * math.sqrt(1 / k_base + 1 / k_new) if run_cv else None
    if se_r is not None:
        method += f" + run-to-run CV {100 * run_cv:.1f} % ({k_base} vs {k_new} runs)"
    if se_p is None:
        return DiffTest(change, None, None, method)
    se = math.hypot(se_p, se_r or 0.0)
    # the prompt part is estimated from n prompts (n − 1 df); the run part is a stated constant
    n = min(len(base), len(new))
    df = satterthwaite_df([(se_p, n - 1), (se_r or 0.0, math.inf)])
    return _finish(change, d, se, bv, log, 1 - th.significance, method, se_p, se_r, df)


def runs_test(base_values: list[float], new_values: list[float], level: float) -> DiffTest:
    """Runs as the unit: Welch t-test of the per-run log values (each run's own statistic)."""
    b, n = np.log(base_values), np.log(new_values)
    bv, nv = float(np.exp(b.mean())), float(np.exp(n.mean()))
    d = float(n.mean() - b.mean())
    se = math.sqrt(b.var(ddof=1) / len(b) + n.var(ddof=1) / len(n))
    method = f"Welch t over runs ({len(b)} vs {len(n)} runs)"
    if se == 0:
        return DiffTest(nv - bv, 0.0 if d else 1.0, (d, d), method, 0.0, None, 0.0)
    res = sps.ttest_ind(n, b, equal_var=False)
    df = float(res.df)
    h = z_two_sided(1 - level, df) * se
    ci = (bv * math.expm1(d - h), bv * math.expm1(d + h))
    return DiffTest(nv - bv, float(res.pvalue), ci, method, se, None, se, df)


def exact_test(base: Samples, new: Samples) -> DiffTest:
    """T = 0 on the same prompts: acceptance is deterministic, so any difference is real."""
    order = {k: i for i, k in enumerate(base.keys)}
    j = np.asarray([order[k] for k in new.keys])
    same = np.allclose(base.num[j], new.num, rtol=1e-9, atol=0) and np.allclose(
        base.den[j], new.den, rtol=1e-9, atol=0
    )
    change = new.value - base.value
    what = "identical" if same else "differs"
    return DiffTest(0.0 if same else change, None, None, f"exact (T=0, same prompts): {what}")


def normal_difference(base: Summary, new: Summary, ci_level: float, level: float) -> DiffTest:
    """Δ = new − base with se from the stored CIs: se = (hi − lo) / (2·z_{(1+ci_level)/2})."""
    assert base.value is not None and new.value is not None
    change = new.value - base.value
    method = "normal approximation from stored CIs"
    if None in (base.lo, base.hi, new.lo, new.hi):
        return DiffTest(change, None, None, method + " (a CI is missing)")
    z = _z(ci_level)
    se = math.hypot((base.hi - base.lo) / (2 * z), (new.hi - new.lo) / (2 * z))  # type: ignore[operator]
    return _finish(change, change, se, base.value, False, level, method, se, None)


def judge(
    metric: Metric, base_value: float, test: DiffTest, th: Thresholds, p: float | None = None
) -> tuple[str, float | None]:
    """(status, relative change) from the change, its (adjusted) p-value and the thresholds.
    An exact comparison (no p, method "exact …") is certain: it needs only the minimum effect."""
    p = test.p_value if p is None else p
    if test.method.startswith("exact"):
        p = 0.0
    rel = test.change / base_value if base_value else None
    effect = abs(rel) if metric.relative and rel is not None else abs(test.change)
    if metric.relative and rel is None:
        effect = math.inf if test.change else 0.0
    minimum = float(getattr(th, metric.threshold))
    if not effect > minimum:
        return UNCHANGED, rel
    if p is None or p >= th.significance:
        return NOT_SIGNIFICANT, rel
    worse = test.change < 0 if metric.higher_is_better else test.change > 0
    return (REGRESSED if worse else IMPROVED), rel


def _effect_scale(metric: Metric, th: Thresholds) -> float:
    """The minimum effect on the test scale (log for relative metrics)."""
    m = float(getattr(th, metric.threshold))
    if not metric.relative:
        return m
    return -math.log1p(-min(m, 0.99)) if metric.higher_is_better else math.log1p(m)


def power_advice(
    metric: Metric, test: DiffTest, th: Thresholds, level: float, n_prompts: int, k_runs: int
) -> tuple[float | None, str]:
    """(minimum detectable effect at `th.power`, in the row's units — relative for relative
    metrics — and what the row's minimum effect needs: prompts or runs per side).

    Model: se² = se²_p·n/n′ + se²_r·k/k′ (prompt part shrinks with prompts, run part with runs).
    """
    if test.se is None:
        return None, ""
    z = min_detectable_effect(1.0, level, th.power, test.df)
    mde = z * test.se
    mde_out = math.expm1(mde) if metric.relative else mde
    c = (_effect_scale(metric, th) / z) ** 2  # the largest se that still detects the minimum
    se_p2, se_r2 = (test.se_prompts or 0.0) ** 2, (test.se_runs or 0.0) ** 2
    if c <= 0:  # no minimum effect set: nothing to size for
        return mde_out, ""
    if test.se**2 <= c:
        return mde_out, "enough for the minimum effect"
    if se_p2 == 0:  # runs only (Welch over runs)
        return mde_out, f"≈{math.ceil(k_runs * test.se**2 / c)} runs per side"
    if se_r2 < c / 2:
        return mde_out, f"≈{math.ceil(n_prompts * se_p2 / (c - se_r2))} prompts"
    if se_p2 < c / 2:
        return mde_out, f"≈{math.ceil(k_runs * se_r2 / (c - se_p2))} runs per side"
    n2 = math.ceil(n_prompts * se_p2 / (c / 2))
    k2 = math.ceil(k_runs * se_r2 / (c / 2))
    return mde_out, f"≈{n2} prompts + ≈{k2} runs/side"


# ---------------------------------------------------------------------------------------------
# the comparison


@dataclass(frozen=True)
class Row:
    workload: str
    temperature: float
    metric: str  # "alpha", "speedup@4", "speedup_recommended", "verdict", …
    label: str
    kind: str  # ACCEPTANCE, SPEEDUP, TIMING
    status: str
    base: float | str | None
    new: float | str | None
    change: float | None = None
    relative_change: float | None = None
    p_value: float | None = None  # Holm-adjusted over every tested row of the comparison
    ci: tuple[float, float] | None = None
    method: str = ""
    note: str = ""
    reason: str = ""  # why a row is not comparable or informational
    raw_p_value: float | None = None  # before the adjustment
    mde: float | None = None  # minimum detectable effect (power `Thresholds.power`, Holm level)
    needs: str = ""  # what the row's minimum effect needs (prompts / runs per side)


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
    failures: list[str] = field(default_factory=list)  # failed records, settings missing in new
    strict: bool = False
    subject: str = CODE
    runs: tuple[int, int] = (1, 1)
    tested: int = 0  # the size of the Holm family

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.status == REGRESSED]

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.rows) for s in STATUSES}

    @property
    def exit_code(self) -> int:
        """0 no regression, 1 a regression (or, under strict, a failed or missing row); 2, bad
        input, is raised before."""
        return 1 if self.regressions or (self.strict and self.failures) else 0


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


@dataclass
class _Ctx:
    th: Thresholds
    ci_level: float
    both_records: bool
    subject: str
    env_diff: list[Difference]
    k_base: int
    k_new: int

    @property
    def several_runs(self) -> bool:
        return self.k_base >= 2 and self.k_new >= 2

    def informational(self, metric: Metric) -> str:
        """Why an absolute timing row is not gated ("" when it is)."""
        if metric.kind != TIMING or self.subject == ENV:
            return ""
        if self.env_diff:
            what = ", ".join(d.field for d in self.env_diff)
            return (
                f"absolute timing, environment differs ({what}): informational; pass "
                "--subject env when that change is what you test"
            )
        if self.several_runs:
            return ""
        return (
            "absolute timing moves with the machine run to run (≈"
            f"{100 * self.th.timing_run_to_run_cv:.0f} % here), which one run per side cannot "
            "measure: informational; give several runs per side (BASE… vs NEW…) or --subject env"
        )


def _per_run(key: str, b: Group, n: Group) -> tuple[list[float], list[float]] | None:
    def vals(g: Group) -> list[float] | None:
        out = []
        for r in g.per_run:
            s = (r.samples or {}).get(key)
            if s is None or not len(s) or not s.value > 0:
                return None
            out.append(s.value)
        return out

    bv, nv = vals(b), vals(n)
    return (bv, nv) if bv and nv else None


def _test(metric: Metric, key: str, b: Group, n: Group, pair: Pair, ctx: _Ctx) -> DiffTest:
    th, level = ctx.th, 1 - ctx.th.significance
    if isinstance(pair[0], Summary) and isinstance(pair[1], Summary):
        test = normal_difference(pair[0], pair[1], ctx.ci_level, level)
        if metric.kind == SPEEDUP and test.se is not None and pair[0].value:
            # stored CIs are on the natural scale: the run-to-run term scaled to it
            se_r = th.run_to_run_cv * pair[0].value * math.sqrt(2)
            se = math.hypot(test.se, se_r)
            return _finish(
                test.change,
                test.change,
                se,
                pair[0].value,
                False,
                level,
                test.method + f" + run-to-run CV {100 * th.run_to_run_cv:.1f} %",
                test.se,
                se_r,
            )
        return test
    assert isinstance(pair[0], Samples) and isinstance(pair[1], Samples)
    if metric.kind == ACCEPTANCE:
        same = set(pair[0].keys) == set(pair[1].keys)
        if b.temperature == 0 and same:
            return exact_test(pair[0], pair[1])
        return model_test(pair[0], pair[1], metric.relative, th, 0.0, 1, 1)
    runs = _per_run(key, b, n) if ctx.several_runs else None
    if metric.kind == TIMING and runs is not None:
        return runs_test(runs[0], runs[1], level)
    cv = th.run_to_run_cv if metric.kind == SPEEDUP else th.timing_run_to_run_cv
    if runs is not None:
        # several runs: the stated run-to-run CV, or the one these runs show if it is larger
        lb, ln = np.log(runs[0]), np.log(runs[1])
        dof = len(lb) + len(ln) - 2
        seen = math.sqrt((((lb - lb.mean()) ** 2).sum() + ((ln - ln.mean()) ** 2).sum()) / dof)
        cv = max(cv, seen)
    return model_test(pair[0], pair[1], True, th, cv, ctx.k_base, ctx.k_new)


@dataclass
class _Pending:
    """A row before the Holm adjustment: its metric and test."""

    row: Row
    metric: Metric | None = None
    test: DiffTest | None = None
    n_prompts: int = 0
    k_runs: int = 1


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
) -> _Pending:
    head = (b.workload, b.temperature, row_id or key, label, metric.kind)
    values = _values(key, b, n, shared, ctx.both_records)
    if values is None:
        return _Pending(Row(*head, NOT_COMPARABLE, None, None, note=note, reason=MISSING))
    base_v, new_v, pair = values
    rel = (new_v - base_v) / base_v if base_v else None
    if why := ctx.informational(metric):
        row = Row(*head, INFORMATIONAL, base_v, new_v, new_v - base_v, rel, note=note, reason=why)
        return _Pending(row)
    test = _test(metric, key, b, n, pair, ctx)
    row = Row(
        *head,
        UNCHANGED,
        base_v,
        new_v,
        test.change,
        rel,
        None,
        test.ci,
        test.method,
        note,
        raw_p_value=test.p_value,
    )
    n_prompts = min(b.n_prompts, n.n_prompts)
    if not n_prompts and isinstance(pair[0], Samples):
        n_prompts = len(pair[0])
    return _Pending(row, metric, test, n_prompts, min(ctx.k_base, ctx.k_new))


def _group_rows(b: Group, n: Group, ctx: _Ctx) -> list[_Pending]:
    """Every row of one workload × temperature both sides measured."""
    shared = sorted(set(b.gammas) & set(n.gammas))
    names = [
        "alpha",
        *[f"accepted_length@{g}" for g in shared],
        "baseline_itl_ms",
        "baseline_tokens_per_s",
    ]
    names += [f"{m}@{g}" for g in shared for m in ("itl_ms", "tokens_per_s", "speedup")]
    out = []
    for name in names:
        metric = METRICS[name.split("@")[0]]
        gamma = name.partition("@")[2]
        label = f"{metric.label} @γ={gamma}" if gamma else metric.label
        note = ""
        if name == "alpha" and ctx.both_records and shared != sorted(set(b.gammas) | set(n.gammas)):
            note = f"pooled over the shared γ {shared}"
        out.append(_row(b, n, name, metric, label, note, ctx, shared))
    rec = _recommended_row(b, n, ctx, shared)
    if rec is not None:
        out.append(rec)
    return out


def _recommended_row(b: Group, n: Group, ctx: _Ctx, shared: list[int]) -> _Pending | None:
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


def _verdict_row(b: Group, n: Group, rec_row: Row) -> Row:
    """The recommendation (optimal γ and verdict). A flip is always listed; ON → OFF is a
    regression when the speedup behind it regressed (after the adjustment)."""
    rb, rn = b.recommendation, n.recommendation
    assert rb is not None and rn is not None
    flip = {("on", "off"): "ON → OFF", ("off", "on"): "OFF → ON"}.get((rb.verdict, rn.verdict))
    if flip is None:
        status = UNCHANGED
        note = f"recommended γ moved {rb.gamma} → {rn.gamma}" if rb.gamma != rn.gamma else ""
    else:
        good = IMPROVED if flip == "OFF → ON" else REGRESSED
        if rec_row.status == NOT_COMPARABLE:
            status = NOT_COMPARABLE
        else:
            status = good if rec_row.status == good else NOT_SIGNIFICANT
        rel = rec_row.relative_change
        moved = f"{100 * rel:+.1f} %" if rel is not None else "–"
        if status == good:
            why = f"the speedup at the recommended γ {status} ({moved})"
        elif status == NOT_COMPARABLE:
            why = f"the speedup behind it is {rec_row.reason or 'not comparable'}"
        else:
            why = (
                f"the speedup behind it moved {moved}, not beyond noise and the minimum effect: "
                "the verdict sits near its threshold"
            )
        note = f"verdict flip {flip} (always reported); {why}"
    label = "recommendation (optimal γ, verdict)"
    head = (b.workload, b.temperature, "verdict", label, SPEEDUP, status, rb.text(), rn.text())
    return Row(*head, note=note, method="verdict")


def _settings(g: Group) -> set[str]:
    """The speculative settings (drafter/policy @γ) a group measured."""
    keys = set(g.samples or {}) | set(g.summaries)
    return {k.removeprefix("speedup") for k in keys if k.startswith("speedup[")}


def _missing(base: Side, new: Side) -> list[str]:
    """Failed records on either side, and what the base measured that the new run did not."""
    out = [f"failed in base: {f}" for f in base.failed]
    out += [f"failed in new: {f}" for f in new.failed]
    for key, b in base.groups.items():
        n = new.groups.get(key)
        if n is None:
            out.append(f"missing in new: {key[0]} T={key[1]:g} (measured in base)")
            continue
        lost = sorted(_settings(b) - _settings(n))
        if lost:
            out.append(f"missing in new: {key[0]} T={key[1]:g} settings {', '.join(lost)}")
    return out


def compare(
    base: Side,
    new: Side,
    th: Thresholds,
    forced: list[Difference] | None = None,
    gate_unstable_timing: bool = False,
    strict: bool = False,
    subject: str = CODE,
) -> Comparison:
    """Compare every workload × temperature both sides measured; Holm over the tested rows.

    `gate_unstable_timing` is kept for old callers: a run's "unstable timing" flag no longer
    blocks rows (the run-to-run term is in the test), it is listed in the notes."""
    del gate_unstable_timing
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
    if env_diff:
        what = ", ".join(f"{d.field}: {d.base} vs {d.new}" for d in env_diff)
        notes.append(
            f"environment differs ({what}): acceptance and speedup (within-run ratios) are still "
            + (
                "gated, and so is absolute timing (--subject env)"
                if subject == ENV
                else "gated; absolute timing is informational unless --subject env"
            )
        )
    ctx = _Ctx(
        th,
        min(base.ci_level, new.ci_level),
        both_records,
        subject,
        env_diff,
        base.n_runs,
        new.n_runs,
    )
    pending: list[_Pending] = []
    groups: list[tuple[Group, Group, int, int]] = []
    few, unstable = [], []
    for key in [k for k in base.groups if k in new.groups]:
        b, n = base.groups[key], new.groups[key]
        start = len(pending)
        pending += _group_rows(b, n, ctx)
        rec_i = len(pending) - 1 if pending[-1].row.metric == "speedup_recommended" else -1
        groups.append((b, n, start, rec_i))
        if b.timing_warnings or n.timing_warnings:
            unstable.append(f"{key[0]} T={key[1]:g}")
        if min(b.n_prompts, n.n_prompts) < FEW_PROMPTS:
            few.append(f"{key[0]} T={key[1]:g}")
    rows = _adjust(pending, th)
    out: list[Row] = []
    for i, (b, n, start, rec_i) in enumerate(groups):
        end = groups[i + 1][2] if i + 1 < len(groups) else len(rows)
        out += rows[start:end]
        if rec_i >= 0:
            out.append(_verdict_row(b, n, rows[rec_i]))
    if unstable:
        notes.append(
            f"a run flagged unstable timing in {', '.join(unstable)}: speedup is still gated with "
            "the run-to-run term; rerun on a quiet machine or raise repeats for a sharper test"
        )
    if few and both_records:
        notes.append(
            f"few prompts (< {FEW_PROMPTS}) in {', '.join(few)}: the power is low at this size; "
            "see each row's minimum detectable effect"
        )
    return Comparison(
        base.label,
        new.label,
        mode,
        th,
        out,
        env_diff,
        list(forced or []),
        [k for k in base.groups if k not in new.groups],
        [k for k in new.groups if k not in base.groups],
        notes,
        _missing(base, new),
        strict,
        subject,
        (base.n_runs, new.n_runs),
        sum(p.test is not None and p.test.p_value is not None for p in pending),
    )


def _adjust(pending: list[_Pending], th: Thresholds) -> list[Row]:
    """Holm over every tested row, then each row judged on its adjusted p, with its power."""
    tested = [i for i, p in enumerate(pending) if p.test is not None and p.test.p_value is not None]
    raw = [float(pending[i].test.p_value) for i in tested]  # type: ignore[union-attr,arg-type]
    adjusted = dict(zip(tested, holm(raw), strict=True))
    level = th.significance / max(1, len(tested))  # Holm's first (strictest) step
    out = []
    for i, p in enumerate(pending):
        if p.test is None or p.metric is None:
            out.append(p.row)
            continue
        adj = adjusted.get(i)
        base_v = float(p.row.base) if isinstance(p.row.base, float | int) else 0.0
        status, rel = judge(p.metric, base_v, p.test, th, adj)
        mde, needs = power_advice(p.metric, p.test, th, level, p.n_prompts, p.k_runs)
        out.append(
            replace(p.row, status=status, relative_change=rel, p_value=adj, mde=mde, needs=needs)
        )
    return out
