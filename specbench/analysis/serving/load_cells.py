"""Per load point and setting ("cell") of an engine run: latency tails with intervals, SLO goodput
under the SLO, buffered streams and the concurrency actually reached (results.json
`engine.load`; docs/results.md, docs/serving.md "Load").

A cell is one engine setting (γ, drafter label) × one load point of one workload × temperature:
a closed-loop concurrency (`closed`, c) or an open-loop rate / trace (`harness.serving.load.arrivals`),
repeats pooled. Open-loop requests count only from the attempt whose batch completed (its
`engine_metrics` line names the `attempt`): a batch a kill interrupted is run again whole under a
new attempt, and its earlier requests are left out. In an open-loop cell a request's TTFT and
end-to-end latency include `queue_ms` (how late it was sent after its scheduled arrival).

A steady-state cell (`load.duration_s` / `load.requests`: its batches' metrics carry
`steady_window_s`) leaves its warm-up requests out of everything; its tails and SLO goodput are over
the requests that arrived in the window (steady and drain: dropping those still in flight at the
end would drop the slowest exactly when the server falls behind), its achieved rate counts the
completions inside the window only, and `kept_up` is the queueing-growth rule of
`analysis.stats.steady_state` (docs/theory.md §21) or the time bound hit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_load import (
    Goodput,
    LoadCell,
    QuantilesCI,
    QueueingGrowth,
    SloJSON,
    SteadyState,
    WarmupExcluded,
)
from specbench.analysis.serving.buffering import buffered_cell
from specbench.analysis.stats.latency_tails import Slo, goodput, quantile_ci
from specbench.analysis.stats.serialize import json_num
from specbench.analysis.stats.steady_state import kept_up, queueing_growth
from specbench.config.stored import StoredConfig, StoredSlo
from specbench.record_line import RecordLine

Record = RecordLine
CLOSED = "closed"
CellKey = tuple[int, str, str, int]  # (γ, drafter label, load, concurrency)


def _load(r: Record) -> str:
    return str(r.get("load") or CLOSED)


def _key(r: Record) -> CellKey:
    return (int(r["gamma"]), str(r.get("drafter", "")), _load(r), int(r.get("concurrency", 1)))


def _order(key: CellKey) -> tuple[Any, ...]:
    g, label, load, c = key
    rate = float(load.split("=", 1)[1]) if load.startswith("rate=") else None
    kind = 0 if load == CLOSED else (1 if rate is not None else 2)
    kind = 3 if load.startswith("steady c=") else kind  # a steady closed loop, by its c
    return (g, label, kind, c if kind in (0, 3) else 0, rate or 0.0)


def slo_of(config: StoredConfig) -> Slo:
    s = config.slo or StoredSlo()
    return Slo(s.ttft_ms, s.tpot_ms, s.e2e_ms)


def _kept(recs: Sequence[Record]) -> tuple[list[Record], list[Record]]:
    """(requests, metrics) of a workload × temperature that count: every closed-loop line, and
    the open-loop lines of completed attempts."""
    metrics = [r for r in recs if r.get("kind") == "engine_metrics"]
    attempts = {m.get("attempt") for m in metrics if _load(m) != CLOSED}
    reqs = [
        r
        for r in recs
        if r.get("kind") in ("baseline", "spec", "failed")
        and (_load(r) == CLOSED or r.get("attempt") in attempts)
    ]
    return reqs, metrics


def _failed(recs: list[Record], ok: list[Record]) -> list[Record]:
    """Failed requests not made good by a later success of the same unit (closed loop; an
    open-loop attempt is whole, its failures stand)."""
    done = {(r["prompt_id"], r.get("repeat", 0)) for r in ok if _load(r) == CLOSED}
    return [
        r
        for r in recs
        if r.get("kind") == "failed" and (r["prompt_id"], r.get("repeat", 0)) not in done
    ]


def steady_fields(recs: list[Record], metrics: list[Record]) -> SteadyState:
    """A steady-state cell's window, rates and kept-up verdict (module docstring), repeats
    pooled: durations and counts summed, arrival times taken from each batch's window start."""
    windows = {int(m.get("repeat", 0)): m["steady_window_s"] for m in metrics}
    span = sum(end - start for start, end in windows.values())
    warm = [r for r in recs if r.get("phase") == "warmup"]
    inside = [
        r
        for r in recs
        if r.get("phase") in ("steady", "drain") and int(r.get("repeat", 0)) in windows
    ]
    ok = [r for r in inside if r.get("kind") != "failed" and r.get("ttft_ms")]
    done = [r for r in ok if r.get("phase") == "steady"]
    t = [float(r["arrival_s"]) - windows[int(r.get("repeat", 0))][0] for r in ok]
    lat = [float(r.get("queue_ms") or 0.0) + float(r["ttft_ms"][0]) for r in ok]
    mean_len = span / len(windows) if windows else 0.0
    g = queueing_growth(t, lat, 0.0, mean_len)
    hit = any(m.get("hit_bound") for m in metrics)
    growth = None
    if g is not None:
        growth = QueueingGrowth(
            n=g.n,
            tau=json_num(g.tau),
            p_value=json_num(g.p_value),
            slope_ms_per_s=json_num(g.slope_ms_per_s),
            rise_ms=json_num(g.rise_ms),
            baseline_ms=json_num(g.baseline_ms),
            growing=g.growing,
        )
    return SteadyState(
        steady_duration_s=json_num(span),
        warmup_excluded=WarmupExcluded(
            n=len(warm), seconds=json_num(sum(start for start, _ in windows.values()))
        ),
        arrival_rate=json_num(len(inside) / span) if span > 0 else None,
        achieved_rate=json_num(len(done) / span) if span > 0 else None,
        achieved_tokens_per_s=json_num(sum(int(r.get("new_tokens") or 0) for r in done) / span)
        if span > 0
        else None,
        n_drain=sum(r.get("phase") == "drain" for r in inside),
        queueing_growth=growth,
        kept_up=kept_up(g, hit),
    )


