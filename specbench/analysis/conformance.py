"""Engine conformance: does the engine accept as much as specbench's exact reference does?

A vllm/openai run's acceptance is compared with a transformers-backend reference run
(`conformance.reference_run`) on the same prompts and sampling. With p and q processed
identically both implement the same rejection rule (docs/theory.md §1), so acceptance must agree
up to sampling noise; a shortfall means the engine is not doing what the reference does.

Per workload × temperature × γ measured by both, paired by prompt (repeats pooled):
  τ = 1 + accepted / rounds (mean acceptance length) and the per-position conditional curve
  a_i = #(A ≥ i) / #(A ≥ i − 1), engine − reference, with a paired prompt-bootstrap 95 % interval
  (shown, not used for the decision).

The decision (docs/verify.md §conformance): one family of one-sided shortfall tests — τ and every
a_i whose denominator the two runs together reached at least 2·MIN_ROUNDS times, in every
comparison of the run — judged by one joint paired permutation test with max-T (Westfall–Young
single step). Under "engine = reference" a prompt's engine data and its reference data are
exchangeable, so swapping them (all temperatures and γ of that prompt together) leaves the joint
distribution unchanged: the maximum standardized shortfall over the family, recomputed under
random swaps, is the null distribution of the largest statistic, and its tail gives each test a
family-wise adjusted p-value. The run is flagged when some test has adjusted p ≤ 1 − ci_level
(one-sided, family-wise 5 % by default) *and* a relative shortfall above `min_effect` (pyperf's
rule: significance and a minimum effect). Max-T instead of Holm: τ and the a_i of one comparison
are strongly correlated and Holm would treat them as unrelated; max-T uses the dependence and keeps
the power Holm loses at 8 prompts, where a permutation p-value cannot go below 2⁻⁸.
Assumption: both runs measured the same repeats per prompt (the units are then exchangeable).

Reference rounds that drafted fewer than γ tokens (the end of a generation) are left out:
engines draft γ every round. The engine side needs per-request counters (concurrency 1).
Greedy runs also compare tokens: the engine's speculative output should equal the reference's
target-only greedy output (float rounding can flip near-ties; the count is reported as is).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specbench.analysis.stats import DEFAULT_SEED, bootstrap
from specbench.errors import SpecbenchError

CAUSES = {
    "chat_template": "chat template: the engine renders prompts differently from the reference "
    "(a server's own template with server.chat, a BOS token added twice with prompt_format text, "
    "chat_template settings that differ) — compare prompt token counts",
    "sampling": "sampling mismatch: temperature, top_p, top_k, penalties or seeds differ; vLLM "
    "drafts greedily by default (speculative draft_sample_method 'greedy' treats q as one-hot), "
    "which at T > 0 accepts less than exact speculative sampling — set "
    "speculative.options.draft_sample_method: probabilistic",
    "dtype": "dtype: the engine runs the pair in a lower precision (bf16/fp16) than the "
    "reference, or quantized; near-ties flip and acceptance drops",
    "draft_config": "draft config: another draft checkpoint or revision, its own max_model_len, "
    "tensor-parallel size or quantization, or a tokenizer/vocabulary that differs from the target's",
}


def _pool(
    rows: list[tuple[str, float, float, list[float]]],
) -> dict[str, tuple[float, float, np.ndarray]]:
    """prompt → (accepted, rounds, per_pos counts), summed over repeats."""
    out: dict[str, list[Any]] = {}
    for pid, acc, rounds, per in rows:
        cur = out.setdefault(pid, [0.0, 0.0, np.zeros(len(per))])
        cur[0] += acc
        cur[1] += rounds
        cur[2] = cur[2] + np.asarray(per, float)
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def reference_units(
    records: list[dict[str, Any]], workload: str, temp: float, gamma: int, drafters: set[str]
) -> dict[str, tuple[float, float, np.ndarray]]:
    """Per prompt from a transformers run: accepted, rounds and #(A ≥ i) over full-γ rounds."""
    rows = []
    for r in records:
        if (
            r.get("kind") != "spec"
            or r["workload"] != workload
            or float(r["temperature"]) != temp
            or int(r["gamma"]) != gamma
            or (r.get("policy") or "fixed") != "fixed"
            or r.get("drafter", "model") not in drafters
            or "rounds" not in r
        ):
            continue
        acc = np.asarray(r["rounds"]["accepted"], int)
        full = acc[np.asarray(r["rounds"]["drafted"], int) == gamma]
        per = [float((full >= i).sum()) for i in range(1, gamma + 1)]
        rows.append((r["prompt_id"], float(full.sum()), float(len(full)), per))
    return _pool(rows)


