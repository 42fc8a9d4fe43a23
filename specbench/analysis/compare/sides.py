"""The two sides of a comparison: one run (from its records, or from results.json alone) or
several runs of one config merged, grouped by workload × temperature."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import JsonValue

from specbench.analysis.compare.samples import (
    Samples,
    Summary,
    group_samples,
    setting_key,
    speedup_samples,
    sum_by_key,
)
from specbench.analysis.documents.results_model import RunEnv, RunResults
from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.analysis.pipeline.prompt_basis import set_aside
from specbench.config.stored import StoredConfig, StoredModel, StoredSampling
from specbench.record_line import RecordLine

# a value that must match for two runs to compare (the records schemas: a list of versions)
IdentityValue = str | int | float | list[int] | None


def env_value(env: RunEnv, key: str) -> JsonValue:
    """env.json's value at `key` as the run wrote it (None where it wrote none): a typed field
    of `RunEnv` or a key kept as written, in its JSON form (what compare prints and writes)."""
    return env.model_dump(mode="json", include={key}, exclude_unset=True).get(key)


@dataclass(frozen=True)
class RecommendedSetting:
    """A side's recommendation for one workload × temperature, as compare judges it (a digest of
    results.json's `recommendation`)."""

    verdict: str  # "on" | "off"
    gamma: int  # 0 when off
    setting: str  # "drafter/policy" of the recommendation
    best_gamma: int | None  # γ of the best measured speedup (ON or not)

    def text(self) -> str:
        drafter = self.setting.rsplit("/", 1)[0]
        if self.verdict == "on" and "γ=" in drafter:  # an engine setting's own label
            return f"ON {drafter}"
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
    recommendation: RecommendedSetting | None = None
    n_prompts: int = 0
    timing_warnings: list[str] = field(default_factory=list)  # the run's "unstable timing" notes
    primary: str = "model/fixed"  # the primary drafter with the fixed policy
    per_run: list[Group] = field(default_factory=list)  # the runs behind a multi-run side
    # engine runs whose settings name their method: speedup key → method (matched by label)
    methods: dict[str, str] = field(default_factory=dict)
    # T = 0: the same prompt repeated gave the same acceptance, round by round (True), did not
    # (False), or was never repeated (None: determinism not shown)
    deterministic: bool | None = None
    # the prompts the run's verdict set aside as degenerate (`pipeline.prompt_basis.set_aside`):
    # compare sets them aside on both sides (docs/theory.md §13)
    set_aside: frozenset[str] = frozenset()


@dataclass
class Side:
    label: str
    identity: dict[str, IdentityValue]  # what must match to compare at all
    env: RunEnv  # env.json as the run wrote it
    groups: dict[tuple[str, float], Group]
    ci_level: float = 0.95
    has_records: bool = False
    failed: list[str] = field(default_factory=list)  # "workload T=… setting: k failed records"
    n_runs: int = 1

    @property
    def by_method(self) -> bool:
        """An engine run whose settings are labelled by method (draft_model, eagle3, ngram…):
        compared setting by setting, matched by label, whatever drafts each side ran."""
        return any(g.methods for g in self.groups.values())

    @property
    def code(self) -> str | None:
        """The specbench git commit that produced the run (env.json), if known."""
        commit = env_value(self.env, "specbench_git_commit")
        return str(commit) if commit else None


def _summary(est: EstimateJSON | None) -> Summary:
    if est is None:
        return Summary(None, None, None)
    lo, hi = est.ci95
    return Summary(est.value, lo, hi)


def _recommendation(entry: WorkloadResult, primary: str) -> RecommendedSetting:
    rec = entry.recommendation
    measured = [
        (r.measured_speedup.value, r.gamma)
        for r in entry.gammas
        if r.measured_speedup is not None and r.measured_speedup.value
    ]
    best = max(measured, key=lambda vg: vg[0], default=None)
    return RecommendedSetting(
        verdict=rec.verdict,
        gamma=rec.gamma,
        setting=f"{rec.drafter or primary}/{rec.policy or 'fixed'}",
        best_gamma=best[1] if best else None,
    )


