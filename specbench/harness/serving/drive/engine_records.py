"""The records a serving run writes (one per prompt, one `engine_metrics` line per batch) and
reads back to know which units are done (see `driver.py` for when each is written)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.analysis.estimators.content import answer_checks
from specbench.analysis.serving.buffering import buffered_request
from specbench.analysis.serving.counter_reconcile import Reconciliation, reconcile
from specbench.analysis.serving.spec_counters import SpecCounters
from specbench.config import RunConfig, dump_config
from specbench.data import Prompt
from specbench.data.privacy import answer_fields, prompt_texts, withhold
from specbench.harness.plan.plan import check_resumed_ids, logged_fields, prepare_run_dir
from specbench.harness.serving.metrics.request_metrics import summed
from specbench.harness.serving.openai.endpoints import (
    check_endpoints,
    endpoints_of,
    merged_server_config,
    without_server,
)
from specbench.harness.serving.protocol.base import (
    Conversation,
    ConversationResult,
    Snapshot,
)
from specbench.records import MEASURED_KINDS, RECORDS_FILE, iter_records, repair_truncated_tail
from specbench.setting import Setting

ENGINE_METRICS_KIND = "engine_metrics"


@dataclass(frozen=True)
class BatchKey:
    gamma: int
    drafter: str
    workload: str
    temperature: float
    concurrency: int
    repeat: int
    load: str = "closed"  # or an open-loop load point: "rate=2", "trace" (`arrivals.py`)
    mix: str = ""  # "profile": a batch of the profile's mix, or one of its requests (mix_draws.py)


# A unit: one prompt of one batch.
UnitId = tuple[BatchKey, str]


def batch_key_of(rec: Mapping[str, Any]) -> BatchKey:
    return BatchKey(
        int(rec["gamma"]),
        rec.get("drafter", ""),
        rec["workload"],
        float(rec["temperature"]),
        int(rec["concurrency"]),
        int(rec.get("repeat", 0)),
        str(rec.get("load", "closed")),
        str(rec.get("mix") or ""),
    )


def prepare_engine_dir(
    cfg: RunConfig,
    out_dir: Path,
    resume: bool,
    force: bool,
    prompts: dict[str, list[Prompt]] | None = None,
) -> tuple[RunConfig, set[UnitId]]:
    """Create or validate DIR; return the config to store and the units already measured
    successfully (a failed unit is not done: `--resume` retries it).

    openai backend: `--resume` also accepts a config that differs only in `server` (the next
    server of a one-server-per-setting series); the stored config then lists every endpoint.
    """
    stored = out_dir / "config.yaml"
    records = out_dir / RECORDS_FILE
    if (
        cfg.backend == "openai"
        and resume
        and not force
        and records.is_file()
        and stored.is_file()
        and stored.read_text() != dump_config(cfg)
        and without_server(stored.read_text()) == without_server(dump_config(cfg))
    ):
        cfg = merged_server_config(cfg, stored.read_text())
        check_endpoints(endpoints_of(cfg))  # before the stored config takes the new server
        stored.write_text(dump_config(cfg))
    elif cfg.backend == "openai" and (force or not records.is_file()):
        check_endpoints(endpoints_of(cfg))  # a fresh run: refused before its directory is made
    prepare_run_dir(cfg, out_dir, resume, force)
    done: set[UnitId] = set()
    if records.exists():
        repair_truncated_tail(records)
        for rec in iter_records(records):
            if rec.get("kind") in MEASURED_KINDS:
                done.add((batch_key_of(rec), str(rec["prompt_id"])))
    check_resumed_ids(prompts or {}, {(k.workload, pid) for k, pid in done})
    return cfg, done


def _rounded(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


def request_record(
    head: dict[str, Any],
    conv: Conversation,
    res: ConversationResult,
    keep_ids: bool,
    max_tokens: int = 0,
    max_in_flight: int = 1,
) -> dict[str, Any]:
    """One prompt's record, the transformers backend's fields plus the engine's."""
    head = {**head, "prompt_id": conv.prompt.id, "seed": conv.seed}
    if res.error is not None or not res.turns:
        error = res.error or ""
        if conv.prompt.private_key is not None:  # a private prompt's text stays out of records
            error = withhold(error, prompt_texts(conv.prompt))
        return {**head, "kind": "failed", "status": "failed", "error": error[:300]}
    turns = res.turns
    new_tokens = sum(t.new_tokens for t in turns)
    e2e = [t.e2e_ms for t in turns]
    ttft = [t.ttft_ms for t in turns]
    wall_ms = sum(e2e)
    decode_ms = wall_ms - sum(ttft)
    # TPOT (docs/theory.md §6): (e2e − TTFT) / (n_out − 1) per turn, pooled over the turns.
    after_first = sum(max(t.new_tokens - 1, 0) for t in turns)
    body: dict[str, Any] = {
        "status": "ok",
        "turns": len(turns),
        "prompt_tokens": [t.prompt_tokens for t in turns],
        "new_tokens": new_tokens,
        "new_tokens_per_turn": [t.new_tokens for t in turns],
        "stop_reason": [t.stop_reason for t in turns],
        "ttft_ms": [_rounded(x) for x in ttft],
        "e2e_ms": [_rounded(x) for x in e2e],
        "wall_ms": _rounded(wall_ms),
        "decode_ms": _rounded(decode_ms),
        "tokens_per_s": new_tokens / (wall_ms / 1000.0) if wall_ms > 0 else None,
        "tpot_ms": decode_ms / after_first if after_first > 0 else None,
        "chunks": [t.chunks for t in turns],
        # first → last content chunk, per turn; `buffered` by analysis.serving.buffering's rule
        "stream_span_ms": [
            _rounded(t.last_chunk_ms - t.ttft_ms) if t.last_chunk_ms is not None else None
            for t in turns
        ],
        "peak_memory_mb": None,
    }
    ids = [t.output_ids for t in turns]
    kept = [i for i in ids if i is not None] if keep_ids else []
    body.update(
        answer_fields(conv.prompt, [t.text for t in turns], kept if len(kept) == len(ids) else None)
    )
    if conv.prompt.private_key is not None:  # the answer checks now, while the text is here (§13)
        body["content"] = [
            answer_checks(i if len(kept) == len(ids) else None, t.text, t.stop_reason).model_dump()
            for i, t in zip(ids, turns, strict=True)
        ]
    body["buffered"] = buffered_request(
        [t.new_tokens for t in turns], body["chunks"], body["stream_span_ms"], int(head["gamma"])
    )
    if res.queue_ms is not None:  # open loop: sent this late after its arrival
        body["queue_ms"] = _rounded(res.queue_ms)
    if res.counters is not None:
        body["spec_counters"] = res.counters.to_dict()
        check = reconciled(res.counters, head, [res], max_tokens, max_in_flight)
        body["counters_polluted"] = check.polluted
    spec = summed([t.spec for t in turns])
    if spec is not None:  # the engine's own per-request acceptance (request_metrics.py)
        body["response_spec"] = spec.to_dict()
    body.update(logged_fields(conv.prompt, conv.params))  # a logged request: how it was sampled
    return {**head, **body}