def engine_units(
    records: list[dict[str, Any]], workload: str, temp: float, gamma: int
) -> dict[str, tuple[float, float, np.ndarray]]:
    """Per prompt from an engine run: the per-request counters at the lowest concurrency."""
    mine = [
        r
        for r in records
        if r.get("kind") == "spec"
        and r["workload"] == workload
        and float(r["temperature"]) == temp
        and int(r["gamma"]) == gamma
        and r.get("spec_counters")
    ]
    if not mine:
        return {}
    c_ref = min(int(r.get("concurrency", 1)) for r in mine)
    rows = []
    for r in mine:
        if int(r.get("concurrency", 1)) != c_ref:
            continue
        c = r["spec_counters"]
        per = list(c.get("num_accepted_tokens_per_pos") or [])[:gamma]
        per += [0.0] * (gamma - len(per))
        rows.append((r["prompt_id"], float(c["num_accepted_tokens"]), float(c["num_drafts"]), per))
    return _pool(rows)


MIN_ROUNDS = 20  # a_i is tested when the two runs together reached position i − 1 ≥ 2× this often
PERMUTATIONS = 9999  # random swap patterns when the family's prompts are too many to enumerate
EXACT_MAX_UNITS = 12  # up to 2¹² swap patterns are enumerated exactly

Units = dict[str, tuple[float, float, np.ndarray]]


@dataclass(frozen=True)
class ShortfallTest:
    """One one-sided test of the family: is the engine's Σ num / Σ den below the reference's?

    Arrays are per prompt unit, aligned with `keys`; a unit's key is shared by every test of the
    same prompt (all temperatures and γ), so a permutation swaps a prompt's data everywhere at once.
    """

    keys: list[Hashable]
    num_e: np.ndarray
    den_e: np.ndarray
    num_r: np.ndarray
    den_r: np.ndarray


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        s = den.sum(axis=1)
        return np.where(s > 0, num.sum(axis=1) / s, np.nan)


def _swap_patterns(n: int, n_perm: int, seed: int) -> tuple[np.ndarray, bool]:
    """(B, n) 0/1 matrix of which units swap sides, and whether it enumerates all 2ⁿ patterns."""
    if n <= EXACT_MAX_UNITS:
        codes = np.arange(2**n)[:, None]
        return ((codes >> np.arange(n)) & 1).astype(float), True
    return np.random.default_rng(seed).integers(0, 2, size=(n_perm, n)).astype(float), False


def family_adjusted_p(
    tests: list[ShortfallTest], n_perm: int = PERMUTATIONS, seed: int = DEFAULT_SEED
) -> list[float]:
    """Family-wise adjusted one-sided p-values (engine below reference), max-T over the family.

    Each test's statistic engine − reference is standardized by its own permutation standard
    deviation (so a noisy deep position cannot dominate the maximum), z = −diff / sd; the
    adjusted p of test j is P(max_k z_k ≥ z_j) over the swap patterns (Westfall & Young 1993,
    single step). scipy.stats.permutation_test tests one statistic at a time, and max-T needs the
    joint permutation distribution of the whole family, hence the few lines here. NaN: not
    testable (a side with no rounds there, or no variation under any swap — identical data).
    """
    keys = sorted({k for t in tests for k in t.keys}, key=repr)
    index = {k: i for i, k in enumerate(keys)}
    n = len(keys)
    if n == 0:
        return [math.nan] * len(tests)
    flips, exact = _swap_patterns(n, n_perm, seed)  # (B, n)
    z_perm = np.full((len(flips), len(tests)), -np.inf)
    z_obs = np.full(len(tests), np.nan)
    for j, t in enumerate(tests):
        idx = np.asarray([index[k] for k in t.keys], int)

        def full(a: np.ndarray, idx: np.ndarray = idx) -> np.ndarray:
            out = np.zeros(n)
            out[idx] = a
            return out

        ne, de, nr, dr = (full(np.asarray(a, float)) for a in (t.num_e, t.den_e, t.num_r, t.den_r))
        with np.errstate(invalid="ignore", divide="ignore"):
            e_den, r_den = de.sum() + flips @ (dr - de), dr.sum() + flips @ (de - dr)
            diff = np.where(
                (e_den > 0) & (r_den > 0),
                (ne.sum() + flips @ (nr - ne)) / e_den - (nr.sum() + flips @ (ne - nr)) / r_den,
                np.nan,
            )  # (B,)
            obs = ne.sum() / de.sum() - nr.sum() / dr.sum() if de.sum() and dr.sum() else np.nan
        sd = float(np.nanstd(diff)) if np.isfinite(diff).any() else math.nan
        if not (math.isfinite(sd) and sd > 1e-12) or not math.isfinite(obs):
            continue
        z_perm[:, j] = np.where(np.isfinite(diff), -diff / sd, -np.inf)
        z_obs[j] = -obs / sd
    largest = z_perm.max(axis=1)  # (B,)
    out = []
    for z in z_obs:
        if not math.isfinite(z):
            out.append(math.nan)
            continue
        hits = int((largest >= z - 1e-9).sum())  # the identity pattern is one of them if exact
        out.append(hits / len(flips) if exact else (hits + 1) / (len(flips) + 1))
    return out


