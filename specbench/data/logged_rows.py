"""One row of logged traffic for `specbench accept`: where its parts are (`FieldNames`), what
it holds once parsed (`LoggedRequest`: the conversation before the answer, the answer, its
bucket and logged sampling parameters), and why a row cannot be used (`BadRow`).

A row holds the conversation before the answer and the answer, located by field paths
(`data.paths`): `--prompt-field` (text, or a list of messages), `--messages-field` (a list of
OpenAI-style messages: system prompts, content-part arrays, assistant tool calls, tool results;
a final assistant message is the response when the row has no response value),
`--response-field` (text or content parts), optionally `tools` (passed to the chat template), a
bucket, an id and the request's `temperature` / `top_p`. Defaults: `prompt`, `messages`,
`response`, `tools`, `id`, `temperature`, `top_p`. data/logged.py streams rows and samples them.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from specbench.data.conversation import (
    BadConversation,
    content_text,
    normalize_messages,
    normalize_tools,
)
from specbench.data.paths import MISSING, get_path, parse_path
from specbench.data.sources import Row
from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams

DEFAULT_BUCKET = "all"


@dataclass(frozen=True)
class FieldNames:
    """Field paths of each part of a row; `*_explicit` marks a path the user gave (it must then
    exist)."""

    prompt: str = "prompt"
    messages: str = "messages"
    response: str = "response"
    bucket: str | None = None
    id: str = "id"
    temperature: str = "temperature"
    top_p: str = "top_p"
    tools: str = "tools"
    prompt_explicit: bool = False
    messages_explicit: bool = False

    def paths(self) -> list[str]:
        names = [self.prompt, self.messages, self.response, self.id, self.temperature]
        names += [self.top_p, self.tools] + ([self.bucket] if self.bucket else [])
        return names

    def columns(self) -> list[str]:
        """The top-level columns the paths start in (all a Parquet reader needs to decode)."""
        return list(dict.fromkeys(parse_path(p).column for p in self.paths()))


@dataclass(frozen=True)
class LoggedRequest:
    location: str  # "line 3" / "row 3", for messages
    id: str
    bucket: str
    messages: list[dict[str, Any]]  # the conversation before the response
    response: str
    params: SamplingParams | None  # the request's logged sampling parameters, if any
    tools: list[dict[str, Any]] | None = None
    dropped_parts: dict[str, int] = field(default_factory=dict)  # non-text parts by type


class BadRow(Exception):
    """A row that cannot be used; the message says why (without the row number)."""


def check_fields(source: str, first: Row, f: FieldNames) -> None:
    """A named field that the first row lacks is an error about the source, not about a row."""
    v = first.values
    cols = ", ".join(str(k) for k in v)

    def missing(name: str, option: str) -> SpecbenchError:
        return SpecbenchError(f"{source} has no column '{name}' ({option}); columns: {cols}")

    def has(path: str) -> bool:
        return get_path(v, path) is not MISSING

    if f.messages_explicit and not has(f.messages):
        raise missing(f.messages, "--messages-field")
    if f.prompt_explicit and not has(f.prompt):
        raise missing(f.prompt, "--prompt-field")
    if not (has(f.prompt) or has(f.messages)):
        raise SpecbenchError(
            f"{source} has neither a '{f.prompt}' nor a '{f.messages}' column; set "
            f"--prompt-field or --messages-field to one of: {cols}"
        )
    conversation = f.messages_explicit or (has(f.messages) and not f.prompt_explicit)
    if f.prompt_explicit and not isinstance(get_path(v, f.prompt), str | type(None)):
        conversation = True  # --prompt-field names a message list
    if not has(f.response) and not conversation:
        raise missing(f.response, "--response-field")
    if f.bucket is not None and not has(f.bucket):
        raise missing(f.bucket, "--bucket-by")


def _text(value: Any, what: str) -> str:
    if value is None or value is MISSING or (isinstance(value, float) and math.isnan(value)):
        raise BadRow(f"the {what} is missing")
    if not isinstance(value, str):
        raise BadRow(f"the {what} must be text, got {type(value).__name__}")
    if not value.strip():
        raise BadRow(f"the {what} is empty")
    return value


def _number(value: Any, name: str) -> float | None:
    if value is None or value is MISSING or (isinstance(value, str) and not value.strip()):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise BadRow(f"'{name}' must be a number, got {value!r}") from None
    return None if math.isnan(x) else x


def _as_conversation(value: Any) -> Any:
    """A prompt value that is a message list (or its JSON text), else None."""
    if isinstance(value, str):
        if not value.lstrip().startswith("["):
            return None
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, list | tuple) and value and isinstance(value[0], dict):
        return value
    return None


def parse_row(row: Row, f: FieldNames, top_k: int) -> LoggedRequest:
    v = row.values
    if f.messages_explicit or (
        not f.prompt_explicit and get_path(v, f.messages) not in (MISSING, None)
    ):
        name, value = f.messages, get_path(v, f.messages)
    else:
        name, value = f.prompt, get_path(v, f.prompt)
    if value is MISSING:
        raise BadRow(f"no '{name}' value")
    response: Any = get_path(v, f.response)
    dropped: dict[str, int] = {}
    conversation = value if name == f.messages else _as_conversation(value)
    try:
        if conversation is not None or name == f.messages:
            conv = normalize_messages(value if conversation is None else conversation, name)
            messages, dropped = conv.messages, conv.dropped_parts
            if response in (MISSING, None) and messages[-1]["role"] == "assistant":
                last, messages = messages[-1], messages[:-1]
                if not messages:
                    raise BadRow(f"'{name}' holds only the assistant's answer, no prompt")
                if not last["content"].strip() and last.get("tool_calls"):
                    raise BadRow(
                        "the logged answer is a tool call without text; accept scores text "
                        "answers (the rows before and after a call score its text turns)"
                    )
                response = last["content"]
        else:
            messages = [{"role": "user", "content": _text(value, f"prompt ('{f.prompt}')")}]
        if response is MISSING:
            raise BadRow(f"no '{f.response}' value")
        if isinstance(response, list | tuple):
            parts: Counter[str] = Counter(dropped)
            response = content_text(response, f"the response ('{f.response}')", parts)
            dropped = dict(parts)
        logged_tools = get_path(v, f.tools)
        tools = None if logged_tools is MISSING else normalize_tools(logged_tools, f.tools)
    except BadConversation as exc:
        raise BadRow(str(exc)) from None
    response = _text(response, f"response ('{f.response}')")
    bucket = bucket_of(row, f)
    if bucket is None:
        raise BadRow(f"the bucket ('{f.bucket}') is empty")
    temp = _number(get_path(v, f.temperature), f.temperature)
    top_p = _number(get_path(v, f.top_p), f.top_p)
    if temp is not None and temp < 0:
        raise BadRow(f"'{f.temperature}' must be >= 0, got {temp:g}")
    if top_p is not None and not 0 < top_p <= 1:
        raise BadRow(f"'{f.top_p}' must be in (0, 1], got {top_p:g}")
    params = None
    if temp is not None or top_p is not None:
        params = SamplingParams(
            1.0 if temp is None else temp, top_k, 1.0 if top_p is None else top_p
        )
    rid = get_path(v, f.id)
    return LoggedRequest(
        row.location,
        str(rid) if rid not in (MISSING, None, "") else row.location,
        bucket,
        messages,
        response,
        params,
        tools,
        dropped,
    )


def bucket_of(row: Row, f: FieldNames) -> str | None:
    """The row's bucket (as `parse_row` reads it), or None when it has none."""
    if f.bucket is None:
        return DEFAULT_BUCKET
    raw = get_path(row.values, f.bucket)
    if raw in (MISSING, None):
        return None
    text = str(raw).strip()
    return text or None


def conversation_notes(requests: list[LoggedRequest], templated: bool) -> list[str]:
    """What of the logged conversations did not reach the scored context, said once each.
    `templated`: prompts go through the tokenizer's chat template (the only place for tools)."""
    notes = []
    dropped: dict[str, int] = {}
    with_parts = 0
    for r in requests:
        with_parts += bool(r.dropped_parts)
        for kind, n in r.dropped_parts.items():
            dropped[kind] = dropped.get(kind, 0) + n
    if dropped:
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(dropped.items()))
        notes.append(
            f"{with_parts} request(s) hold non-text content parts ({kinds}); only their text "
            "parts were scored (a text-only pair never sees them)"
        )
    with_tools = sum(1 for r in requests if r.tools)
    if with_tools and not templated:
        notes.append(
            f"{with_tools} request(s) carry a tools list, but prompts are sent as plain text "
            "(no chat template), which has no place for tool definitions: they were not scored"
        )
    return notes