def _timing_warnings(entry: WorkloadResult) -> list[str]:
    return [w for w in entry.warnings if w.startswith("unstable timing")]


def _entry_summaries(entry: WorkloadResult, primary: str) -> tuple[list[int], dict[str, Summary]]:
    out = {
        "alpha": _summary(entry.alpha),
        "baseline_itl_ms": _summary(entry.baseline_itl_ms),
        "baseline_tokens_per_s": _summary(entry.baseline_tokens_per_s),
    }
    for m in entry.methods or []:
        out[setting_key(f"{m.drafter}/{m.policy}", m.gamma)] = _summary(m.measured_speedup)
    if entry.engine is not None:  # every setting of an engine run, by its label
        for r in entry.engine.ranking:
            out.setdefault(setting_key(f"{r.drafter}/{r.policy}", r.gamma), _summary(r.speedup))
    gammas = []
    for row in entry.gammas:
        if not row.measured:
            continue
        g = row.gamma
        gammas.append(g)
        out[f"accepted_length@{g}"] = _summary(row.mean_tokens_per_round)
        out[f"itl_ms@{g}"] = _summary(row.itl_ms)
        out[f"tokens_per_s@{g}"] = _summary(row.tokens_per_s)
        out[f"speedup@{g}"] = _summary(row.measured_speedup)
        out.setdefault(setting_key(primary, g), out[f"speedup@{g}"])
    return gammas, out


def _identity(doc: RunResults | None, config: StoredConfig | None) -> dict[str, IdentityValue]:
    """What must match to compare at all: from results.json's run when given, else the config."""
    cfg = config or StoredConfig()
    if doc is not None:
        sampling = doc.run.sampling
        ident: dict[str, IdentityValue] = {
            "results schema": doc.schema_,
            "target model": doc.run.target,
            "draft model": doc.run.draft,
            "top_p": sampling.top_p if sampling else None,
            "top_k": sampling.top_k if sampling else None,
            "max_new_tokens": doc.run.max_new_tokens,
        }
    else:
        draft, sampling_cfg = cfg.draft or StoredModel(), cfg.sampling or StoredSampling()
        ident = {
            "results schema": None,
            "target model": cfg.target.model if cfg.target else None,
            "draft model": draft.model or draft.method,
            "top_p": sampling_cfg.top_p,
            "top_k": sampling_cfg.top_k,
            "max_new_tokens": cfg.max_new_tokens,
        }
    for role, spec in (("target", cfg.target), ("draft", cfg.draft)):
        ident[f"{role} revision"] = spec.revision if spec else None
        ident[f"{role} dtype"] = spec.dtype if spec else None
    return ident


def tokenizer_identity(env: RunEnv) -> dict[str, str | None]:
    """The tokenizer fingerprints env.json recorded (models/fingerprint.py): token counts and
    per-token figures of two vocabularies do not compare. None where a run recorded none."""
    tok = env.tokenizers or {}
    return {f"{role} tokenizer": tok.get(role) for role in ("target", "draft")}


def side_from_results(results: RunResults, label: str) -> Side:
    """A side known only by its results.json (stored CIs, no per-prompt values), read as the
    typed document (`analysis.documents.results_read`)."""
    doc = results
    groups = {}
    for e in doc.workloads:
        # the recommendation names its drafter when ON; the run's primary drafter otherwise
        prim = f"{e.recommendation.drafter or doc.run.drafter or 'model'}/fixed"
        gammas, summaries = _entry_summaries(e, prim)
        groups[(e.workload, e.temperature)] = Group(
            e.workload,
            e.temperature,
            gammas,
            summaries,
            None,
            _recommendation(e, prim.split("/")[0]),
            e.n_prompts,
            _timing_warnings(e),
            prim,
            methods={
                setting_key(f"{r.drafter}/{r.policy}", r.gamma): r.method
                for r in (e.engine.ranking if e.engine is not None else [])
                if r.method
            },
            set_aside=set_aside(e.figures_basis, e.content),
        )
    ident = {**_identity(doc, None), **tokenizer_identity(doc.env)}
    return Side(label, ident, doc.env, groups, doc.run.ci_level or 0.95, False)


