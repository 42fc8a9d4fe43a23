"""Logged conversations as production rendered them, without a tokenizer: content-part arrays,
system prompts, assistant tool calls, tool results and a `tools` list normalized as the server
does; a row that cannot be read is reported, never silently dropped (the rendering through a chat
template: tests/data/test_conversations.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specbench.data.conversation import BadConversation, normalize_messages
from specbench.data.logged import FieldNames, open_logged, parse_row, select_requests
from specbench.data.sources import Row
from specbench.errors import SpecbenchError

LOGGED = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this file?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": "And what is the weather?"},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
# what the template must receive: text parts joined by "\n", arguments as an object
EXPECTED = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is in this file?\nAnd what is the weather?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": {"city": "Paris"}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
]


def test_normalized_messages_match_what_the_server_sends() -> None:
    conv = normalize_messages(json.dumps(LOGGED), "messages")  # JSON text as CSV stores it
    assert conv.messages == EXPECTED
    assert conv.dropped_parts == {"image_url": 1}


def test_without_a_template_tool_calls_are_still_sent_as_text() -> None:
    from specbench.data.render import plain_text

    text = plain_text(EXPECTED)
    assert text == (
        "Be brief.\n\nWhat is in this file?\nAnd what is the weather?\n\n"
        '[{"name": "weather", "arguments": {"city": "Paris"}}]\n\n18 C, sunny'
    )


def test_a_final_assistant_message_is_the_response_in_parts() -> None:
    logged = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
    ]
    req = parse_row(Row("row 1", {"messages": logged}), FieldNames(), 0)
    assert req.messages == [{"role": "user", "content": "hi"}] and req.response == "hello"
    # an answer that is only a tool call has no text to score: reported, not dropped silently
    call = {**LOGGED[2]}
    with pytest.raises(Exception, match="tool call without text"):
        parse_row(Row("row 2", {"messages": [LOGGED[0], LOGGED[1], call]}), FieldNames(), 0)


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([], "non-empty list"),
        ([{"content": "x"}], "needs a text 'role'"),
        ([{"role": "user", "content": [{"text": "x"}]}], "needs a 'type'"),
        ([{"role": "user", "content": 3}], "must be text or a list of content parts"),
        ([{"role": "user", "content": " "}], "is empty"),
        ([{"role": "assistant", "tool_calls": [{"function": {}}]}], "function.name"),
    ],
)
def test_unreadable_messages_say_why(messages: list[Any], needle: str) -> None:
    with pytest.raises(BadConversation, match=needle):
        normalize_messages(messages, "messages")


def test_bad_conversations_are_skipped_and_reported_by_row(tmp_path: Path) -> None:
    rows = [
        {"messages": LOGGED, "response": "ok", "tools": TOOLS},
        {"messages": [{"role": "user", "content": 3}], "response": "ok"},
        {"messages": LOGGED, "response": "ok", "tools": "not a list"},
    ]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    source, stream = open_logged(str(path))
    with pytest.raises(SpecbenchError, match="line 2: the content of message 1"):
        select_requests(source, stream, FieldNames(), 0, False, None, None, 0)
    source, stream = open_logged(str(path))
    sel = select_requests(source, stream, FieldNames(), 0, True, None, None, 0)
    assert len(sel.requests) == 1 and sel.requests[0].tools == TOOLS
    assert [s["row"] for s in sel.skipped] == ["line 2", "line 3"] and sel.skipped_total == 2