def _sum(values: list[float | None]) -> float:
    return float(sum(v or 0 for v in values))


def _quantiles(values: Sequence[float], level: float) -> QuantilesCI:
    """p50 / p90 / p99 with their order-statistic intervals (`stats.latency_tails.quantile_ci`,
    docs/theory.md §16)."""

    def one(p: float) -> EstimateJSON:
        est, lo, hi = quantile_ci(values, p, level)
        return EstimateJSON(value=json_num(est), ci95=(json_num(lo), json_num(hi)))

    return QuantilesCI(p50=one(0.5), p90=one(0.9), p99=one(0.99))


def cell_entry(
    key: CellKey, recs: list[Record], metrics: list[Record], slo: Slo, level: float, n_boot: int
) -> tuple[LoadCell, list[str]]:
    g, label, load, conc = key
    steady = (
        steady_fields(recs, metrics)
        if metrics and all(m.get("steady_window_s") for m in metrics)
        else None
    )
    if steady is not None:  # the warm-up is measured and kept, but counts nowhere
        recs = [r for r in recs if r.get("phase") != "warmup"]
    ok = [r for r in recs if r.get("status", "ok") == "ok" and r.get("kind") != "failed"]
    failed = _failed(recs, ok)
    q = [float(r.get("queue_ms") or 0.0) for r in ok]
    ttft = [r["ttft_ms"][0] + d for r, d in zip(ok, q, strict=True) if r.get("ttft_ms")]
    e2e = [float(r["wall_ms"]) + d for r, d in zip(ok, q, strict=True)]
    tpot = [r.get("tpot_ms") for r in ok]
    wall_s = _sum([m.get("batch_wall_ms") for m in metrics]) / 1000.0
    rps = _sum([m.get("n_requests") for m in metrics]) / wall_s if wall_s > 0 else None
    tps = _sum([m.get("output_tokens") for m in metrics]) / wall_s if wall_s > 0 else None
    if steady is not None:  # completions inside the window per second of it
        wall_s = steady.steady_duration_s or 0.0
        rps, tps = steady.achieved_rate, steady.achieved_tokens_per_s
    n_buf, meaningless = buffered_cell(ok)
    planned = max((int(m.get("n_planned") or 0) for m in metrics), default=0)
    where = f"{label or 'baseline'} {load if load != CLOSED else f'c={conc}'}"
    offered_rate = None
    if load != CLOSED:
        offered = [x for m in metrics if (x := m.get("offered_rate")) is not None]
        offered_rate = json_num(sum(offered) / len(offered)) if offered else None
    good_json = None
    if slo.any:
        good = [
            slo.met(r["ttft_ms"][0] + d, r.get("tpot_ms"), float(r["wall_ms"]) + d)
            for r, d in zip(ok, q, strict=True)
        ] + [False] * len(failed)
        tokens = [int(r.get("new_tokens") or 0) for r in ok] + [0] * len(failed)
        # stats/ returns the JSON-ready figures (it sits below documents/): read them as the model
        good_json = Goodput.model_validate(goodput(good, tokens, rps, tps, level, n_boot))
    cell = LoadCell(
        gamma=g,
        drafter=label,
        load=load,
        concurrency=conc if load == CLOSED else None,
        effective_concurrency=min(conc, planned) if load == CLOSED and planned else None,
        max_in_flight=conc if load != CLOSED else None,
        offered_rate=offered_rate,
        n=len(ok),
        n_failed=len(failed),
        duration_s=json_num(wall_s) if wall_s > 0 else None,
        requests_per_s=json_num(rps),
        output_tokens_per_s=json_num(tps),
        ttft_ms=_quantiles(ttft, level),
        tpot_ms=_quantiles([t for t in tpot if t is not None], level),
        e2e_ms=_quantiles(e2e, level),
        queue_ms_max=json_num(max(q)) if load != CLOSED and q else None,
        not_sent=int(_sum([m.get("not_sent") for m in metrics])),
        hit_bound=any(m.get("hit_bound") for m in metrics),
        buffered_requests=n_buf,
        tpot_meaningless=meaningless,
        goodput=good_json,
        steady=steady,
    )
    notes: list[str] = []
    if meaningless:
        notes.append(
            f"{where}: {n_buf}/{len(ok)} responses arrived buffered (in one chunk, or all "
            "chunks at once): a gateway or server buffers the stream, so TTFT ≈ end-to-end "
            "and TPOT is meaningless there"
        )
    if cell.hit_bound:
        notes.append(
            f"{where}: load.max_duration_s passed with {cell.not_sent} requests not sent: "
            "the server did not sustain this load"
        )
    if steady is not None and steady.kept_up is False:
        notes.append(steady_note(where, steady, cell.offered_rate))
    return cell, notes


