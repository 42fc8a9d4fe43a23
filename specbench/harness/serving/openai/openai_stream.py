"""One streamed completion (`backend: openai`): read its server-sent events, validate each chunk,
time it.

TTFT = first chunk carrying text, e2e = end of the stream, tokens = the usage block's
completion_tokens (else the token ids the server returned, else the tokenizer's count of the text,
else the chunk count); TPOT is derived from them by the records (docs/theory.md §6: chunk-to-chunk
gaps overstate it under speculation, when one chunk carries several tokens).

Every stream is validated: each event must parse as a completion chunk (the pydantic models
below; extra fields any server adds are ignored), and the stream must end with a chunk carrying
`finish_reason` and then `[DONE]`; per-request spec-decode metrics, where the engine sends them,
are read by `request_metrics.py`; anything else fails the request with the reason (a malformed
chunk is not skipped, a stream cut short is not measured as a short answer).

The events are parsed by httpx2's own SSE support (`Client.sse`, derived from httpx-sse), so
there is no hand-written parser here; the httpx-sse package itself is not used because it is
written against httpx's classes, while the client here is httpx2's, which already carries it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx2
from pydantic import BaseModel, ValidationError

from specbench.harness.serving.metrics.request_metrics import response_spec
from specbench.harness.serving.openai.openai_http import (
    RequestFailed,
    status_error,
    transport_error,
)
from specbench.harness.serving.protocol.base import TurnResult


class _Delta(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    text: str | None = None  # /v1/completions
    delta: _Delta | None = None  # /v1/chat/completions
    token_ids: list[int] | None = None  # vLLM with return_token_ids
    finish_reason: str | None = None
    meta_info: dict[str, Any] | None = None  # SGLang: per-request spec-decode counts


class _Usage(BaseModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class StreamChunk(BaseModel):
    choices: list[_Choice] = []
    usage: _Usage | None = None
    error: Any = None
    metrics: dict[str, Any] | None = None  # vLLM --per-request-spec-decode-metrics
    meta_info: dict[str, Any] | None = None  # SGLang


def parse_chunk(data: str, index: int) -> StreamChunk:
    """One event's data as a completion chunk, or RequestFailed naming what is wrong with it."""
    try:
        return StreamChunk.model_validate_json(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err.get("loc", ())) or "chunk"
        raise RequestFailed(
            f"malformed stream chunk {index} ({where}: {err.get('msg', '')}): {data[:80]!r}"[:300],
            False,  # a server that sends malformed JSON sends it again
        ) from None


def stream_turn(
    client: httpx2.Client,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    count_tokens: Callable[[str], int | None],
    gamma: int = 0,
) -> TurnResult:
    """POST one streaming completion and time it; RequestFailed when it fails or is cut short.
    `count_tokens` counts the text's tokens (None: no tokenizer) when the server reports neither
    usage nor token ids."""
    text: list[str] = []
    ids: list[int] = []
    usage = _Usage()
    finish = ""
    chunks = 0
    ended = False
    first: float | None = None
    last: float | None = None
    spec_parts: list[dict[str, Any]] = []  # the chunks carrying per-request spec-decode metrics
    t0 = time.perf_counter()
    try:
        with client.sse(url, method="POST", json=body, headers=headers) as source:
            if source.response.status_code >= 300:
                raise status_error(source.response)
            for index, event in enumerate(source):
                data = event.data.strip()
                if not data:
                    continue
                if data == "[DONE]":
                    ended = True
                    break
                msg = parse_chunk(data, index)
                if msg.error:
                    raise RequestFailed(f"server error: {msg.error}"[:300], False)
                if msg.usage is not None:
                    usage = msg.usage
                if msg.metrics or msg.meta_info or any(c.meta_info for c in msg.choices):
                    spec_parts.append(msg.model_dump(include={"metrics", "meta_info", "choices"}))
                for choice in msg.choices:
                    piece = choice.text
                    if piece is None:
                        piece = (choice.delta.content if choice.delta else None) or ""
                    if choice.token_ids:
                        ids.extend(choice.token_ids)
                    if piece or choice.token_ids:
                        chunks += 1
                        last = time.perf_counter()
                        if first is None:
                            first = last
                        text.append(piece)
                    if choice.finish_reason:
                        finish = choice.finish_reason
    except httpx2.HTTPError as exc:  # connect/read timeouts, a connection cut mid-stream
        raise transport_error(exc) from None
    end = time.perf_counter()
    if not ended or not finish:
        # a stream cut short would be measured as a short answer, skewing TPOT and tokens/s
        missing = " and ".join(
            m for m, ok in (("a finish_reason", bool(finish)), ("[DONE]", ended)) if not ok
        )
        raise RequestFailed(f"stream ended without {missing} after {chunks} chunks", True)
    out = "".join(text)
    if usage.completion_tokens is not None:
        n = int(usage.completion_tokens)
    elif ids:
        n = len(ids)
    elif (counted := count_tokens(out)) is not None:
        n = counted
    else:
        n = chunks
    spec = None
    for part in reversed(spec_parts):  # the last report is the whole request's
        if (spec := response_spec(part, usage.completion_tokens, gamma)) is not None:
            break
    return TurnResult(
        prompt_tokens=int(usage.prompt_tokens or 0),
        new_tokens=n,
        ttft_ms=((first if first is not None else end) - t0) * 1000.0,
        e2e_ms=(end - t0) * 1000.0,
        text=out,
        stop_reason=finish,
        output_ids=ids or None,
        chunks=chunks,
        last_chunk_ms=(last - t0) * 1000.0 if last is not None else None,
        spec=spec,
    )
