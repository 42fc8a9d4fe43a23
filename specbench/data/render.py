"""Render a conversation into the token ids a model is prompted with.

With a chat template the tokenizer's `apply_chat_template(..., add_generation_prompt=True)` is
used. Without one the conversation is sent as plain text so base LMs simply continue it: a single
turn is the raw prompt text; several messages (earlier user turns and the model's answers, then
the current turn) are joined with a blank line ("\\n\\n") and no role labels. Plain text is
encoded with the tokenizer's own special-token handling (e.g. a leading BOS).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from specbench.data.conversation import plain_content
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

PLAIN_TURN_SEPARATOR = "\n\n"


class PromptTruncatedWarning(UserWarning):
    """A prompt was longer than the context budget and lost its oldest tokens."""


def build_context_ids(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Mapping[str, Any]],
    chat_template: str,
    max_context: int | None,
    tools: list[dict[str, Any]] | None = None,
) -> tuple[list[int], bool]:
    """Token ids for `messages` ([{"role": "system"|"user"|"assistant"|"tool", "content": ...,
    optional tool_calls / tool_call_id}, ...]; see `data.conversation`) and whether they were
    truncated. `tools` (a request's tool definitions) go to the chat template as
    `apply_chat_template(..., tools=tools)`; plain text has no place for them.

    `chat_template`: "on" uses the tokenizer's template (an error when it has none), "off" sends
    plain text, "auto" uses the template when `tokenizer.chat_template` is set. When the ids are
    longer than `max_context`, the last tokens are kept (the most recent turn survives); a leading
    BOS token is kept in front of them, and a `PromptTruncatedWarning` is emitted.
    """
    if chat_template not in ("auto", "on", "off"):
        raise SpecbenchError(f"chat_template must be 'auto', 'on' or 'off', got '{chat_template}'")
    if not messages:
        raise ValueError("build_context_ids needs at least one message")
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if chat_template == "on" and not has_template:
        raise SpecbenchError(
            "chat_template is 'on' but the tokenizer has no chat template; set chat_template "
            "to 'auto' or 'off'"
        )
    if chat_template == "on" or (chat_template == "auto" and has_template):
        ids = _chat_template_ids(tokenizer, messages, tools)
    else:
        ids = _as_id_list(tokenizer(plain_text(messages), add_special_tokens=True))
    if not ids:
        raise SpecbenchError("a prompt encodes to zero tokens; check the tokenizer and the prompt")
    return _truncate_left(ids, max_context, getattr(tokenizer, "bos_token_id", None))


def plain_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The conversation as plain text: message contents joined by a blank line, no roles (an
    assistant's tool calls follow its content as JSON)."""
    return PLAIN_TURN_SEPARATOR.join(plain_content(m) for m in messages)


def _chat_template_ids(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Mapping[str, Any]],
    tools: list[dict[str, Any]] | None,
) -> list[int]:
    from jinja2 import TemplateError

    try:
        rendered = tokenizer.apply_chat_template(
            [dict(m) for m in messages],
            tools=list(tools) if tools is not None else None,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
    except TemplateError as exc:
        raise SpecbenchError(
            f"the tokenizer's chat template rejected the conversation ({exc}); set "
            "chat_template: off to send plain text"
        ) from None
    return _as_id_list(rendered)


def _as_id_list(encoded: Any) -> list[int]:
    """Token ids from what a tokenizer returns: a list, a batch of one, a tensor or a
    dict / BatchEncoding with `input_ids` (transformers 5 returns one by default)."""
    if isinstance(encoded, Mapping):
        encoded = encoded["input_ids"]
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    if encoded and isinstance(encoded[0], list | tuple):
        encoded = encoded[0]
    return [int(token) for token in encoded]


def _truncate_left(
    ids: list[int], max_context: int | None, bos_token_id: int | None
) -> tuple[list[int], bool]:
    if max_context is None or len(ids) <= max_context:
        return ids, False
    if max_context < 1:
        raise SpecbenchError(
            f"the context budget for prompts is {max_context} tokens; lower max_new_tokens so "
            "prompts fit in the model's context"
        )
    keep_bos = max_context >= 2 and bos_token_id is not None and ids[0] == bos_token_id
    kept = [ids[0], *ids[len(ids) - max_context + 1 :]] if keep_bos else ids[-max_context:]
    warnings.warn(
        f"a prompt of {len(ids)} tokens was cut to its last {max_context} tokens to fit the "
        "context; its oldest text is not seen by the model",
        PromptTruncatedWarning,
        stacklevel=3,
    )
    return kept, True
