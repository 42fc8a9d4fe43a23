"""The open-loop part of `specbench run` on an engine backend (`load.rates` / `load.trace`):
which open-loop batches a run has, which are complete, and one batch run and recorded.

An open-loop batch is one setting × workload × temperature × load point × repeat: every prompt
of the workload (as many as the trace has arrivals, for `trace`), sent at its arrival time. With
`load.duration_s` / `load.requests` (a *steady-state* batch, docs/serving.md "Steady state") the
arrivals go on for that long instead, each sending a prompt drawn with replacement (seeded, the
same draws at every setting), and every request's line says its `phase`: `warmup` (arrived
before the window's start), `steady` (arrived in the window and done by its end) or `drain`
(arrived in the window, done after its end or cut at the time bound).
With a `profile` as well, the open-loop part measures the profile's mix instead: one batch per
setting × load point × repeat whose arrivals each draw a workload, a temperature and a prompt
(`mix_draws.py`); its request lines carry what was drawn and `mix: "profile"`, its
`engine_metrics` line `workload: "mix"`, `mix: "profile"` and the shares it drew with.
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

import math
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specbench.config import RunConfig
from specbench.config.load import WARMUP_SHARE
from specbench.config.profile import MIX_WORKLOAD, PROFILE_MIX
from specbench.data import Prompt
from specbench.harness.plan.plan import RunEvents, RunOutcome, unit_seed, workload_temperatures
from specbench.harness.serving.drive.engine_records import (
    ENGINE_METRICS_KIND,
    BatchKey,
    batch_key_of,
    in_flight_cap,
    metrics_record,
    request_record,
)
from specbench.harness.serving.load.arrivals import (
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
from specbench.harness.serving.load.mix_draws import (
    MIX_TEMPERATURE,
    MixDraw,
    MixPlan,
    draw_head,
    mix_draws,
    mix_head,
    mix_mode,
    plan_mix,
)
from specbench.harness.serving.load.open_loop import IN_FLIGHT_AT_BOUND, OpenBatch, OpenLoopSession
from specbench.harness.serving.protocol.base import Conversation, ConversationResult
from specbench.record_line import UnitFinished
from specbench.records import RECORDS_FILE, RecordWriter, iter_records
from specbench.setting import Setting

# one open-loop batch: (workload, temperature, load point, repeat); a mix batch's workload is
# MIX_WORKLOAD (config/profile.py)
OpenBatchId = tuple[str, float, LoadPoint, int]


@dataclass
class OpenPlan:
    batches: list[OpenBatchId] = field(default_factory=list)
    done: set[BatchKey] = field(default_factory=set)  # batches whose metrics line is on disk
    trace: list[float] | None = None
    steady_n: dict[OpenBatchId, int] = field(default_factory=dict)  # arrivals per steady batch
    mix: MixPlan | None = None  # the open-loop batches draw the profile's mix (mix_draws.py)
    # a steady closed loop by duration: how many requests it sends is not known before it runs
    open_ended: bool = False

    def key(self, setting: Setting, batch: OpenBatchId, cfg: RunConfig) -> BatchKey:
        workload, temp, point, rep = batch
        return BatchKey(
            setting.gamma,
            setting.drafter,
            workload,
            temp,
            in_flight(cfg, point),
            rep,
            point.name,
            PROFILE_MIX if self.mix is not None else "",
        )

    def todo(self, setting: Setting, cfg: RunConfig) -> list[OpenBatchId]:
        return [b for b in self.batches if self.key(setting, b, cfg) not in self.done]

    def n_requests(self, batch: OpenBatchId, prompts: dict[str, list[Prompt]]) -> int:
        if batch in self.steady_n:
            return self.steady_n[batch]
        n = len(prompts[batch[0]])
        return n if self.trace is None or batch[2].rate is not None else min(n, len(self.trace))


def in_flight(cfg: RunConfig, point: LoadPoint) -> int:
    """The most requests a batch keeps in flight: a steady closed loop's clients, else
    `load.max_in_flight` (the records' `concurrency`)."""
    return point.concurrency if point.concurrency is not None else cfg.load.max_in_flight


def plan_open(
    cfg: RunConfig, prompts: dict[str, list[Prompt]], out_dir: Path, base_dir: Path | None
) -> OpenPlan:
    """The open-loop batches of a run (the trace read and checked now, before any request)."""
    points = open_points(cfg)
    if not points:
        return OpenPlan()
    trace = read_trace(cfg.load.trace, base_dir, cfg.load.trace_speed) if cfg.load.trace else None
    mix = plan_mix(cfg, prompts) if mix_mode(cfg) else None
    groups = (
        [(MIX_WORKLOAD, MIX_TEMPERATURE)]
        if mix is not None
        else [
            (wl.name, temp)
            for wl in cfg.workloads
            for temp in workload_temperatures(cfg, wl, prompts[wl.name])
        ]
    )
    batches = [
        (w, t, point, rep) for w, t in groups for point in points for rep in range(cfg.repeats)
    ]
    # a steady closed loop by duration only sends as many as the server completes: not known
    # before it runs (0 here; the progress counts them as they come)
    unknown = cfg.load.requests is None
    steady_n = (
        {
            b: 0
            if b[2].concurrency is not None and unknown
            else len(steady_arrivals(cfg, b[2], b[0], b[1], b[3], trace))
            for b in batches
        }
        if cfg.load.steady
        else {}
    )
    open_ended = bool(steady_n) and unknown and any(b[2].concurrency is not None for b in batches)
    return OpenPlan(
        batches, completed_open_batches(out_dir / RECORDS_FILE), trace, steady_n, mix, open_ended
    )


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
    mix: MixPlan | None = None,
) -> None:
    """Run one open-loop batch; each request's record as it completes, the batch's last. A mix
    batch (`mix` given: `convs` unused) draws each request's workload, temperature and prompt."""
    workload, temp, point, rep = batch
    if not isinstance(session, OpenLoopSession):
        raise TypeError(f"{type(session).__name__} cannot run open-loop batches")
    window: SteadyWindow | None = None
    closed = point.concurrency is not None
    drawn: list[MixDraw] = []  # a mix batch's: each request's workload, temperature, prompt
    head = mix_head(head, mix)
    if cfg.load.steady:
        arrivals = steady_arrivals(cfg, point, workload, temp, rep, trace)
        window = closed_window(cfg, len(arrivals)) if closed else steady_window(cfg, arrivals)
        if mix is not None:
            drawn = mix_draws(cfg, mix, point, rep, len(arrivals))
            convs = [d.conversation for d in drawn]
        else:
            draws = draw_prompts(cfg, point, workload, temp, rep, len(convs), len(arrivals))
            # each draw its own sampling seed: a prompt drawn twice is two users' requests
            convs = [
                replace(convs[i], seed=unit_seed(convs[i].seed, "draw", j))
                for j, i in enumerate(draws)
            ]
    else:
        arrivals = batch_arrivals(cfg, point, len(convs), workload, temp, rep, trace)
        convs = convs[: len(arrivals)]
    attempt = uuid.uuid4().hex[:12]
    head = {**head, "load": point.name, "rate": point.rate, "attempt": attempt}
    ev.unit_started(workload, temp, f"{head['drafter'] or 'baseline'} {point.name}", "")

    k_warm = closed_warmup_count(cfg, len(arrivals)) if closed else 0
    sent_at: dict[int, float] = {}

    def write(i: int, res: ConversationResult) -> None:
        rec = request_record(draw_head(head, drawn[i]) if drawn else head, convs[i], res, True)
        at = arrivals[i]
        if closed:  # a client's next request: sent when free, no client-side wait to count
            at = (rec.pop("queue_ms", None) or 0.0) / 1000.0
            sent_at[i] = at
        rec["arrival_s"] = round(at, 6)
        if window is not None:
            rec["draw"] = i
            cut = res.error == IN_FLIGHT_AT_BOUND
            rec.update({"phase": "warmup"} if i < k_warm else phase_of(rec, at, window, cut))
        if rec["kind"] == "failed" and res.error != IN_FLIGHT_AT_BOUND:
            outcome.failures.append(rec)
        writer.write(rec)
        outcome.written += 1
        ev.unit_finished(UnitFinished.of(rec))

    before = session.snapshot()
    out = session.run_open(
        convs,
        arrivals,
        in_flight(cfg, point),
        cfg.load.max_duration_s,
        write,
        cfg.load.duration_s if closed else None,
    )
    after = session.snapshot()
    results = [r for r in out.results if r is not None]
    max_tokens = max((c.params.max_tokens for c in convs), default=0)
    n_planned = out.sent if closed else len(arrivals)  # a closed loop's pool is not a plan
    mrec = metrics_record(
        head, before, after, out.wall_ms, results, n_planned, max_tokens, in_flight_cap(cfg)
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
    if closed:  # the draws left unsent at the end are the pool's rest, not a missed load
        mrec.update(
            {
                "not_sent": 0,
                "hit_bound": out.cut_at_bound > 0,
                "max_in_flight": point.concurrency,
                "offered_rate": None,
            }
        )
        done = records_done(out, sent_at)
        window = closed_window_after(window, sent_at, k_warm, done, out.not_sent == 0)
    if window is not None:
        mrec["steady_window_s"] = [round(window.start, 6), round(window.end, 6)]
        mrec["offered_rate"] = point.rate if point.rate is not None else mrec["offered_rate"]
    writer.write(mrec)
    if mrec["hit_bound"]:
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


def closed_warmup_count(cfg: RunConfig, n: int) -> int:
    """A steady closed loop's warm-up by count: `warmup_requests`, or with no warm-up setting
    and no duration the first 10 % of `requests` (with a duration, the first 10 % of it)."""
    load = cfg.load
    if load.warmup_requests is not None:
        return load.warmup_requests
    if load.warmup_s is None and load.duration_s is None:
        return math.ceil(WARMUP_SHARE * n)
    return 0


def closed_window(cfg: RunConfig, n: int) -> SteadyWindow:
    """A steady closed loop's window as far as known before it runs: the warm-up's time (or
    10 % of the duration) to the duration (a request count's end is its last completion)."""
    load = cfg.load
    end = load.duration_s if load.duration_s is not None else math.inf
    start = load.warmup_s
    if start is None:
        start = (
            WARMUP_SHARE * end
            if load.duration_s is not None and load.warmup_requests is None
            else 0.0
        )
    return SteadyWindow(start, end)


def records_done(out: OpenBatch, sent_at: dict[int, float]) -> float:
    """The last completion of a batch, s from its start (its requests' send time + latency)."""
    return max(
        (sent_at[i] + sum(t.e2e_ms for t in r.turns) / 1000.0
         for i, r in enumerate(out.results) if r is not None and r.turns and i in sent_at),
        default=0.0,
    )  # fmt: skip


def closed_window_after(
    window: SteadyWindow | None,
    sent_at: dict[int, float],
    k_warm: int,
    last_done: float,
    all_sent: bool,
) -> SteadyWindow | None:
    """The window once the closed loop ran: it starts at the warm-up's time or the first send
    after the warm-up's count, whichever is later, and ends at the duration or, when the
    request count ran out first, at the last completion (so no idle tail dilutes the rate)."""
    if window is None:
        return None
    after = [t for i, t in sent_at.items() if i >= k_warm]
    start = max(window.start, min(after)) if k_warm and after else window.start
    end = min(window.end, last_done) if all_sent or math.isinf(window.end) else window.end
    return SteadyWindow(min(start, end), end)