def side_from_records(
    records: list[RecordLine],
    config: StoredConfig,
    env: RunEnv,
    label: str,
    results: RunResults | None = None,
) -> Side:
    """A side from a run's records (per-prompt values), with its results (recommendation) when
    given — `build_results(records, config, env)` computes them."""
    label_primary = config.draft.label if config.draft else "model"
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
            if rec.get("method"):  # an engine setting labelled by its method
                methods = grp.setdefault("methods", {})
                methods[setting_key(setting, int(rec["gamma"]))] = str(rec["method"])
    doc = results
    entries = {(e.workload, e.temperature): e for e in (doc.workloads if doc else [])}
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
        specs = [r for by_gamma in grp["settings"].values() for rs in by_gamma.values() for r in rs]
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
            methods=grp.get("methods", {}),
            deterministic=repeat_determinism(specs) if key[1] == 0 else None,
            set_aside=set_aside(entry.figures_basis, entry.content) if entry else frozenset(),
        )
    ident = {**_identity(doc, config), **tokenizer_identity(env)}
    ident["records schema"] = sorted({int(r.get("schema", 0)) for r in records})
    level = float((config.decision.ci_level if config.decision else None) or 0.95)
    fails = [f"{k}: {v} failed record{'s' if v > 1 else ''}" for k, v in sorted(failed.items())]
    return Side(label, ident, env, groups, level, True, fails)


def repeat_determinism(specs: list[RecordLine]) -> bool | None:
    """Whether the speculative records of one T = 0 group show greedy decoding deterministic:
    every prompt measured more than once (repeats) gave the same tokens — the same acceptance
    round by round and the same number of new tokens; None when no prompt was repeated."""
    seen: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for r in specs:
        rounds = r.get("rounds") or {}
        accepted = rounds.get("accepted") if isinstance(rounds, dict) else None
        key = (r.get("drafter"), r.get("policy"), r.get("gamma"), r.get("prompt_id"))
        seen.setdefault(key, []).append((r.get("new_tokens"), tuple(accepted or ())))
    repeated = [fps for fps in seen.values() if len(fps) > 1]
    if not repeated:
        return None
    return all(len(set(fps)) == 1 for fps in repeated)


def _runs_agree(gs: list[Group]) -> bool | None:
    """Several runs of one side at T = 0: determinism shown when every run's acceptance is
    identical prompt by prompt, refuted when they differ or a run's repeats disagreed."""
    if gs[0].temperature != 0:
        return None
    if any(g.deterministic is False for g in gs):
        return False
    names = set.intersection(
        *[{k for k in (g.samples or {}) if k.startswith("alpha@")} for g in gs]
    )
    if not names:
        return None
    first = gs[0].samples or {}
    for g in gs[1:]:
        other = g.samples or {}
        for name in names:
            a, b = first[name], other[name]
            if a.keys != b.keys or not all(
                np.array_equal(x, y) for x, y in zip(a.arrays, b.arrays, strict=True)
            ):
                return False
    return True


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
        samples = {k: sum_by_key([(p.samples or {})[k] for p in gs]) for k in sorted(names)}
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
            g0.methods,
            _runs_agree(gs),
            frozenset().union(*[p.set_aside for p in gs]),
        )
    label = " + ".join(r.label for r in runs)
    failed = [f"{r.label}: {f}" for r in runs for f in r.failed]
    dropped = [k for k in first.groups if k not in groups]
    failed += [f"{k[0]} T={k[1]:g}: not measured in every run of {label}" for k in dropped]
    level = min(r.ci_level for r in runs)
    return Side(label, first.identity, first.env, groups, level, True, failed, len(runs))
