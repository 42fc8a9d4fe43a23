"""The user's runner's noise, from A/A runs of one code and config (`specbench compare
--calibrate RUN RUN RUN …`): what a gate needs to be sized (`plan.py`), written into the
thresholds file as upper confidence limits (a handful of runs pins σ only loosely).

For a row (a speedup @γ, or absolute baseline tokens/s) measured in k runs, the log values
x_1 … x_k have variance σ²_r + σ²_p, the run-to-run part the compare test adds by hand plus the
prompt part the bootstrap already sees. Pooled over the rows, the total is V = mean_rows s²_row
(s² with k − 1 degrees of freedom) and the prompt part P = mean over run pairs of se²_pair / 2
(`prompt_se`, the paired bootstrap of one run against another). Then

    σ̂²_r = max(0, V − P)                                  (method of moments)
    σ²_r,UCL = max(0, V · ν / χ²_{1−c}(ν) − P),  ν = (k − 1) · G

with G the workloads × temperatures measured: the γ rows of one group share most of their
run-to-run variation (docs/compare.md, "Run-to-run noise"), so a group, not a row, is counted as
one independent observation per run; χ² of ν degrees of freedom is the exact sampling law of a
normal variance (docs/theory.md §7 for the bootstrap). With k = 3 runs and G = 1 the UCL is
4.4 × V in SD terms; with k = 5 and G = 8, 1.3 ×.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy import stats as sps

from specbench.analysis.compare.difference_tests import prompt_se
from specbench.analysis.compare.metrics import Calibration
from specbench.analysis.compare.prompt_sets import same_prompts
from specbench.analysis.compare.samples import Samples, sum_by_key
from specbench.analysis.compare.sides import Group, Side
from specbench.record_line import RecordLine

CALIBRATION_CONFIDENCE = 0.95
CALIBRATION_BOOTSTRAP = 400  # resamples per run pair (the prompt part is an average over pairs)


@dataclass(frozen=True)
class RunCost:
    """What one run cost: target forwards and measured seconds (prefill + decode, every
    record; model loading excluded), and its prompts per workload × temperature."""

    target_forwards: float
    seconds: float
    prompts: int


def run_cost(records: list[RecordLine]) -> RunCost:
    """A run's cost from its records: a baseline generation is one target forward per new token
    (prefill included); a speculative one a prefill plus one verification forward per round."""
    forwards, ms = 0.0, 0.0
    prompts: dict[tuple[str, float], set[str]] = {}
    for r in records:
        if r.get("kind") not in ("baseline", "spec") or r.get("status", "ok") != "ok":
            continue
        rounds = r.get("rounds") or {}
        accepted = rounds.get("accepted") if isinstance(rounds, dict) else None
        if r["kind"] == "spec" and accepted is not None:
            forwards += 1 + len(accepted)
        else:
            forwards += float(r.get("new_tokens") or 0)
        wall = r.get("wall_ms")
        ms += float(wall) if wall else sum(r.get("ttft_ms") or []) + float(r.get("decode_ms") or 0)
        key = (str(r.get("workload")), float(r.get("temperature", 0.0)))
        prompts.setdefault(key, set()).add(str(r.get("prompt_id")))
    n = max((len(p) for p in prompts.values()), default=0)
    return RunCost(forwards, ms / 1000.0, n)


@dataclass(frozen=True)
class NoiseEstimate:
    """Run-to-run CV: point estimate, upper confidence limit, and what it rests on."""

    estimate: float
    ucl: float
    rows: int
    dof: int


def _common_groups(runs: list[Side]) -> list[list[Group]]:
    keys = [k for k in runs[0].groups if all(k in r.groups for r in runs)]
    return [[r.groups[k] for r in runs] for k in keys]


def _alpha(g: Group) -> Samples | None:
    parts = [s for k, s in (g.samples or {}).items() if k.startswith("alpha@")]
    return sum_by_key(parts) if parts else None


def run_to_run(
    groups: list[list[Group]], prefix: str, confidence: float, n_boot: int
) -> NoiseEstimate | None:
    """σ_r of the log of every sample named `prefix…` measured in every run (module docstring)."""
    k = len(groups[0]) if groups else 0
    totals, prompt_parts, used = [], [], 0
    for runs in groups:
        names = set.intersection(*[set(g.samples or {}) for g in runs])
        names = {n for n in names if n.startswith(prefix)}
        if names:
            used += 1
        for name in sorted(names):
            samples = [(g.samples or {})[name] for g in runs]
            values = np.asarray([s.value for s in samples], float)
            if not np.all(values > 0):
                continue
            totals.append(float(np.log(values).var(ddof=1)))
            for a, b in combinations(samples, 2):
                se, _ = prompt_se(a, b, True, n_boot, 0)
                prompt_parts.append((se or 0.0) ** 2 / 2)
    if not totals or k < 2:
        return None
    return _estimate(totals, prompt_parts, (k - 1) * used, confidence)


def _estimate(
    totals: list[float], prompt_parts: list[float], dof: int, confidence: float
) -> NoiseEstimate:
    """σ_r = √max(0, V − P) and its upper confidence limit (module docstring)."""
    v, p = float(np.mean(totals)), float(np.mean(prompt_parts)) if prompt_parts else 0.0
    v_ucl = v * dof / float(sps.chi2.ppf(1 - confidence, dof))
    return NoiseEstimate(
        math.sqrt(max(0.0, v - p)), math.sqrt(max(0.0, v_ucl - p)), len(totals), dof
    )


def paired_run_to_run(
    pairs: list[tuple[Side, Side]], prefix: str, confidence: float, n_boot: int
) -> NoiseEstimate | None:
    """σ_r as one side of an interleaved comparison sees it, from k A/A pairs measured together
    (`compare --ab`): per row, d_j = log x(base_j) − log x(candidate_j) has variance
    2σ²_r + se²_j, with se_j the paired bootstrap's (the prompts' part); so V = var(d)/2 and
    P = mean se²/2 take the places they have in `run_to_run`, with (k − 1) · G degrees of freedom.
    Drift the two sides of a pair share cancels in d: what is left is the noise an interleaved
    gate faces."""
    k = len(pairs)
    if k < 2:
        return None
    keys = [key for key in pairs[0][0].groups if all(key in a.groups and key in b.groups
                                                     for a, b in pairs)]  # fmt: skip
    halves, prompt_parts, used = [], [], 0
    for key in keys:
        groups = [(a.groups[key], b.groups[key]) for a, b in pairs]
        names = set.intersection(*[set(g.samples or {}) & set(h.samples or {}) for g, h in groups])
        names = {n for n in names if n.startswith(prefix)}
        used += bool(names)
        for name in sorted(names):
            samples = [((g.samples or {})[name], (h.samples or {})[name]) for g, h in groups]
            values = np.asarray([(a.value, b.value) for a, b in samples], float)
            if not np.all(values > 0):
                continue
            d = np.log(values[:, 0]) - np.log(values[:, 1])
            halves.append(float(d.var(ddof=1)) / 2)
            for a, b in samples:
                se, _ = prompt_se(a, b, True, n_boot, 0)
                prompt_parts.append((se or 0.0) ** 2 / 2)
    if not halves:
        return None
    return _estimate(halves, prompt_parts, (k - 1) * used, confidence)


def _unpaired(s: Samples) -> Samples:
    """The same values under other keys: resampled apart from its partner."""
    return Samples(tuple(f"other:{k}" for k in s.keys), s.arrays, s.coefs)


def _prompt_sd(
    pairs: list[tuple[Samples, Samples]], log: bool, n_boot: int, paired: bool = True
) -> float | None:
    """SD of one prompt's difference between two runs: se · √n, averaged (as a variance) over
    the run pairs; `paired=False` resamples the runs apart, which also counts the spread between
    prompts (an upper bound on the paired one)."""
    var = []
    for a, b in pairs:
        se, _ = prompt_se(a, b if paired else _unpaired(b), log, n_boot, 0)
        if se is not None:
            var.append(se**2 * min(len(a), len(b)))
    return math.sqrt(float(np.mean(var))) if var else None


def _deterministic(groups: list[list[Group]]) -> bool | None:
    """Whether T = 0 acceptance was identical, prompt by prompt, in every run (greedy decoding
    deterministic on this runner); None when no group ran at T = 0."""
    seen = None
    for runs in groups:
        if runs[0].temperature != 0:
            continue
        alphas = [_alpha(g) for g in runs]
        if any(a is None for a in alphas):
            continue
        first = alphas[0]
        assert first is not None
        same = all(
            a is not None
            and a.keys == first.keys
            and all(np.array_equal(x, y) for x, y in zip(a.arrays, first.arrays, strict=True))
            for a in alphas[1:]
        )
        seen = same if seen is None else seen and same
    return seen


def calibrate(
    runs: list[Side],
    costs: list[RunCost],
    confidence: float = CALIBRATION_CONFIDENCE,
    n_boot: int = CALIBRATION_BOOTSTRAP,
    pairs: list[tuple[Side, Side]] | None = None,
) -> tuple[Calibration, NoiseEstimate, NoiseEstimate | None]:
    """(what the plan needs, the speedup's run-to-run CV, absolute timing's run-to-run CV) from
    A/A runs of one code and config — or, with `pairs`, from A/A pairs measured interleaved
    (`compare --ab`; `runs` are then all their runs). Raises ValueError when the runs share
    nothing to measure."""
    if len(runs) < 2 or (pairs is not None and len(pairs) < 2):
        raise ValueError(
            "calibration needs at least 2 A/A runs, or 2 interleaved A/A pairs (5 or more pin "
            "the noise well)"
        )
    # one prompt set per cell (docs/theory.md §13): the prompts any run set aside, out of all
    restricted = same_prompts(runs)
    if pairs is not None:
        index = {id(r): i for i, r in enumerate(runs)}
        pairs = [(restricted[index[id(a)]], restricted[index[id(b)]]) for a, b in pairs]
    runs = restricted
    groups = _common_groups(runs)
    if pairs is None:
        speed = run_to_run(groups, "speedup@", confidence, n_boot)
        timing = run_to_run(groups, "baseline_tokens_per_s", confidence, n_boot)
    else:
        speed = paired_run_to_run(pairs, "speedup@", confidence, n_boot)
        timing = paired_run_to_run(pairs, "baseline_tokens_per_s", confidence, n_boot)
    if speed is None:
        raise ValueError(
            "the runs share no speedup row to calibrate on (same config, per-prompt records)"
        )
    speed_pairs, alpha_pairs = [], []
    for rs in groups:
        for a, b in combinations(rs, 2):
            for name in set(a.samples or {}) & set(b.samples or {}):
                if name.startswith("speedup@"):
                    speed_pairs.append(((a.samples or {})[name], (b.samples or {})[name]))
            if a.temperature > 0:
                aa, ab = _alpha(a), _alpha(b)
                if aa is not None and ab is not None:
                    alpha_pairs.append((aa, ab))
    speed_sd = _prompt_sd(speed_pairs, True, n_boot) or 0.0
    # α at T > 0 resampled apart: seeded A/A runs draw the same tokens, so their paired
    # difference is 0, while a candidate that changes the draft draws others
    alpha_sd = _prompt_sd(alpha_pairs, False, n_boot, paired=False)
    n_prompts = max(1, min(c.prompts for c in costs)) if costs else 1
    settings = max(
        (
            len({k for k in (g.samples or {}) if k.startswith("speedup@")})
            for g in runs[0].groups.values()
        ),
        default=1,
    )
    cal = Calibration(
        runs=len(runs),
        confidence=confidence,
        prompts=n_prompts,
        groups=len(groups),
        sampled_groups=sum(rs[0].temperature > 0 for rs in groups),
        settings=max(1, settings),
        speedup_cv_estimate=round(speed.estimate, 4),
        speedup_prompt_sd=round(speed_sd, 4),
        alpha_prompt_sd=None if alpha_sd is None else round(min(alpha_sd, 1.0), 4),
        greedy_deterministic=_deterministic(groups),
        target_forwards_per_prompt=round(
            float(np.mean([c.target_forwards for c in costs])) / n_prompts, 2
        )
        if costs
        else 0.0,
        seconds_per_prompt=round(float(np.mean([c.seconds for c in costs])) / n_prompts, 4)
        if costs
        else 0.0,
        interleaved=pairs is not None,
    )
    return cal, speed, timing
