"""The open-loop part of `specbench run` on an engine backend (`load.rates` / `load.trace`):
which open-loop batches a run has, which are complete, and one batch run and recorded.

An open-loop batch is one setting × workload × temperature × load point × repeat: every prompt
of the workload (as many as the trace has arrivals, for `trace`), sent at its arrival time. With
`load.duration_s` / `load.requests` (a *steady-state* batch, docs/serving.md "Steady state") the
arrivals go on for that long instead, each sending a prompt drawn with replacement (seeded, the
same draws at every setting), and every request's line says its `phase`: `warmup` (arrived
before the window's start), `steady` (arrived in the window and done by its end) or `drain`
(arrived in the window, done after its end or cut at the time bound).
Records: each request's line as it completes (with `load`, `rate`, `attempt`, `arrival_s`,
`queue_ms`, `draw`/`phase`/`done_s` in a steady-state batch), then the batch's `engine_metrics`
line with what the arrivals did (`n_sent`, `not_sent`, `cut_at_bound`, `waited_for_slot`,
`hit_bound`, and `steady_window_s` [start, end]).

`--resume`: an open-loop batch is complete once its `engine_metrics` line is on disk; a batch a
kill interrupted is run again *whole*, under a new `attempt` id. Its requests cannot be
re-measured one by one — each one's latency depends on the others in flight at its arrival —
so the analysis keeps only the requests of the attempt that completed (`analysis.serving.load_cells`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specbench.config import RunConfig
from specbench.data import Prompt
from specbench.harness.plan import RunEvents, RunOutcome, unit_seed, workload_temperatures
from specbench.harness.serving.arrivals import (
    CLOSED,
    LoadPoint,
    SteadyWindow,
    batch_arrivals,
    draw_prompts,
    open_points,
    read_trace,
    steady_arrivals,
    steady_window,
)
from specbench.harness.serving.base import Conversation, ConversationResult, EngineSetting
from specbench.harness.serving.engine_records import (
    ENGINE_METRICS_KIND,
    BatchKey,
    batch_key_of,
    in_flight_cap,
    metrics_record,
    request_record,
)
from specbench.harness.serving.open_loop import IN_FLIGHT_AT_BOUND, OpenLoopSession
from specbench.records import RECORDS_FILE, RecordWriter, iter_records

# one open-loop batch: (workload, temperature, load point, repeat)
OpenBatchId = tuple[str, float, LoadPoint, int]


@dataclass
class OpenPlan:
    batches: list[OpenBatchId] = field(default_factory=list)
    done: set[BatchKey] = field(default_factory=set)  # batches whose metrics line is on disk
    trace: list[float] | None = None
    steady_n: dict[OpenBatchId, int] = field(default_factory=dict)  # arrivals per steady batch

    def key(self, setting: EngineSetting, batch: OpenBatchId, cfg: RunConfig) -> BatchKey:
        workload, temp, point, rep = batch
        return BatchKey(
            setting.gamma, setting.label, workload, temp, cfg.load.max_in_flight, rep, point.name
        )

    def todo(self, setting: EngineSetting, cfg: RunConfig) -> list[OpenBatchId]:
        return [b for b in self.batches if self.key(setting, b, cfg) not in self.done]

    def n_requests(self, batch: OpenBatchId, prompts: dict[str, list[Prompt]]) -> int:
        if batch in self.steady_n:
            return self.steady_n[batch]
        n = len(prompts[batch[0]])
        return n if self.trace is None or batch[2].rate is not None else min(n, len(self.trace))


def plan_open(
    cfg: RunConfig, prompts: dict[str, list[Prompt]], out_dir: Path, base_dir: Path | None
) -> OpenPlan:
    """The open-loop batches of a run (the trace read and checked now, before any request)."""
    points = open_points(cfg)
    if not points:
        return OpenPlan()
    trace = read_trace(cfg.load.trace, base_dir, cfg.load.trace_speed) if cfg.load.trace else None
    batches = [
        (wl.name, temp, point, rep)
        for wl in cfg.workloads
        for temp in workload_temperatures(cfg, wl, prompts[wl.name])
        for point in points
        for rep in range(cfg.repeats)
    ]
    steady_n = (
        {b: len(steady_arrivals(cfg, b[2], b[0], b[1], b[3], trace)) for b in batches}
        if cfg.load.steady
        else {}
    )
    return OpenPlan(batches, completed_open_batches(out_dir / RECORDS_FILE), trace, steady_n)


def completed_open_batches(records: Path) -> set[BatchKey]:
    if not records.is_file():
        return set()
    return {
        batch_key_of(rec)
        for rec in iter_records(records)
        if rec.get("kind") == ENGINE_METRICS_KIND and rec.get("load", CLOSED) != CLOSED
    }


def run_open_batch(
    cfg: RunConfig,
    session: Any,
    head: dict[str, Any],
    convs: list[Conversation],
    batch: OpenBatchId,
    trace: list[float] | None,
    writer: RecordWriter,
    ev: RunEvents,
    outcome: RunOutcome,
) -> None:
    """Run one open-loop batch; each request's record as it completes, the batch's last."""
    workload, temp, point, rep = batch
    if not isinstance(session, OpenLoopSession):
        raise TypeError(f"{type(session).__name__} cannot run open-loop batches")
    window: SteadyWindow | None = None
    draws: list[int] = []
    if cfg.load.steady:
        arrivals = steady_arrivals(cfg, point, workload, temp, rep, trace)
        window = steady_window(cfg, arrivals)
        draws = draw_prompts(cfg, point, workload, temp, rep, len(convs), len(arrivals))
        # each draw its own sampling seed: a prompt drawn twice is two users' requests
        convs = [
            replace(convs[i], seed=unit_seed(convs[i].seed, "draw", j)) for j, i in enumerate(draws)
        ]
    else:
        arrivals = batch_arrivals(cfg, point, len(convs), workload, temp, rep, trace)
        convs = convs[: len(arrivals)]
    attempt = uuid.uuid4().hex[:12]
    head = {**head, "load": point.name, "rate": point.rate, "attempt": attempt}
    ev.unit_started(workload, temp, f"{head['drafter'] or 'baseline'} {point.name}", "")

    def write(i: int, res: ConversationResult) -> None:
        rec = request_record(head, convs[i], res, True)
        rec["arrival_s"] = round(arrivals[i], 6)
        if window is not None:
            rec["draw"] = i
            rec.update(phase_of(rec, arrivals[i], window, res.error == IN_FLIGHT_AT_BOUND))
        if rec["kind"] == "failed" and res.error != IN_FLIGHT_AT_BOUND:
            outcome.failures.append(rec)
        writer.write(rec)
        outcome.written += 1
        ev.unit_finished(rec)

    before = session.snapshot()
    out = session.run_open(convs, arrivals, cfg.load.max_in_flight, cfg.load.max_duration_s, write)
    after = session.snapshot()
    results = [r for r in out.results if r is not None]
    max_tokens = max((c.params.max_tokens for c in convs), default=0)
    mrec = metrics_record(
        head, before, after, out.wall_ms, results, len(arrivals), max_tokens, in_flight_cap(cfg)
    )
    span = arrivals[-1] if arrivals else 0.0
    mrec.update(
        {
            "partial": False,  # an open-loop batch is always run whole
            "n_sent": out.sent,
            "not_sent": out.not_sent,
            "cut_at_bound": out.cut_at_bound,
            "waited_for_slot": out.waited_for_slot,
            "hit_bound": out.hit_bound,
            "max_in_flight": cfg.load.max_in_flight,
            "max_duration_s": cfg.load.max_duration_s,
            "offered_rate": (len(arrivals) - 1) / span if span > 0 else None,
            "max_queue_ms": round(max(out.queue_ms), 3) if out.queue_ms else None,
        }
    )
    if window is not None:
        mrec["steady_window_s"] = [round(window.start, 6), round(window.end, 6)]
        mrec["offered_rate"] = point.rate if point.rate is not None else mrec["offered_rate"]
    writer.write(mrec)
    if out.hit_bound:
        outcome.warnings.append(
            f"{workload} {point.name} ({head['drafter'] or 'baseline'}): load.max_duration_s "
            f"({cfg.load.max_duration_s:g} s) passed with {out.not_sent} requests not sent and "
            f"{out.cut_at_bound} in flight; the server does not sustain this load"
        )


def phase_of(
    rec: dict[str, Any], arrival_s: float, window: SteadyWindow, cut: bool
) -> dict[str, Any]:
    """A steady-state request's `phase` (module docstring) and, when it succeeded, `done_s`:
    when its last token came, in s from the batch's start (arrival + client wait + latency)."""
    if arrival_s < window.start:
        return {"phase": "warmup"}
    if rec["kind"] == "failed":
        return {"phase": "drain" if cut else "steady"}
    done = arrival_s + (float(rec.get("queue_ms") or 0.0) + float(rec["wall_ms"])) / 1000.0
    return {"phase": "steady" if done <= window.end else "drain", "done_s": round(done, 6)}