Measured = tuple[dict[str, Any], list[tuple[dict[str, Any], ShortfallTest]]]


def measure(
    eng: Units, ref: Units, gamma: int, n_boot: int, level: float, unit_prefix: Hashable = ""
) -> Measured:
    """One comparison's row (τ and a_i, engine vs reference, bootstrap CIs; no verdict yet) and
    its shortfall tests, each with the row entry it judges. `n_boot` 0 skips the intervals."""
    common = sorted(set(eng) & set(ref))
    if len(common) < 2 or not sum(eng[k][1] for k in common) or not sum(ref[k][1] for k in common):
        return {"n_prompts": len(common), "verdict": "insufficient"}, []
    keys: list[Hashable] = [(unit_prefix, k) for k in common]
    ea = np.asarray([eng[k][0] for k in common])
    ed = np.asarray([eng[k][1] for k in common])
    ep = np.asarray([eng[k][2] for k in common]).reshape(len(common), gamma)
    ra = np.asarray([ref[k][0] for k in common])
    rd = np.asarray([ref[k][1] for k in common])
    rp = np.asarray([ref[k][2] for k in common]).reshape(len(common), gamma)

    def diff_of(n_e: np.ndarray, d_e: np.ndarray, n_r: np.ndarray, d_r: np.ndarray) -> Any:
        return _ratio(n_e, d_e) - _ratio(n_r, d_r)

    def entry(ne: np.ndarray, de: np.ndarray, nr: np.ndarray, dr: np.ndarray) -> dict[str, Any]:
        point_e, point_r = float(ne.sum() / de.sum()), float(nr.sum() / dr.sum())
        lo = hi = math.nan
        if n_boot > 0:
            est = bootstrap(diff_of, [ne, de, nr, dr], n_boot, level)
            lo, hi = est.lo, est.hi
        rel = (point_r - point_e) / point_r if point_r > 0 else 0.0
        return {
            "engine": round(point_e, 6),
            "reference": round(point_r, 6),
            "diff": round(point_e - point_r, 6),
            "ci95": [_r(lo), _r(hi)],
            "relative_shortfall": round(rel, 6),
            "p_adjusted": None,
            "shortfall": False,
            # informational only, not a failure: the whole interval above 0 and above min_effect
            "higher": bool(math.isfinite(lo) and lo > 0),
        }

    tests: list[tuple[dict[str, Any], ShortfallTest]] = []
    tau = entry(ea, ed, ra, rd)
    tau["engine"], tau["reference"] = round(1 + tau["engine"], 6), round(1 + tau["reference"], 6)
    tests.append((tau, ShortfallTest(keys, ea, ed, ra, rd)))
    positions: list[dict[str, Any] | None] = []
    for i in range(gamma):
        de = ed if i == 0 else ep[:, i - 1]
        dr = rd if i == 0 else rp[:, i - 1]
        if de.sum() == 0 or dr.sum() == 0:
            positions.append(None)  # a side never reached position i: a_i is undefined there
            continue
        pos = {"position": i + 1, **entry(ep[:, i], de, rp[:, i], dr)}
        positions.append(pos)
        # Tiny counts (deep positions) are left untested; the rule is swap-invariant (the two runs'
        # total), so leaving them out cannot bias the permutation test.
        if de.sum() + dr.sum() >= 2 * MIN_ROUNDS:
            tests.append((pos, ShortfallTest(keys, ep[:, i], de, rp[:, i], dr)))
        else:
            pos["untested"] = f"fewer than {2 * MIN_ROUNDS} rounds reached it in the two runs"
    row = {"n_prompts": len(common), "mean_accepted_length": tau, "per_position": positions}
    return row, tests