def steady_note(where: str, steady: SteadyState, offered: float | None) -> str:
    rates = f"achieved {steady.achieved_rate or 0:.2f}/s" + (
        f" of {offered:.2f}/s offered" if offered is not None else ""
    )
    g = steady.queueing_growth
    why = (
        f"latency from arrival rose {g.rise_ms:.0f} ms across the steady state "
        f"(from {g.baseline_ms:.0f} ms; Kendall p = {g.p_value:.1e})"
        if g is not None and g.growing
        else "the time bound passed with requests not sent or in flight"
    )
    return f"{where}: the server did not keep up ({rates}; {why}; docs/theory.md §21)"


def load_section(
    recs: Sequence[Record], slo: Slo, level: float, n_boot: int
) -> tuple[list[LoadCell], list[str]]:
    """The cells of one workload × temperature (records of that group, every load point) and
    their warnings, under the run's SLO."""
    reqs, metrics = _kept(recs)
    attempts = {m.get("attempt") for m in metrics}
    by_cell: dict[CellKey, list[Record]] = defaultdict(list)
    for r in reqs:
        by_cell[_key(r)].append(r)
    m_by: dict[CellKey, list[Record]] = defaultdict(list)
    for m in metrics:
        if _load(m) == CLOSED or m.get("attempt") in attempts:
            m_by[_key(m)].append(m)
    cells, notes = [], []
    for key in sorted(by_cell, key=_order):
        cell, more = cell_entry(key, by_cell[key], m_by.get(key, []), slo, level, n_boot)
        cells.append(cell)
        notes += more
    reach = sorted(
        {
            (c.concurrency, c.effective_concurrency)
            for c in cells
            if c.concurrency is not None
            and c.effective_concurrency is not None
            and c.concurrency > c.effective_concurrency
        }
    )
    for c, eff in reach:
        notes.append(
            f"concurrency {c} cannot be reached with {eff} prompts: effective concurrency {eff}"
        )
    return cells, notes


@dataclass(frozen=True)
class EngineLoad:
    """An engine entry's load figures (`engine.load`, `engine.slo`) and the warnings they add."""

    cells: list[LoadCell]
    slo: SloJSON | None
    notes: list[str]


def by_group(records: Sequence[Record]) -> dict[tuple[str, float], list[Record]]:
    """Records by (workload, temperature)."""
    out: dict[tuple[str, float], list[Record]] = defaultdict(list)
    for r in records:
        if "workload" in r and "temperature" in r:
            out[(str(r["workload"]), float(r["temperature"]))].append(r)
    return dict(out)


def engine_load(
    recs: Sequence[Record], config: StoredConfig, level: float, n_boot: int
) -> EngineLoad:
    """`engine.load` of one engine entry from its group's records (every load point), the
    run's SLO as given, and the cells' warnings."""
    cells, notes = load_section(recs, slo_of(config), level, n_boot)
    s = config.slo
    given = {
        k: v for k in ("ttft_ms", "tpot_ms", "e2e_ms") if s and (v := getattr(s, k)) is not None
    }
    return EngineLoad(cells, SloJSON(**given) if given else None, notes)


def closed_loop(records: Sequence[Record]) -> list[Record]:
    """The records the closed-loop analysis reads (open-loop requests and batches left out)."""
    return [r for r in records if _load(r) == CLOSED]
