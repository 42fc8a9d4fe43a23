"""Request logs → paired windows for `specbench canary` (docs/canary.md, "Request logs").

Each arm's log is JSONL or Parquet (local, a glob, a folder or an fsspec URL: `data.sources`),
one row per request, its parts located by field paths (`data.paths`, the syntax `accept` uses;
defaults in `config.canary.LogFields`): a timestamp (Unix seconds or ISO-8601), a status, the
request's TPOT and end-to-end latency in ms, output tokens, finish reason, the response text (for
the degenerate-output check, docs/theory.md §13), a bucket and, on the canary, the engine's
per-request accepted / drafted tokens and drafts where it reports them.

Windows are aligned to the epoch (window k covers [k·w, (k+1)·w) seconds), so a restarted canary
cuts the same windows. A window is closed once both logs hold a row at or past its end; only
closed windows are returned, and rows before `after` (the last window already saved) are skipped.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from specbench.analysis.canary.windows import Acceptance, ArmWindow, Tally, WindowPair
from specbench.analysis.estimators.content import answer_checks
from specbench.config.canary import LogFields, LogSource
from specbench.data.paths import MISSING, get_path
from specbench.data.sources import Row, iter_source
from specbench.errors import SpecbenchError

OK_STATUSES = frozenset({"ok", "success", "succeeded", "completed", "stop", "length"})
MAX_ROWS = 50_000_000  # per arm and look: a log larger than this is cut with a clear error


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise SpecbenchError(f"{where}: the timestamp is a boolean; give Unix seconds or ISO-8601")
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value) / 1000.0 if value > 1e11 else float(value)  # ms since the epoch
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise SpecbenchError(
        f"{where}: timestamp {value!r} is neither Unix seconds nor ISO-8601; set "
        "sources.logs.fields.time to the right field"
    )


def _is_error(status: Any) -> bool:
    if status is MISSING or status is None:
        return False
    if isinstance(status, bool):
        return not status
    if isinstance(status, int | float):
        return not 200 <= status < 300
    text = str(status).strip().lower()
    if text.isdigit():
        return not 200 <= int(text) < 300
    return text not in OK_STATUSES


def _number(row: dict[str, Any], path: str) -> float | None:
    v = get_path(row, path)
    if v is MISSING or v is None or isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x >= 0 else None


@dataclass
class _Acc:
    """One arm's requests in one window, as they are read."""

    requests: int = 0
    errors: int = 0
    tpot: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    out: list[float] = field(default_factory=list)
    finished: int = 0
    length: int = 0
    checked: int = 0
    degenerate: int = 0
    acc: dict[str, list[float]] = field(default_factory=dict)

    def add(self, row: dict[str, Any], f: LogFields) -> None:
        self.requests += 1
        if _is_error(get_path(row, f.status)):
            self.errors += 1
            return
        for path, into in (
            (f.tpot_ms, self.tpot),
            (f.e2e_ms, self.e2e),
            (f.output_tokens, self.out),
        ):
            if (x := _number(row, path)) is not None:
                into.append(x)
        reason = get_path(row, f.finish_reason)
        if reason is not MISSING and reason is not None:
            self.finished += 1
            self.length += str(reason).lower() in ("length", "max_tokens", "max_new_tokens")
        text = get_path(row, f.response)
        if isinstance(text, str):
            self.checked += 1
            self.degenerate += answer_checks(None, text, None).degenerate
        accepted, proposed = _number(row, f.accepted), _number(row, f.proposed)
        if accepted is not None and proposed:
            bucket = "all"
            if f.bucket is not None and (b := get_path(row, f.bucket)) not in (MISSING, None):
                bucket = str(b).strip() or "all"
            drafts = _number(row, f.drafts)
            s = self.acc.setdefault(bucket, [0.0, 0.0, 0.0, 0.0])
            s[0] += accepted
            s[1] += proposed
            s[2] += drafts or 0.0
            s[3] += drafts is None  # rows without drafts: γ is then not measurable

    def window(self, slo: tuple[float | None, float | None]) -> ArmWindow:
        def med(x: list[float]) -> float | None:
            return float(np.median(x)) if x else None

        def over(x: list[float], limit: float | None) -> Tally | None:
            if limit is None or not x:
                return None
            return Tally(hits=int((np.asarray(x) > limit).sum()), n=len(x))

        return ArmWindow(
            requests=self.requests,
            errors=self.errors,
            center="median",
            tpot_ms=med(self.tpot),
            e2e_ms=med(self.e2e),
            tpot_over_slo=over(self.tpot, slo[0]),
            e2e_over_slo=over(self.e2e, slo[1]),
            output_tokens=med(self.out),
            finish_length=Tally(hits=self.length, n=self.finished) if self.finished else None,
            degenerate=Tally(hits=self.degenerate, n=self.checked) if self.checked else None,
            acceptance={
                b: Acceptance(accepted=s[0], proposed=s[1], drafts=None if s[3] else s[2])
                for b, s in self.acc.items()
            },
        )


def _read(
    location: str, f: LogFields, window_s: float, after: int
) -> tuple[dict[int, _Acc], float]:
    """Every window's requests of one arm past window `after`, and the latest timestamp."""
    _, rows = iter_source(location)
    by: dict[int, _Acc] = defaultdict(_Acc)
    last = -math.inf
    row: Row
    for n, row in enumerate(rows, start=1):
        if n > MAX_ROWS:
            raise SpecbenchError(
                f"{location} holds more than {MAX_ROWS:,} rows; rotate the log or point the "
                "canary at the files of the canary's period only"
            )
        t = get_path(row.values, f.time)
        if t is MISSING or t is None:
            raise SpecbenchError(
                f"{location} {row.location} has no '{f.time}' field; set sources.logs.fields.time"
            )
        ts = _seconds(t, f"{location} {row.location}")
        last = max(last, ts)
        k = int(ts // window_s)
        if k > after:
            by[k].add(row.values, f)
    return by, last


def log_windows(
    src: LogSource,
    window_s: float,
    slo: tuple[float | None, float | None],
    after: int = -1,
) -> tuple[list[WindowPair], int]:
    """The closed windows past `after` (an epoch-aligned window index), in time order, and the
    index of the first window not yet closed in both logs."""
    canary, last_c = _read(src.canary, src.fields, window_s, after)
    control, last_k = _read(src.control, src.fields, window_s, after)
    closed_before = int(min(last_c, last_k) // window_s)  # windows < this one have ended in both
    keys = sorted(k for k in set(canary) | set(control) if k < closed_before)
    return list(_pairs(keys, canary, control, window_s, slo)), closed_before


def _pairs(
    keys: list[int],
    canary: dict[int, _Acc],
    control: dict[int, _Acc],
    window_s: float,
    slo: tuple[float | None, float | None],
) -> Iterator[WindowPair]:
    for k in keys:
        yield WindowPair(
            seq=k,
            start=k * window_s,
            end=(k + 1) * window_s,
            canary=canary.get(k, _Acc()).window(slo),
            control=control.get(k, _Acc()).window(slo),
            source="logs",
        )
