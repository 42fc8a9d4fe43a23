"""The body of one streaming request (`backend: openai`): `/v1/completions` with the prompt
rendered here (text through the target's chat template, or token ids with
`server.prompt_format: tokens`), or `/v1/chat/completions` with `server.chat: true` (the server
applies its chat template); always with `stream_options.include_usage`, and sampled with the
conversation's `RequestParams` (the config's settings, or a logged request's own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specbench.config import RunConfig
from specbench.data import build_context_ids
from specbench.data.render import plain_text
from specbench.errors import SpecbenchError
from specbench.harness.plan.plan import RequestParams


def request_body(
    cfg: RunConfig,
    model: str,
    tokenizer: Callable[[], Any],
    max_context: int | None,
    messages: list[dict[str, str]],
    params: RequestParams,
    seed: int,
    tools: list[dict[str, Any]] | None = None,
) -> tuple[str, dict[str, Any], int, bool]:
    """(path under /v1, JSON body, prompt tokens if known here, truncated) for one turn.
    `tokenizer()` gives the target's tokenizer or None (called only when the prompt is rendered
    here). A logged request's `tools` go where its chat template sees them: in the chat body
    (the server renders them), or to the target's template when the prompt is rendered here."""
    s = cfg.server
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if cfg.sampling.top_k > 0:
        body["top_k"] = cfg.sampling.top_k  # an extension vLLM and SGLang accept
    if cfg.stop:
        body["stop"] = list(cfg.stop)
    prompt_tokens, truncated = 0, False
    if s.chat:
        path = "/chat/completions"
        body["messages"] = messages
        if tools:
            body["tools"] = tools
    else:
        path = "/completions"
        tok = tokenizer()
        if s.prompt_format == "tokens":
            ids, truncated = build_context_ids(tok, messages, cfg.chat_template, max_context, tools)
            body["prompt"], prompt_tokens = ids, len(ids)
        elif tok is not None and cfg.chat_template != "off" and getattr(tok, "chat_template", None):
            body["prompt"] = tok.apply_chat_template(
                messages, tools=tools, add_generation_prompt=True, tokenize=False
            )
        else:
            if cfg.chat_template == "on":
                raise SpecbenchError(
                    "chat_template: on needs the target's tokenizer here, or server.chat: true"
                )
            body["prompt"] = plain_text(messages)
    return path, {**body, **s.extra_body}, prompt_tokens, truncated


def prompt_too_long(
    body: dict[str, Any],
    tokenizer: Callable[[], Any],
    max_context: int | None,
    prompt_tokens: int,
) -> str | None:
    """Why a turn must not be sent, or None: its prompt does not fit the server's max_model_len
    (from /v1/models) less max_tokens. Token ids rendered here were cut to fit already
    (`build_context_ids`); a text or chat prompt is counted with the target's tokenizer when
    it loads (a server's own template may add a few tokens: the check is a lower bound)."""
    if max_context is None or prompt_tokens:
        return None
    tok = tokenizer()
    if tok is None:
        return None
    if "messages" in body:
        if getattr(tok, "chat_template", None):
            n = len(tok.apply_chat_template(body["messages"], tokenize=True))
        else:
            n = len(tok(plain_text(body["messages"]), add_special_tokens=False)["input_ids"])
    elif isinstance(body.get("prompt"), str):
        n = len(tok(body["prompt"], add_special_tokens=False)["input_ids"])
    else:
        return None
    if n <= max_context:
        return None
    return (
        f"prompt of {n} tokens does not fit the server's max_model_len less max_tokens "
        f"({max_context} tokens); not sent — shorten it, lower max_new_tokens, or use "
        "server.prompt_format: tokens (which keeps the prompt's end)"
    )
