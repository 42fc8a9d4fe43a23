"""One look at a canary: read what is new from its source, append it to the state file, decide
(docs/canary.md). `specbench canary --once` is one look; `--watch` is a look every interval.

The state file (`state:` in the config, JSONL) holds one `WindowPair` per line, appended as
windows close and never rewritten, so a restarted canary resumes its sequences exactly where they
were: a look reads the saved windows, asks the source only for windows after the last one, and
decides on all of them.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from pydantic import ValidationError

from specbench.analysis.canary.decision import CanaryDecision, decide
from specbench.analysis.canary.windows import WindowPair, merge_arm
from specbench.config.canary import CanaryConfig
from specbench.errors import SpecbenchError
from specbench.harness.canary.counters import Deltas, arm_window, resolve_names
from specbench.harness.canary.logs import log_windows
from specbench.harness.canary.promapi import PromClient, arm_deltas, window_ends
from specbench.harness.canary.scrape import (
    append_snapshot,
    deltas,
    read_snapshots,
    snapshot,
)


@dataclass
class Look:
    decision: CanaryDecision
    windows: list[WindowPair]
    new: int  # windows added by this look
    notes: list[str] = field(default_factory=list)


def read_state(path: Path) -> list[WindowPair]:
    if path.is_dir():
        raise SpecbenchError(f"state: {path} is a directory; give a file path")
    if not path.is_file():
        return []
    out: list[WindowPair] = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(WindowPair.model_validate_json(line))
        except ValidationError:
            raise SpecbenchError(
                f"{path} line {i} is not a canary window; remove that line or use a new state file"
            ) from None
    return out


def append_state(path: Path, windows: list[WindowPair]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            for w in windows:
                fh.write(w.model_dump_json() + "\n")
    except OSError as exc:
        raise SpecbenchError(
            f"cannot append to the state file {path} ({exc.strerror}); set `state:` to a "
            "writable file"
        ) from None


def _slo(cfg: CanaryConfig) -> tuple[float | None, float | None]:
    g = cfg.guards
    return (g.tpot.slo_ms if g.tpot else None, g.e2e.slo_ms if g.e2e else None)


def break_even_from(path: Path | None) -> dict[str, tuple[float, int]]:
    """bucket → (break-even α, γ it is computed at) from accept.json's plans ("overall" too)."""
    if path is None:
        return {}
    from specbench.analysis.documents.accept_model import AcceptResults

    try:
        doc = AcceptResults.read(path)
    except (OSError, ValueError) as exc:
        raise SpecbenchError(
            f"guards.acceptance.accept_json: cannot read {path} as accept.json ({type(exc).__name__})"
        ) from None
    out: dict[str, tuple[float, int]] = {}
    for b in [*doc.buckets, doc.overall]:
        if not b.settings:
            continue
        plan = b.settings[0].plan
        alpha = float(plan.break_even_alpha)
        if math.isfinite(alpha) and 0 < alpha < 1:
            out["overall" if b is doc.overall else b.bucket] = (alpha, plan.best_gamma or 1)
    return out


def _new_from_logs(cfg: CanaryConfig, saved: list[WindowPair]) -> tuple[list[WindowPair], int]:
    assert cfg.sources.logs is not None
    after = saved[-1].seq if saved else -1
    return log_windows(cfg.sources.logs, cfg.window_s, _slo(cfg), after)


def _merged(logs: list[WindowPair], closed_before: int, prom: list[WindowPair]) -> list[WindowPair]:
    """Windows closed in both sources, the logs' figures completed by the metrics'."""
    by_seq = {w.seq: w for w in logs}
    out = []
    for p in prom:
        if p.seq >= closed_before:
            break
        lw = by_seq.get(p.seq)
        if lw is None:  # no request logged in this window: the metrics alone
            out.append(p)
            continue
        canary = merge_arm(lw.canary, p.canary)
        control = merge_arm(lw.control, p.control)
        out.append(
            lw.model_copy(
                update={"canary": canary, "control": control, "source": "logs+prometheus"}
            )
        )
    return out


