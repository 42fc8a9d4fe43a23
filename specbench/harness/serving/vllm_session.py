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
from dataclasses import dataclass
from typing import Any

from specbench.analysis.spec_counters import SpecCounters
from specbench.config import RunConfig
from specbench.data import build_context_ids, conversation_messages
from specbench.errors import SpecbenchError
from specbench.harness.plan import RequestParams
from specbench.harness.serving.base import (
    Conversation,
    ConversationResult,
    OnResult,
    Snapshot,
    TurnResult,
)
from specbench.harness.serving.metrics import spec_counters_from_vllm_metrics
from specbench.harness.serving.vllm_log import first_line


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
        results = [ConversationResult() for _ in convs]
        answers: list[list[str]] = [[] for _ in convs]
        pending = deque(range(len(convs)))
        inflight: dict[str, _Inflight] = {}
        start: dict[int, SpecCounters | None] = {}
        per_request = concurrency == 1
        active = 0

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

        while pending or inflight:
            while pending and active < concurrency:
                i = pending.popleft()
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
                continue
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
                    )
                )
                answers[req.conv].append(comp.text)
                if req.turn + 1 < len(convs[req.conv].prompt.turns):
                    submit(req.conv, req.turn + 1)
                else:
                    finish(req.conv)
        return results
