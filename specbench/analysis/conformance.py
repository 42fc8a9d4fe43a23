"""Engine conformance: does the engine accept as much as specbench's exact reference does?

A vllm/openai run's acceptance is compared with a transformers-backend reference run
(`conformance.reference_run`) on the same prompts and sampling. With p and q processed
identically both implement the same rejection rule (THEORY §1), so acceptance must agree up to
sampling noise; a shortfall means the engine is not doing what the reference does.

Per workload × temperature × γ measured by both, paired by prompt (repeats pooled):
  τ = 1 + accepted / rounds (mean acceptance length) and the per-position conditional curve
  a_i = #(A ≥ i) / #(A ≥ i − 1), engine − reference, with a paired prompt-bootstrap interval.
A shortfall is flagged when the interval lies wholly below 0 (significant) *and* the relative
shortfall exceeds `min_effect` (pyperf's rule: significance and a minimum effect).
Reference rounds that drafted fewer than γ tokens (the end of a generation) are left out:
engines draft γ every round. The engine side needs per-request counters (concurrency 1).
Greedy runs also compare tokens: the engine's speculative output should equal the reference's
target-only greedy output (float rounding can flip near-ties; the count is reported as is).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from specbench.analysis.stats import bootstrap
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


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        s = den.sum(axis=1)
        return np.where(s > 0, num.sum(axis=1) / s, np.nan)


def compare(
    eng: dict[str, tuple[float, float, np.ndarray]],
    ref: dict[str, tuple[float, float, np.ndarray]],
    gamma: int,
    n_boot: int,
    level: float,
    min_effect: float,
) -> dict[str, Any]:
    """τ and a_i of engine vs reference on the prompts both measured, paired bootstrap."""
    common = sorted(set(eng) & set(ref))
    if len(common) < 2:
        return {"n_prompts": len(common), "verdict": "insufficient"}
    if sum(eng[k][1] for k in common) == 0 or sum(ref[k][1] for k in common) == 0:
        return {"n_prompts": len(common), "verdict": "insufficient"}
    ea = np.asarray([eng[k][0] for k in common])
    ed = np.asarray([eng[k][1] for k in common])
    ep = np.asarray([eng[k][2] for k in common]).reshape(len(common), gamma)
    ra = np.asarray([ref[k][0] for k in common])
    rd = np.asarray([ref[k][1] for k in common])
    rp = np.asarray([ref[k][2] for k in common]).reshape(len(common), gamma)

    def diff_of(n_e: np.ndarray, d_e: np.ndarray, n_r: np.ndarray, d_r: np.ndarray) -> Any:
        return _ratio(n_e, d_e) - _ratio(n_r, d_r)

    def judged(point_e: float, point_r: float, est: Any) -> dict[str, Any]:
        point_e, point_r = float(point_e), float(point_r)
        rel = (point_r - point_e) / point_r if point_r > 0 else 0.0
        significant = bool(np.isfinite(est.hi) and est.hi < 0)
        higher = bool(np.isfinite(est.lo) and est.lo > 0 and -rel > min_effect)
        return {
            "engine": round(point_e, 6),
            "reference": round(point_r, 6),
            "diff": round(est.value, 6),
            "ci95": [_r(est.lo), _r(est.hi)],
            "relative_shortfall": round(rel, 6),
            "shortfall": bool(significant and rel > min_effect),
            "higher": higher,
        }

    tau_est = bootstrap(diff_of, [ea, ed, ra, rd], n_boot, level)
    tau = judged(1 + ea.sum() / ed.sum(), 1 + ra.sum() / rd.sum(), tau_est)
    positions: list[dict[str, Any] | None] = []
    for i in range(gamma):
        de = ed if i == 0 else ep[:, i - 1]
        dr = rd if i == 0 else rp[:, i - 1]
        if de.sum() == 0 or dr.sum() == 0:
            positions.append(None)
            continue
        est = bootstrap(diff_of, [ep[:, i], de, rp[:, i], dr], n_boot, level)
        positions.append(
            {"position": i + 1, **judged(ep[:, i].sum() / de.sum(), rp[:, i].sum() / dr.sum(), est)}
        )
    short = tau["shortfall"] or any(p and p["shortfall"] for p in positions)
    higher = tau["higher"] and not short
    return {
        "n_prompts": len(common),
        "mean_accepted_length": tau,
        "per_position": positions,
        "verdict": "shortfall" if short else ("higher" if higher else "ok"),
    }


def _r(x: float) -> float | None:
    return round(float(x), 6) if np.isfinite(x) else None


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
    for (workload, temp), gammas in sorted(groups.items()):
        for g in sorted(gammas):
            ref = reference_units(ref_records, workload, temp, g, drafters)
            if not ref:
                continue
            eng = engine_units(records, workload, temp, g)
            row = {"workload": workload, "temperature": temp, "gamma": g}
            row.update(compare(eng, ref, g, n_boot, level, min_effect))
            if temp == 0.0:
                row["greedy_outputs"] = greedy_outputs(records, ref_records, workload, g)
            out["comparisons"].append(row)
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
