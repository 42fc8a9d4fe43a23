"""`batch_timing` in `specbench run` (transformers backend): after the decoding units, per
workload, time the batched forwards (`spec.batch_timing`) over that workload's contexts and append
one "batch_timing" record per batch size × repetition to DIR/batch_timing.jsonl (beside
records.jsonl, whose readers expect prompt units). `--resume` measures only the
(workload, batch size, repetition) it has no record of. The analysis turns them, with the per-
prompt acceptance of the batch-1 run, into the predicted throughput by batch size
(`analysis.estimators.batch_prediction`, docs/theory.md §18).

Context: each row's KV cache holds a workload prompt (rendered as the decoding units render it)
repeated to L = median prompt tokens + max_new_tokens // 2 positions — a sequence halfway
through its answer — capped at the model's context.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.config import RunConfig
from specbench.data import Prompt, build_context_ids, conversation_messages
from specbench.records import (
    BATCH_TIMING_FILE,
    RecordWriter,
    iter_records,
    repair_truncated_tail,
)

BATCH_TIMING_KIND = "batch_timing"


def measured_keys(out_dir: Path) -> set[tuple[str, int, int]]:
    """(workload, batch size, repetition) already recorded."""
    path = out_dir / BATCH_TIMING_FILE
    if not path.is_file():
        return set()
    repair_truncated_tail(path)
    return {
        (rec["workload"], int(rec["batch_size"]), int(rec["repeat"]))
        for rec in iter_records(path)
        if rec["kind"] == BATCH_TIMING_KIND
    }


@dataclass(frozen=True)
class TimedPair:
    """What the measurement needs of the loaded pair (`runner.Session` holds it)."""

    target: Any  # the target's model
    draft: Any  # the primary draft's model
    tokenizer: Any
    max_context: int | None
    vocab_size: int


def timed_pair(session: Any) -> TimedPair:
    """The pair of a `runner.Session` (typed Any: the runner imports this module)."""
    return TimedPair(
        session.target_loaded.model,
        session.drafts_loaded[session.cfg.draft.label].model,
        session.tokenizer,
        session.max_context,
        session.target_lm.vocab_size,
    )


def context_tokens(
    cfg: RunConfig, pair: TimedPair, prompts: list[Prompt]
) -> tuple[list[list[int]], int]:
    """The workload's rendered first turns and the cache length L (module docstring)."""
    ids = [
        build_context_ids(
            pair.tokenizer,
            conversation_messages(p, [], 0),
            cfg.chat_template,
            pair.max_context,
            p.tools,
        )[0]
        for p in prompts
    ]
    length = int(statistics.median(len(i) for i in ids)) + cfg.max_new_tokens // 2
    if pair.max_context is not None:
        length = min(length, pair.max_context)
    return ids, max(1, length)


def run_batch_timing(
    cfg: RunConfig, pair: TimedPair, prompts: dict[str, list[Prompt]], out_dir: Path
) -> int:
    """Measure every (workload, b, repetition) not yet recorded, appending each record at
    once; return how many were written."""
    from specbench.decoding.batch_timing import batch_contexts, time_batched_forwards

    spec = cfg.batch_timing
    if spec is None:
        return 0
    done = measured_keys(out_dir)
    gammas = [0, *cfg.gammas]
    written = 0
    with RecordWriter(out_dir / BATCH_TIMING_FILE) as writer:
        for wl in cfg.workloads:
            todo = [
                (b, r)
                for b in spec.batch_sizes
                for r in range(spec.repeats)
                if (wl.name, b, r) not in done
            ]
            if not todo:
                continue
            ids, length = context_tokens(cfg, pair, prompts[wl.name])
            contexts = batch_contexts(ids, spec.batch_sizes[-1], length)
            for t in time_batched_forwards(
                pair.target,
                pair.draft,
                contexts,
                spec.batch_sizes,
                gammas,
                spec.repeats,
                spec.warmup,
                pair.vocab_size,
                seed=cfg.seed,
            ):
                if (t.batch_size, t.repeat) not in todo:
                    continue
                writer.write(
                    {
                        "kind": BATCH_TIMING_KIND,
                        "workload": wl.name,
                        "batch_size": t.batch_size,
                        "repeat": t.repeat,
                        "context_len": length,
                        "draft_ms": round(t.draft_ms, 4),
                        "gammas": gammas,
                        "verify_ms": [round(t.verify_ms[g], 4) for g in gammas],
                    }
                )
                written += 1
    return written
