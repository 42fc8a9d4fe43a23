"""What the serving driver and its engine adapters (vLLM in-process, OpenAI-compatible servers)
share: the conversations a batch runs and their results, one read of the
engine's metrics, and the two protocols an adapter implements (`Backend`, `EngineSession`).

The driver (`driver.py`) imports the adapters; an adapter imports only this module (and its own
helpers), never the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from specbench.analysis.serving.spec_counters import SpecCounters
from specbench.data import Prompt
from specbench.harness.plan.plan import RequestParams
from specbench.setting import Setting


@dataclass(frozen=True)
class Conversation:
    """One prompt of a batch, with its seed and what each of its turns is generated with (the
    config's settings, or a logged request's own: `plan.request_params`)."""

    prompt: Prompt
    seed: int
    params: RequestParams


@dataclass
class TurnResult:
    prompt_tokens: int
    new_tokens: int
    ttft_ms: float
    e2e_ms: float
    text: str
    stop_reason: str
    output_ids: list[int] | None = None
    chunks: int = 0
    truncated: bool = False
    last_chunk_ms: float | None = None  # send → the last content-bearing chunk (buffering check)
    spec: SpecCounters | None = None  # the engine's own per-request acceptance (request_metrics)


@dataclass
class ConversationResult:
    turns: list[TurnResult] = field(default_factory=list)
    error: str | None = None
    counters: SpecCounters | None = None  # this conversation's deltas (concurrency 1 only)
    queue_ms: float | None = None  # open loop: send time − scheduled arrival (`open_loop.py`)
    attempts: int = 0  # requests sent for it, retries included (counter reconciliation)


@dataclass(frozen=True)
class Snapshot:
    """One read of the engine's metrics."""

    available: bool  # False: no metrics to read (a server without /metrics)
    counters: SpecCounters | None  # None: no spec-decode counters exported
    accept_length: float | None = None  # SGLang's gauge, where exported


OnResult = Callable[[int, ConversationResult], None]


class EngineSession(Protocol):
    """An open engine setting."""

    def snapshot(self) -> Snapshot: ...

    def run_batch(
        self,
        convs: list[Conversation],
        concurrency: int,
        on_result: OnResult | None = None,
    ) -> list[ConversationResult]:
        """Run the conversations, each turn with its conversation's `params`; call
        `on_result(index, result)` in the calling thread as each one completes (so its record is
        on disk before the batch ends); return them all."""
        ...


class Backend(Protocol):
    name: str

    def settings(self) -> list[Setting]: ...

    def open(self, setting: Setting) -> AbstractContextManager[EngineSession]: ...

    def environment(self) -> dict[str, Any]: ...
