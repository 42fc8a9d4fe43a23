"""Per-prompt acceptance counts for the conformance check: accepted tokens, rounds and #(A ≥ i),
repeats pooled, from the transformers reference run (full-γ rounds only) and from an engine run
(its per-request counters at the lowest concurrency)."""

from __future__ import annotations

from typing import Any

import numpy as np

from specbench.analysis.serving.serving_acceptance import request_counts
from specbench.record_line import RecordLine

Units = dict[str, tuple[float, float, np.ndarray]]


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
    records: list[RecordLine], workload: str, temp: float, gamma: int, drafters: set[str]
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
    records: list[RecordLine], workload: str, temp: float, gamma: int
) -> dict[str, tuple[float, float, np.ndarray]]:
    """Per prompt from an engine run: each request's own counts (the engine's per-request
    figures, else its unpolluted counter deltas) at the lowest concurrency."""
    mine = [
        r
        for r in records
        if r.get("kind") == "spec"
        and r["workload"] == workload
        and float(r["temperature"]) == temp
        and int(r["gamma"]) == gamma
        and request_counts(r) is not None
        and r.get("method", "draft_model") in ("draft_model", None)  # the reference's method
    ]
    if not mine:
        return {}
    c_ref = min(int(r.get("concurrency", 1)) for r in mine)
    rows = []
    for r in mine:
        if int(r.get("concurrency", 1)) != c_ref:
            continue
        c = request_counts(r)
        if c is None:
            continue
        per = list(c.per_pos)[:gamma]
        per += [0.0] * (gamma - len(per))
        rows.append((r["prompt_id"], c.accepted, c.drafts, per))
    return _pool(rows)
