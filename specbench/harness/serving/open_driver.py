"""The open-loop part of `specbench run` on an engine backend (`load.rates` / `load.trace`):
which open-loop batches a run has, which are complete, and one batch run and recorded.

An open-loop batch is one setting × workload × temperature × load point × repeat: every prompt
of the workload (as many as the trace has arrivals, for `trace`), sent at its arrival time.
Records: each request's line as it completes (with `load`, `rate`, `attempt`, `arrival_s`,
`queue_ms`), then the batch's `engine_metrics` line with what the arrivals did (`n_sent`,
`not_sent`, `cut_at_bound`, `waited_for_slot`, `hit_bound`).

`--resume`: an open-loop batch is complete once its `engine_metrics` line is on disk; a batch a
kill interrupted is run again *whole*, under a new `attempt` id. Its requests cannot be
re-measured one by one — each one's latency depends on the others in flight at its arrival —
so the analysis keeps only the requests of the attempt that completed (`analysis.serving.load_cells`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.config import RunConfig
from specbench.data import Prompt
from specbench.harness.plan import RunEvents, RunOutcome, workload_temperatures
from specbench.harness.serving.arrivals import (
    CLOSED,
    LoadPoint,
    batch_arrivals,
    open_points,
    read_trace,
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

    def key(self, setting: EngineSetting, batch: OpenBatchId, cfg: RunConfig) -> BatchKey:
        workload, temp, point, rep = batch
        return BatchKey(
            setting.gamma, setting.label, workload, temp, cfg.load.max_in_flight, rep, point.name
        )

    def todo(self, setting: EngineSetting, cfg: RunConfig) -> list[OpenBatchId]:
        return [b for b in self.batches if self.key(setting, b, cfg) not in self.done]

    def n_requests(self, batch: OpenBatchId, prompts: dict[str, list[Prompt]]) -> int:
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
    return OpenPlan(batches, completed_open_batches(out_dir / RECORDS_FILE), trace)


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
    arrivals = batch_arrivals(cfg, point, len(convs), workload, temp, rep, trace)
    convs = convs[: len(arrivals)]
    attempt = uuid.uuid4().hex[:12]
    head = {**head, "load": point.name, "rate": point.rate, "attempt": attempt}
    ev.unit_started(workload, temp, f"{head['drafter'] or 'baseline'} {point.name}", "")

    def write(i: int, res: ConversationResult) -> None:
        rec = request_record(head, convs[i], res, True)
        rec["arrival_s"] = round(arrivals[i], 6)
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
    writer.write(mrec)
    if out.hit_bound:
        outcome.warnings.append(
            f"{workload} {point.name} ({head['drafter'] or 'baseline'}): load.max_duration_s "
            f"({cfg.load.max_duration_s:g} s) passed with {out.not_sent} requests not sent and "
            f"{out.cut_at_bound} in flight; the server does not sustain this load"
        )
