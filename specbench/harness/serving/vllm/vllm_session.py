"""One started vLLM engine (`backend: vllm`): run a batch of conversations through its step loop
(`LLM.llm_engine.add_request` / `step`), `concurrency` of them in flight, timing each request's
TTFT (first step that returns a token), e2e latency and tokens here, and read its spec-decode
counters (`LLM.get_metrics()`), per request at concurrency 1. Each turn is sampled with its
conversation's `RequestParams` (one `SamplingParams` per request: the config's settings, or a
logged request's own). Prompts are rendered with the target's Hugging Face tokenizer exactly as
the transformers backend renders them."""

from __future__ import annotations

import time
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from specbench.analysis.serving.spec_counters import SpecCounters
from specbench.config import RunConfig
from specbench.data import build_context_ids, conversation_messages
from specbench.errors import SpecbenchError
from specbench.harness.plan.plan import RequestParams
from specbench.harness.serving.load.open_loop import IN_FLIGHT_AT_BOUND, OpenBatch
from specbench.harness.serving.metrics.metrics import spec_counters_from_vllm_metrics
from specbench.harness.serving.protocol.base import (
    Conversation,
    ConversationResult,
    OnResult,
    Snapshot,
    TurnResult,
)
from specbench.harness.serving.vllm.vllm_log import first_line


@dataclass
class _Inflight:
    """A request in the engine: which conversation and turn, and its timing so far."""

    conv: int
    turn: int
    prompt_tokens: int
    truncated: bool
    submitted: float
    first: float | None = None
    chunks: int = 0