def judge(
    measured: list[Measured],
    alpha: float,
    min_effect: float,
    n_perm: int = PERMUTATIONS,
    seed: int = DEFAULT_SEED,
) -> None:
    """Set each row's verdict from one family-wise test over every row's tests (in place)."""
    flat = [(e, t) for _, tests in measured for e, t in tests]
    p_adj = family_adjusted_p([t for _, t in flat], n_perm, seed)
    for (e, _), p in zip(flat, p_adj, strict=True):
        e["p_adjusted"] = _r(p)
        e["shortfall"] = bool(
            math.isfinite(p) and p <= alpha and e["relative_shortfall"] > min_effect
        )
        e["higher"] = bool(e["higher"] and -e["relative_shortfall"] > min_effect)
    for row, tests in measured:
        if row.get("verdict") == "insufficient":
            continue
        short = any(e["shortfall"] for e, _ in tests)
        higher = row["mean_accepted_length"]["higher"] and not short
        row["family_tests"] = len(flat)
        row["verdict"] = "shortfall" if short else ("higher" if higher else "ok")


def compare(
    eng: Units, ref: Units, gamma: int, n_boot: int, level: float, min_effect: float
) -> dict[str, Any]:
    """One comparison judged on its own: τ and a_i of engine vs reference, family-wise level
    1 − `level` (one-sided) over τ and the tested a_i."""
    m = measure(eng, ref, gamma, n_boot, level)
    judge([m], 1 - level, min_effect)
    return m[0]


def _r(x: float) -> float | None:
    return round(float(x), 6) if math.isfinite(x) else None


def greedy_outputs(
    records: list[dict[str, Any]], ref_records: list[dict[str, Any]], workload: str, gamma: int
) -> dict[str, int] | None:
    """At T = 0: engine γ outputs identical to the reference's target-only greedy outputs."""
    ref = {
        r["prompt_id"]: r["output_ids"][0]
        for r in ref_records
        if r.get("kind") == "baseline"
        and r["workload"] == workload
        and float(r["temperature"]) == 0.0
        and r.get("output_ids")
        and int(r.get("repeat", 0)) == 0
    }
    eng = [
        r
        for r in records
        if r.get("kind") == "spec"
        and r["workload"] == workload
        and float(r["temperature"]) == 0.0
        and int(r["gamma"]) == gamma
        and r.get("output_ids")
        and int(r.get("repeat", 0)) == 0
        and r["prompt_id"] in ref
    ]
    if not eng:
        return None
    c_ref = min(int(r.get("concurrency", 1)) for r in eng)
    pairs = [
        (r["output_ids"][0], ref[r["prompt_id"]])
        for r in eng
        if int(r.get("concurrency", 1)) == c_ref
    ]
    return {"n": len(pairs), "identical": sum(1 for a, b in pairs if list(a) == list(b))}


