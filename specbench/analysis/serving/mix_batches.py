"""The batches of the profile's mix (docs/serving.md "The profile's mix"): steady-state open-loop
batches whose arrivals each drew a workload, a temperature and a prompt
(`harness.serving.mix_draws`). Their request lines carry `mix: "profile"` and what was drawn;
their `engine_metrics` line `workload: "mix"`, `mix: "profile"` and `mix_shares` (the asked token
shares, the request shares drawn with, the temperature shares, each workload's mean budget).

- `mix_batches`: each completed mix batch (the attempt whose metrics line is on disk; an
  interrupted attempt's lines are history, as in `load_cells`) with its requests, warm-up
  excluded — what the decision at the profile reads;
- `without_mix`: the records per-workload analyses read (mix requests are not per-workload
  batches: their load, and so their latency, is the mix's);
- `mix_section`: results.json's `mix`, one cell per setting × load point (repeats pooled) as
  `load_cells` computes it, plus the token shares achieved in the steady window beside the
  asked ones: answers that stop before their budget shift them (`config.traffic_mix`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from specbench.analysis.documents.results_model_load import MixCell, MixSection
from specbench.analysis.serving.load_cells import load_section, slo_of, steady_fields
from specbench.analysis.stats.serialize import json_num
from specbench.config.stored import StoredConfig
from specbench.record_line import RecordLine

PROFILE_MIX = "profile"  # = config.profile.PROFILE_MIX (analysis does not import config)
Record = RecordLine


def is_mix(rec: Record) -> bool:
    return rec.get("mix") == PROFILE_MIX


def without_mix(records: Iterable[Record]) -> list[Any]:
    """The records of per-workload batches (closed loop, per-workload open loop)."""
    return [r for r in records if not is_mix(r)]


@dataclass(frozen=True)
class MixRequest:
    workload: str
    temperature: float
    arrival_s: float  # s from the batch start
    phase: str  # "steady" or "drain" (warm-up requests are not included)
    ok: bool  # False: a failed request (counts as missing the SLO)
    ttft_ms: float | None  # including queue_ms (client-side wait), as load_cells does
    tpot_ms: float | None
    e2e_ms: float | None  # including queue_ms
    new_tokens: int
    prompt_id: str = ""
    draw: int = -1  # its index among the batch's draws (the same at every setting)
    buffered: bool = False  # its stream arrived in one burst (analysis.serving.buffering)


@dataclass(frozen=True)
class MixBatch:
    gamma: int
    drafter: str  # the setting's label ("" for the baseline)
    setting: str  # the setting's display name
    method: str | None
    schedule: list[list[int]] | None
    load: str  # the load point's name, e.g. "rate=2"
    rate: float | None
    repeat: int
    engine_start: int | None
    window_s: tuple[float, float]  # the steady window
    requests: tuple[MixRequest, ...]  # of the completed attempt, warm-up excluded
    kept_up: str | None  # "yes" / "no" (load_cells' rule, §21); None: too few to tell
    attempt: str = ""


def _request(r: Record) -> MixRequest:
    ok = r.get("kind") != "failed" and r.get("status", "ok") == "ok"
    q = float(r.get("queue_ms") or 0.0)
    ttft = r.get("ttft_ms") or []
    return MixRequest(
        workload=str(r["workload"]),
        temperature=float(r["temperature"]),
        arrival_s=float(r.get("arrival_s") or 0.0),
        phase=str(r.get("phase")),
        ok=ok,
        ttft_ms=float(ttft[0]) + q if ok and ttft else None,
        tpot_ms=float(tpot) if ok and (tpot := r.get("tpot_ms")) is not None else None,
        e2e_ms=float(r["wall_ms"]) + q if ok and r.get("wall_ms") is not None else None,
        new_tokens=int(r.get("new_tokens") or 0) if ok else 0,
        prompt_id=str(r.get("prompt_id", "")),
        draw=int(d) if (d := r.get("draw")) is not None else -1,
        buffered=bool(r.get("buffered")),
    )


def _kept_text(kept: bool | None) -> str | None:
    return None if kept is None else ("yes" if kept else "no")


def _completed(records: Iterable[Record]) -> tuple[list[Record], dict[str, list[Record]]]:
    """The mix metrics lines with a steady window, and the request lines of their attempts."""
    metrics, by_attempt = [], defaultdict(list)
    recs = [r for r in records if is_mix(r)]
    for r in recs:
        if r.get("kind") == "engine_metrics" and r.get("steady_window_s"):
            metrics.append(r)
    attempts = {m.get("attempt") for m in metrics}
    for r in recs:
        if r.get("kind") in ("baseline", "spec", "failed") and r.get("attempt") in attempts:
            by_attempt[str(r["attempt"])].append(r)
    return metrics, by_attempt


def mix_batches(records: Iterable[Record]) -> list[MixBatch]:
    """Every completed mix batch, in the order its metrics lines were written."""
    metrics, by_attempt = _completed(records)
    out = []
    for m in metrics:
        reqs = by_attempt.get(str(m.get("attempt")), [])
        start, end = m["steady_window_s"]
        kept = steady_fields(list(reqs), [m]).kept_up
        inside = sorted(
            (r for r in reqs if r.get("phase") in ("steady", "drain")),
            key=lambda r: (float(r.get("arrival_s") or 0.0), int(r.get("draw") or 0)),
        )
        start_no = m.get("engine_start")
        out.append(
            MixBatch(
                gamma=int(m.get("gamma") or 0),
                drafter=str(m.get("drafter", "")),
                setting=str(m.get("setting", "")),
                method=m.get("method"),
                schedule=m.get("schedule"),
                load=str(m.get("load")),
                rate=float(rate) if (rate := m.get("rate")) is not None else None,
                repeat=int(m.get("repeat") or 0),
                engine_start=int(start_no) if start_no is not None else None,
                window_s=(float(start), float(end)),
                requests=tuple(_request(r) for r in inside),
                kept_up=_kept_text(kept),
                attempt=str(m.get("attempt", "")),
            )
        )
    return out


def token_shares_of(
    requests: Sequence[Record], workloads: Iterable[str] = ()
) -> dict[str, float | None]:
    """Each workload's share of the output tokens of the requests that arrived in the window and
    completed (steady and drain); `workloads` first, in their order (0 when none came)."""
    tokens: dict[str, int] = {w: 0 for w in workloads}
    for r in requests:
        if r.get("kind") != "failed" and r.get("phase") in ("steady", "drain"):
            w = str(r["workload"])
            tokens[w] = tokens.get(w, 0) + int(r.get("new_tokens") or 0)
    total = sum(tokens.values())
    return {w: json_num(n / total) if total else None for w, n in tokens.items()}


def mix_section(
    records: Sequence[Record], config: StoredConfig, level: float, n_boot: int
) -> MixSection | None:
    """results.json's `mix` (module docstring) as its model; None when the run has no mix
    batch."""
    metrics, by_attempt = _completed(records)
    if not metrics:
        return None
    reqs = [r for a in by_attempt.values() for r in a]
    shares = metrics[0].get("mix_shares") or {}
    # one group for load_cells: the requests' own workload / temperature do not split a cell
    cells, notes = load_section([*reqs, *metrics], slo_of(config), level, n_boot)
    mix_cells = []
    for c in cells:
        own = [
            r
            for r in reqs
            if int(r["gamma"]) == c.gamma
            and str(r.get("drafter", "")) == c.drafter
            and r.get("load") == c.load
        ]
        # the load cell's figures (every one set) and the workloads' token shares
        shares_here = token_shares_of(own, shares.get("token_shares") or {})
        mix_cells.append(MixCell(**dict(c), token_shares=shares_here))
    return MixSection(
        token_shares=shares.get("token_shares") or {},
        request_shares=shares.get("request_shares") or {},
        temperature_shares=shares.get("temperature_shares") or {},
        mean_max_tokens=shares.get("mean_max_tokens") or {},
        cells=mix_cells,
        warnings=[f"mix {n}" for n in notes],
    )