def _new_from_prometheus(
    cfg: CanaryConfig, saved: list[WindowPair], now: float
) -> tuple[list[WindowPair], list[str]]:
    src = cfg.sources.prometheus
    assert src is not None
    w = cfg.window_s
    if saved:
        first = saved[-1].seq + 1
    elif cfg.start is not None:
        first = math.ceil(cfg.start.timestamp() / w)
    else:
        raise SpecbenchError(
            "a Prometheus source needs `start:` in the config (when the canary began, e.g. "
            "2026-12-01T15:00:00Z) so that every look reads the same windows"
        )
    last = math.floor((now - src.lag_s) / w) - 1
    # nothing past max_duration_h is read: the decision is taken there (on_timeout at the latest)
    origin = saved[0].seq if saved else first
    last = min(last, origin + math.ceil(cfg.max_duration_h * 3600 / w) - 1)
    if last < first:
        return [], []
    names = resolve_names(src.engine, src.names)
    pc = PromClient(src)
    c: dict[float, Deltas] = {}
    k: dict[float, Deltas] = {}
    try:
        chunks = window_ends(first, last, w)
        for ends in chunks:
            c |= arm_deltas(pc, names, src.canary, ends, w)
            k |= arm_deltas(pc, names, src.control, ends, w)
    finally:
        pc.close()
    out, notes = [], []
    for end in sorted(c):
        ca, n1 = arm_window(c[end], names, _slo(cfg))
        ko, n2 = arm_window(k[end], names, _slo(cfg))
        notes += n1 + n2
        seq = round(end / w) - 1
        out.append(
            WindowPair(seq=seq, start=end - w, end=end, canary=ca, control=ko, source="prometheus")
        )
    return out, sorted(set(notes))


def _new_from_scrape(
    cfg: CanaryConfig, saved: list[WindowPair]
) -> tuple[list[WindowPair], list[str]]:
    src = cfg.sources.metrics
    assert src is not None
    names = resolve_names(src.engine, src.names)
    path = cfg.state.with_name(cfg.state.name + ".scrapes.jsonl")
    snaps = read_snapshots(path)
    with httpx2.Client(timeout=httpx2.Timeout(10.0)) as client:
        snap = snapshot(client, {"canary": src.canary, "control": src.control}, names)
    path.parent.mkdir(parents=True, exist_ok=True)
    append_snapshot(path, snap)
    if not snaps:
        return [], ["first scrape saved; the first window closes at the next look"]
    prev = snaps[-1]
    ca, n1 = arm_window(deltas(snap["canary"], prev["canary"]), names, _slo(cfg))
    ko, n2 = arm_window(deltas(snap["control"], prev["control"]), names, _slo(cfg))
    seq = saved[-1].seq + 1 if saved else 0
    w = WindowPair(seq=seq, start=prev["t"], end=snap["t"], canary=ca, control=ko, source="metrics")
    return [w], sorted(set(n1 + n2))


def look(cfg: CanaryConfig, now: float | None = None) -> Look:
    """Read the new windows, append them to the state file, decide on every window so far."""
    now = time.time() if now is None else now
    saved = read_state(cfg.state)
    notes: list[str] = []
    if cfg.sources.logs is not None and cfg.sources.prometheus is not None:
        from_logs, closed_before = _new_from_logs(cfg, saved)
        from_prom, notes = _new_from_prometheus(cfg, saved, now)
        new = _merged(from_logs, closed_before, from_prom)
    elif cfg.sources.logs is not None:
        new, _ = _new_from_logs(cfg, saved)
    elif cfg.sources.prometheus is not None:
        new, notes = _new_from_prometheus(cfg, saved, now)
    else:
        new, notes = _new_from_scrape(cfg, saved)
    if new:
        append_state(cfg.state, new)
    windows = saved + new
    decision = decide(
        cfg,
        windows,
        break_even_from(cfg.guards.acceptance.accept_json if cfg.guards.acceptance else None),
    )
    decision.notes.extend(notes)
    return Look(decision, windows, len(new), notes)


def dump_decision(d: CanaryDecision) -> str:
    return json.dumps(d.model_dump(mode="json"), indent=2)
