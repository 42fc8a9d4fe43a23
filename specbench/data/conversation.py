"""Logged conversations as the serving stack received them, made ready for a chat template.

OpenAI-style request logs hold messages whose `content` is a string, a list of content parts
(`{"type": "text", "text": …}`, `{"type": "image_url", …}`), or null beside `tool_calls`; tool
results come back as `role: "tool"` messages with a `tool_call_id`; the request's `tools` list
describes the callable functions. They are normalized the way vLLM's OpenAI server prepares them
for a Hugging Face chat template (vllm/entrypoints/chat_utils.py), so that the context scored or
generated is the one production rendered:

- text parts are joined with "\\n" (vLLM's "string" content format); other parts (images,
  audio, files) cannot reach a text-only pair and are counted per type, for the report;
- a tool call's `function.arguments`, logged as a JSON string, becomes the object that
  templates render with `| tojson` (vLLM parses it likewise);
- `tool_call_id` and `name` are kept; null-valued keys (a Parquet struct's absent fields) are
  dropped.

A message this cannot read raises `BadConversation` with the reason; callers report the row.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})  # Chat and Responses APIs
PART_SEPARATOR = "\n"
# The roles of the Chat Completions API (function: its legacy tool role; ipython: Llama 3's)
KNOWN_ROLES = ("system", "developer", "user", "assistant", "tool", "function", "ipython")


class BadConversation(ValueError):
    """A logged value that is not a usable conversation; the message says why."""


@dataclass(frozen=True)
class Conversation:
    messages: list[dict[str, Any]]
    dropped_parts: dict[str, int] = field(default_factory=dict)  # non-text part type → count


def _parse_json(value: Any, what: str) -> Any:
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise BadConversation(f"{what} is not valid JSON") from None
    return value


def content_text(content: Any, what: str, dropped: Counter[str] | None = None) -> str:
    """A message content as text: a string as is, null as "", a part list's text parts joined
    (other parts counted in `dropped`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list | tuple):
        raise BadConversation(
            f"{what} must be text or a list of content parts, got {type(content).__name__}"
        )
    texts = []
    for j, part in enumerate(content, start=1):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise BadConversation(f"part {j} of {what} needs a 'type'")
        if part["type"] in TEXT_PART_TYPES:
            if not isinstance(part.get("text"), str):
                raise BadConversation(f"text part {j} of {what} has no 'text'")
            texts.append(part["text"])
        elif dropped is not None:
            dropped[part["type"]] += 1
    return PART_SEPARATOR.join(texts)


def _tool_call(call: Any, what: str) -> dict[str, Any]:
    if not isinstance(call, Mapping):
        raise BadConversation(f"{what} must be an object")
    out = {k: v for k, v in call.items() if v is not None}
    fn = out.get("function")
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        raise BadConversation(f"{what} needs function.name")
    fn = {k: v for k, v in fn.items() if v is not None}
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            parsed = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            parsed = None  # a truncated call as logged: kept as its text
        if isinstance(parsed, dict):
            fn["arguments"] = parsed
    out["function"] = fn
    out.setdefault("type", "function")
    return out


def normalize_messages(value: Any, name: str) -> Conversation:
    """`value` (a list of messages, or its JSON text) normalized; `name` names it in errors."""
    value = _parse_json(value, f"'{name}'")
    if not isinstance(value, list | tuple) or not value:
        raise BadConversation(f"'{name}' must be a non-empty list of messages")
    dropped: Counter[str] = Counter()
    out: list[dict[str, Any]] = []
    for i, m in enumerate(value, start=1):
        what = f"message {i} of '{name}'"
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not m["role"]:
            raise BadConversation(f"{what} needs a text 'role'")
        if m["role"] not in KNOWN_ROLES:  # a typo or another schema: its turns would be misread
            raise BadConversation(
                f"{what} has role '{m['role']}'; known roles: {', '.join(KNOWN_ROLES)}"
            )
        msg: dict[str, Any] = {
            "role": m["role"],
            "content": content_text(m.get("content"), f"the content of {what}", dropped),
        }
        calls = _parse_json(m.get("tool_calls"), f"the tool_calls of {what}")
        if calls:
            if not isinstance(calls, list | tuple):
                raise BadConversation(f"the tool_calls of {what} must be a list")
            msg["tool_calls"] = [
                _tool_call(c, f"tool call {j} of {what}") for j, c in enumerate(calls, start=1)
            ]
        for key in ("tool_call_id", "name"):
            if isinstance(m.get(key), str):
                msg[key] = m[key]
        if not msg["content"].strip() and "tool_calls" not in msg:
            raise BadConversation(f"{what} is empty")
        out.append(msg)
    return Conversation(out, dict(dropped))


def normalize_tools(value: Any, name: str) -> list[dict[str, Any]] | None:
    """A request's `tools` list (or its JSON text) as given; None when absent or empty."""
    value = _parse_json(value, f"'{name}'")
    if value is None or (isinstance(value, list | tuple) and not value):
        return None
    if not isinstance(value, list | tuple) or not all(isinstance(t, Mapping) for t in value):
        raise BadConversation(f"'{name}' must be a list of tool definitions")
    return [dict(t) for t in value]


def plain_content(message: Mapping[str, Any]) -> str:
    """A message's text for templateless (plain text) prompts: its content, then any tool calls
    as JSON, so a tool-calling turn is not sent as nothing."""
    calls = message.get("tool_calls")
    text = str(message.get("content") or "")
    if not calls:
        return text
    rendered = json.dumps([c.get("function", c) for c in calls], ensure_ascii=False)
    return f"{text}\n{rendered}" if text else rendered
