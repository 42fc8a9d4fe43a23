"""Open-loop batches (`load.rates` / `load.trace`): each conversation is sent at its arrival time
whatever the server's progress, with at most `max_in_flight` in flight and the batch bounded to
`max_duration_s` of wall time (docs/serving.md "Load").

A request whose arrival finds `max_in_flight` requests in flight waits client-side; its
`queue_ms` (send time − scheduled arrival, also the dispatcher's own lateness) is recorded and
added to its TTFT and end-to-end latency in the tails and SLO goodput: latency is measured from when
the user would have sent it, not from when the client got round to it (no coordinated omission).
At the time bound, requests not yet sent are not sent (`not_sent` in the batch's record) and
requests still in flight are recorded as failed ("in flight at load.max_duration_s"), so a rate
the server cannot sustain ends the batch rather than the run.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from specbench.harness.serving.protocol.base import (
    Conversation,
    ConversationResult,
    OnResult,
    Snapshot,
)

IN_FLIGHT_AT_BOUND = "in flight at load.max_duration_s"


@dataclass
class OpenBatch:
    """What an open-loop batch did: a result per conversation (None: never sent)."""

    results: list[ConversationResult | None]
    wall_ms: float = 0.0
    sent: int = 0
    not_sent: int = 0
    cut_at_bound: int = 0  # in flight when the time bound passed: recorded failed
    waited_for_slot: int = 0  # sent late because max_in_flight were in flight
    queue_ms: list[float] = field(default_factory=list)

    @property
    def hit_bound(self) -> bool:
        return self.not_sent > 0 or self.cut_at_bound > 0


@runtime_checkable
class OpenLoopSession(Protocol):
    """An engine session that can run an open-loop batch (both engine backends)."""

    def snapshot(self) -> Snapshot: ...

    def run_open(
        self,
        convs: list[Conversation],
        arrivals: list[float],
        max_in_flight: int,
        max_duration_s: float,
        on_result: OnResult | None = None,
        stop_s: float | None = None,
    ) -> OpenBatch: ...


def run_open_threaded(
    work: Callable[[Conversation], ConversationResult],
    items: list[Conversation],
    arrivals: list[float],
    max_in_flight: int,
    max_duration_s: float,
    on_result: OnResult | None = None,
    stop_s: float | None = None,
) -> OpenBatch:
    """Send `items[i]` at `arrivals[i]` s after the start, each in its own daemon thread (as
    `closed_loop.run_threaded`, so Ctrl-C drops only the requests in flight); deliver each
    result to `on_result` in the caller's thread as it completes. `stop_s` (a steady closed
    loop's end): nothing is sent after it, those in flight complete until `max_duration_s`."""
    n = len(arrivals)
    out = OpenBatch(results=[None] * len(items))
    done: queue.SimpleQueue[tuple[int, ConversationResult | BaseException]] = queue.SimpleQueue()
    t0 = time.perf_counter()
    deadline = t0 + max_duration_s
    stop = min(deadline, t0 + stop_s) if stop_s is not None else deadline
    inflight: set[int] = set()
    last = t0

    def launch(i: int, scheduled: float) -> None:
        def body() -> None:
            start = time.perf_counter()
            try:
                res = work(items[i])
            except BaseException as exc:  # a bug: re-raised in the caller's thread
                done.put((i, exc))
                return
            res.queue_ms = max(start - scheduled, 0.0) * 1000.0
            done.put((i, res))

        inflight.add(i)
        threading.Thread(target=body, daemon=True).start()

    def deliver(i: int, res: ConversationResult) -> None:
        nonlocal last
        inflight.discard(i)
        out.results[i] = res
        last = time.perf_counter()
        if on_result is not None:
            on_result(i, res)

    def drain(wait_s: float) -> None:
        try:
            i, res = done.get(timeout=max(min(wait_s, 0.1), 0.0005))  # short: Ctrl-C responsive
        except queue.Empty:
            return
        if isinstance(res, BaseException):
            raise res
        deliver(i, res)

    nxt = 0
    waited = False
    while nxt < n:
        now = time.perf_counter()
        due = t0 + arrivals[nxt]
        if now >= stop or due >= stop:
            break
        if now < due:
            drain(due - now)
            continue
        if len(inflight) >= max_in_flight:
            if not waited:
                out.waited_for_slot += 1
                waited = True
            drain(deadline - now)
            continue
        launch(nxt, due)
        nxt += 1
        waited = False
    out.sent = nxt
    out.not_sent = n - nxt
    while inflight and (now := time.perf_counter()) < deadline:
        drain(deadline - now)
    while True:  # results that arrived with the bound
        try:
            i, res = done.get_nowait()
        except queue.Empty:
            break
        if not isinstance(res, BaseException) and i in inflight:
            deliver(i, res)
    for i in sorted(inflight):
        out.cut_at_bound += 1
        deliver(i, ConversationResult(error=IN_FLIGHT_AT_BOUND))
    out.wall_ms = (last - t0) * 1000.0
    out.queue_ms = [r.queue_ms for r in out.results if r is not None and r.queue_ms is not None]
    return out
