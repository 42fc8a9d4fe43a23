"""Buffered streams: a gateway (or server) that holds a response and delivers it at once makes
TTFT ≈ end-to-end latency and TPOT meaningless (docs/serving.md "Buffered streams",
docs/theory.md §16).

A turn is *buffered* when its tokens needed at least two engine steps — more than γ + 1 tokens,
the most one verification step can emit (γ + 1 also with no speculation: one token per step) —
and yet its content arrived in one chunk, or its first and last content chunks were less than
`STEP_FLOOR_MS` apart per step it must have taken. No engine produces a decode step faster than
that floor, so an honest stream is flagged only when the *client* read a whole response from its
socket in one go (a starved client thread at high concurrency): the false alarm the rule has.
A request is buffered when any of its turns is; a cell's TPOT is marked meaningless when at least
half of its requests are (`BUFFERED_SHARE`), so one starved read does not flag a cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from specbench.record_line import RecordLine

STEP_FLOOR_MS = 0.5  # faster than any engine's decode step
BUFFERED_SHARE = 0.5


def min_steps(new_tokens: int, gamma: int) -> int:
    """The fewest engine steps that can emit `new_tokens` at draft length γ (γ + 1 per step)."""
    return math.ceil(new_tokens / (max(gamma, 0) + 1)) if new_tokens > 0 else 0


def buffered_turn(new_tokens: int, chunks: int, span_ms: float | None, gamma: int) -> bool:
    """Whether one turn's stream looks buffered (the module's rule)."""
    steps = min_steps(new_tokens, gamma)
    if steps < 2:
        return False
    if chunks <= 1:
        return True
    return span_ms is not None and span_ms < STEP_FLOOR_MS * (steps - 1)


def buffered_request(
    new_tokens: Sequence[int], chunks: Sequence[int], spans: Sequence[float | None], gamma: int
) -> bool:
    return any(
        buffered_turn(n, c, s, gamma) for n, c, s in zip(new_tokens, chunks, spans, strict=False)
    )


def buffered_cell(recs: Sequence[RecordLine]) -> tuple[int, bool]:
    """(buffered requests, TPOT meaningless) over a cell's successful requests."""
    flags = [bool(r.get("buffered")) for r in recs]
    n = sum(flags)
    return n, bool(flags) and n >= BUFFERED_SHARE * len(flags)