def setting_mismatches(config: dict[str, Any], ref_config: dict[str, Any]) -> list[tuple[str, str]]:
    """(cause key, what differs) between the engine run's config and the reference's."""
    out: list[tuple[str, str]] = []
    s, rs = config.get("sampling") or {}, ref_config.get("sampling") or {}
    for key in ("top_p", "top_k"):
        if s.get(key) != rs.get(key):
            out.append(("sampling", f"sampling.{key} {s.get(key)} vs reference {rs.get(key)}"))
    for key in ("max_new_tokens", "stop"):
        if config.get(key) != ref_config.get(key):
            out.append(("sampling", f"{key} {config.get(key)} vs reference {ref_config.get(key)}"))
    if config.get("chat_template") != ref_config.get("chat_template"):
        out.append(
            (
                "chat_template",
                f"chat_template {config.get('chat_template')} vs reference {ref_config.get('chat_template')}",
            )
        )
    server = config.get("server") or {}
    if config.get("backend") == "openai":
        if server.get("chat"):
            out.append(("chat_template", "server.chat: true (the server applies its own template)"))
        elif server.get("prompt_format", "text") == "text":
            out.append(
                ("chat_template", "server.prompt_format text (the server re-tokenizes the prompt)")
            )
    engine = config.get("engine") or {}
    dtype = engine.get("dtype") or (config.get("target") or {}).get("dtype")
    ref_dtype = (ref_config.get("target") or {}).get("dtype")
    if config.get("backend") == "vllm" and dtype != ref_dtype:
        out.append(("dtype", f"dtype {dtype} vs reference {ref_dtype}"))
    spec = config.get("speculative") or {}
    opts = spec.get("options") or {}
    if config.get("backend") == "vllm" and opts.get("draft_sample_method", "greedy") == "greedy":
        temps = [t for t in (config.get("sampling") or {}).get("temperatures", []) if t > 0]
        if temps:
            out.append(("sampling", "vLLM drafts greedily (draft_sample_method greedy) at T > 0"))
    draft = spec.get("model") or (config.get("draft") or {}).get("model")
    ref_draft = (ref_config.get("draft") or {}).get("model")
    if config.get("backend") == "vllm" and draft and ref_draft and draft != ref_draft:
        out.append(("draft_config", f"draft {draft} vs reference {ref_draft}"))
    return out


def check_against_reference(
    records: list[dict[str, Any]],
    config: dict[str, Any],
    loader: Callable[
        [Path], tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], list[str]]
    ],
) -> dict[str, Any] | None:
    """The results.json `conformance` section, or None when no reference run is configured."""
    conf = config.get("conformance") or {}
    ref_dir = conf.get("reference_run")
    if not ref_dir:
        return None
    out: dict[str, Any] = {"reference_run": str(ref_dir), "comparisons": []}
    try:
        ref_records, ref_config, _, _ = loader(Path(ref_dir))
    except SpecbenchError as exc:
        return {**out, "status": "unavailable", "reason": str(exc)}
    if (ref_config.get("backend") or "transformers") != "transformers":
        return {
            **out,
            "status": "unavailable",
            "reason": "the reference run must use the transformers backend",
        }
    decision = config.get("decision") or {}
    n_boot = int(decision.get("bootstrap", 2000))
    level = float(decision.get("ci_level", 0.95))
    min_effect = float(conf.get("min_effect", 0.05))
    ref_draft = ref_config.get("draft") or {}
    drafters = {
        str(ref_draft.get("name") or ""),
        str(ref_draft.get("method", "model")),
        "model",
    } - {""}
    groups: dict[tuple[str, float], set[int]] = defaultdict(set)
    for r in records:
        if r.get("kind") == "spec" and r.get("spec_counters"):
            groups[(r["workload"], float(r["temperature"]))].add(int(r["gamma"]))
    measured: list[Measured] = []
    for (workload, temp), gammas in sorted(groups.items()):
        for g in sorted(gammas):
            ref = reference_units(ref_records, workload, temp, g, drafters)
            if not ref:
                continue
            eng = engine_units(records, workload, temp, g)
            # the unit is the prompt of a workload, shared by its temperatures and γ
            body, tests = measure(eng, ref, g, n_boot, level, unit_prefix=workload)
            row = {"workload": workload, "temperature": temp, "gamma": g, **body}
            if temp == 0.0:
                row["greedy_outputs"] = greedy_outputs(records, ref_records, workload, g)
            measured.append((row, tests))
            out["comparisons"].append(row)
    # one family over every comparison of the run: the run's status has the stated error rate
    judge(measured, 1 - level, min_effect)
    out["family_wise_alpha"] = round(1 - level, 6)
    mismatches = setting_mismatches(config, ref_config)
    out["setting_differences"] = [m for _, m in mismatches]
    if not out["comparisons"]:
        return {
            **out,
            "status": "unavailable",
            "reason": "no workload × temperature × γ measured in both runs with per-request counters "
            "(concurrency 1)",
        }
    short = [c for c in out["comparisons"] if c["verdict"] == "shortfall"]
    out["status"] = "shortfall" if short else "ok"
    if short:
        flagged = {k for k, _ in mismatches}
        # The causes the settings point at first, then the rest.
        out["causes"] = [CAUSES[k] for k in CAUSES if k in flagged] + [
            CAUSES[k] for k in CAUSES if k not in flagged
        ]
    return out