def metrics_record(
    head: dict[str, Any],
    before: Snapshot,
    after: Snapshot,
    wall_ms: float,
    results: list[ConversationResult],
    n_planned: int,
    max_tokens: int = 0,
    max_in_flight: int = 1,
) -> dict[str, Any]:
    """A batch's `engine_metrics` line: the counters' deltas, its wall time and throughput."""
    counters = (
        after.counters.minus(before.counters)
        if after.counters is not None and before.counters is not None
        else None
    )
    check = (
        reconciled(counters, head, results, max_tokens, max_in_flight)
        if counters is not None
        else None
    )
    tokens = sum(t.new_tokens for r in results for t in r.turns)
    if head.get("concurrency") == 1:  # sequential: leave out the gaps spent reading counters
        wall_ms = sum(t.e2e_ms for r in results for t in r.turns) or wall_ms
    return {
        **head,
        "kind": ENGINE_METRICS_KIND,
        "metrics_available": after.available,
        "acceptance_available": counters is not None,
        "spec_counters": counters.to_dict() if counters is not None else None,
        "accept_length_gauge": after.accept_length,
        "counters_polluted": check.polluted if check is not None else None,
        "reconciliation": check.to_dict() if check is not None else None,
        "n_requests": len(results),
        "n_planned": n_planned,  # the workload's prompts; fewer ran in a resumed (partial) batch
        "partial": len(results) < n_planned,
        "n_failed": sum(1 for r in results if r.error is not None),
        "output_tokens": tokens,
        "batch_wall_ms": _rounded(wall_ms),
        "output_tokens_per_s": tokens / (wall_ms / 1000.0) if wall_ms > 0 else None,
    }


def reconciled(
    counters: SpecCounters,
    head: dict[str, Any],
    results: list[ConversationResult],
    max_tokens: int,
    max_in_flight: int,
) -> Reconciliation:
    """Counter deltas against the tokens received and requests sent (docs/theory.md §17)."""
    turns = [t for r in results for t in r.turns]
    sent = sum(max(r.attempts, len(r.turns) + (r.error is not None)) for r in results)
    return reconcile(
        counters,
        tokens_after_first=sum(max(t.new_tokens - 1, 0) for t in turns),
        turns=len(turns),
        extra_attempts=sent - len(turns),
        max_tokens=max_tokens,
        gamma=int(head.get("gamma") or 0),
        max_in_flight=max_in_flight,
    )


def in_flight_cap(cfg: RunConfig) -> int:
    """The most requests the run ever has in flight (the C of the reconciliation slack, §17):
    the largest closed-loop concurrency, or the open loop's max_in_flight when it has one."""
    return max(max(cfg.concurrency), cfg.load.max_in_flight if cfg.load.open_loop else 0)


def label_checks(setting: Setting, counters: SpecCounters | None, available: bool) -> list[str]:
    """Warnings when what the engine reports contradicts the setting it is labelled with."""
    notes = []
    where = setting.endpoint or setting.drafter or "the engine"
    if not available:
        notes.append(f"{where}: no /metrics endpoint; latency measured, acceptance unavailable")
    elif setting.gamma > 0 and counters is None:
        notes.append(
            f"{where}: exports no spec-decode counters; acceptance unavailable (is speculation on?)"
        )
    elif setting.gamma == 0 and counters is not None and counters.drafts > 0:
        notes.append(f"{where} is labelled γ=0 (baseline) but reports speculative drafts")
    elif setting.gamma > 0 and counters is not None and counters.drafts > 0:
        per_draft = counters.draft_tokens / counters.drafts
        if len(counters.per_pos) not in (0, setting.gamma) or per_draft > setting.gamma + 1e-9:
            notes.append(
                f"{where} is labelled γ={setting.gamma} but drafts up to "
                f"{max(len(counters.per_pos), round(per_draft))} tokens; fix its gamma"
            )
    return notes