class VllmSession:
    """One started engine: run batches through its step loop, read its counters."""

    def __init__(self, llm: Any, tokenizer: Any, cfg: RunConfig, max_context: int | None) -> None:
        self.llm = llm
        self.engine = llm.llm_engine
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.max_context = max_context
        self._ids = 0

    def counters(self) -> SpecCounters | None:
        return spec_counters_from_vllm_metrics(self.llm.get_metrics())

    def snapshot(self) -> Snapshot:
        return Snapshot(True, self.counters())

    def _params(self, params: RequestParams, seed: int) -> Any:
        from vllm import SamplingParams

        return SamplingParams(
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=self.cfg.sampling.top_k,
            max_tokens=params.max_tokens,
            seed=seed,
            stop=list(self.cfg.stop) or None,
        )

    def run_batch(
        self,
        convs: list[Conversation],
        concurrency: int,
        on_result: OnResult | None = None,
    ) -> list[ConversationResult]:
        batch = self._run(convs, concurrency, on_result, None, 0.0)
        return [r for r in batch.results if r is not None]  # all of them: a closed loop

    def run_open(
        self,
        convs: list[Conversation],
        arrivals: list[float],
        max_in_flight: int,
        max_duration_s: float,
        on_result: OnResult | None = None,
        stop_s: float | None = None,
    ) -> OpenBatch:
        """An open-loop batch (`open_loop.py`): conversation i enters the engine at arrivals[i]
        s (late when `max_in_flight` are in it); none enters after `max_duration_s` (or after
        `stop_s`, a steady closed loop's end), and those still in the engine at
        `max_duration_s` are aborted and recorded failed."""
        return self._run(convs, max_in_flight, on_result, arrivals, max_duration_s, stop_s)

    def _run(
        self,
        convs: list[Conversation],
        concurrency: int,
        on_result: OnResult | None,
        arrivals: list[float] | None,
        max_duration_s: float,
        stop_s: float | None = None,
    ) -> OpenBatch:
        results = [ConversationResult() for _ in convs]
        answers: list[list[str]] = [[] for _ in convs]
        pending = deque(range(len(convs)))
        inflight: dict[str, _Inflight] = {}
        start: dict[int, SpecCounters | None] = {}
        per_request = concurrency == 1 and arrivals is None
        active = 0
        waited: set[int] = set()  # open loop: sent late because `concurrency` were in flight

        def submit(i: int, turn: int) -> None:
            conv = convs[i]
            messages = conversation_messages(conv.prompt, answers[i], turn)
            ids, truncated = build_context_ids(
                self.tokenizer,
                messages,
                self.cfg.chat_template,
                self.max_context,
                conv.prompt.tools,
            )
            self._ids += 1
            rid = f"sb-{self._ids}"
            params = self._params(conv.params, conv.seed + turn)
            self.engine.add_request(rid, {"prompt_token_ids": ids}, params)
            inflight[rid] = _Inflight(i, turn, len(ids), truncated, time.perf_counter())

        def finish(i: int) -> None:
            nonlocal active
            active -= 1
            if per_request:
                after, before = self.counters(), start.get(i)
                if after is not None and before is not None:
                    results[i].counters = after.minus(before)
            if on_result is not None:  # its record goes to disk now, not when the batch ends
                on_result(i, results[i])

        t0 = time.perf_counter()
        batch = OpenBatch(results=list(results))
        if arrivals is not None:
            pending = deque(range(len(arrivals)))
            batch.results = [None] * len(convs)
        while pending or inflight:
            now = time.perf_counter()
            if arrivals is not None and now - t0 >= max_duration_s:
                batch.not_sent = len(pending)
                for rid, cut in list(inflight.items()):
                    with suppress(Exception):
                        self.engine.abort_request([rid])
                    del inflight[rid]
                    results[cut.conv].error = IN_FLIGHT_AT_BOUND
                    batch.cut_at_bound += 1
                    finish(cut.conv)
                break
            if stop_s is not None and pending and now - t0 >= stop_s:
                batch.not_sent = len(pending)  # a steady closed loop's end: no more are sent
                pending.clear()
            while pending and active < concurrency:
                if arrivals is not None and now - t0 < arrivals[pending[0]]:
                    break
                i = pending.popleft()
                if arrivals is not None:
                    results[i].queue_ms = (now - t0 - arrivals[i]) * 1000.0
                    batch.results[i] = results[i]
                    batch.sent += 1
                active += 1
                if per_request:
                    start[i] = self.counters()
                try:
                    submit(i, 0)
                except SpecbenchError:
                    raise
                except Exception as exc:  # e.g. a prompt longer than the model's context
                    results[i].error = f"{type(exc).__name__}: {first_line(exc)}"
                    finish(i)
            if not inflight:
                if pending and arrivals is not None:  # idle until the next arrival
                    time.sleep(min(max(t0 + arrivals[pending[0]] - time.perf_counter(), 0.0), 0.1))
                continue
            late = arrivals is not None and pending and active >= concurrency
            if late and time.perf_counter() - t0 >= arrivals[pending[0]]:  # type: ignore[index]
                waited.add(pending[0])
            outputs = self.engine.step()
            now = time.perf_counter()
            for out in outputs:
                req = inflight.get(out.request_id)
                if req is None:
                    continue
                comp = out.outputs[0]
                if len(comp.token_ids) > 0 and req.first is None:
                    req.first = now
                req.chunks += 1
                if not out.finished:
                    continue
                del inflight[out.request_id]
                first = req.first if req.first is not None else now
                results[req.conv].turns.append(
                    TurnResult(
                        prompt_tokens=req.prompt_tokens,
                        new_tokens=len(comp.token_ids),
                        ttft_ms=(first - req.submitted) * 1000.0,
                        e2e_ms=(now - req.submitted) * 1000.0,
                        text=comp.text,
                        stop_reason=str(comp.finish_reason or ""),
                        output_ids=list(comp.token_ids),
                        chunks=req.chunks,
                        truncated=req.truncated,
                        last_chunk_ms=(now - req.submitted) * 1000.0,
                    )
                )
                answers[req.conv].append(comp.text)
                if req.turn + 1 < len(convs[req.conv].prompt.turns):
                    submit(req.conv, req.turn + 1)
                else:
                    finish(req.conv)
        batch.wall_ms = (time.perf_counter() - t0) * 1000.0
        batch.waited_for_slot = len(waited)
        batch.queue_ms = [r.queue_ms for r in results if r.queue_ms is not None]
        return batch
