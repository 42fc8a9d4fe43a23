"""Logged multi-turn conversations as workloads, without a model: each logged assistant turn is a
point where the model answers, the logged turns are replayed by default (or regenerated on
request), and conflicting or unreadable rows are one line (tests/data/test_replay.py runs them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specbench.config import DatasetSpec, WorkloadSpec
from specbench.data import conversation_messages, load_workload
from specbench.data.prompt import Prompt
from specbench.errors import SpecbenchError

CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
LOGGED = [
    {"role": "system", "content": "You add numbers."},
    {"role": "user", "content": [{"type": "text", "text": "def add(a, b):"}]},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "3"},
    {"role": "assistant", "content": "    return a + b"},
    {"role": "user", "content": "def sub(a, b):"},
]
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


def _workload(tmp_path: Path, **dataset: Any) -> list[Prompt]:
    path = tmp_path / "conv.jsonl"
    row = {"id": "c", "request": {"messages": LOGGED, "tools": TOOLS}}
    path.write_text(json.dumps(row) + "\n")
    spec = DatasetSpec(
        path=str(path), messages_field="request.messages", tools_field="request.tools", **dataset
    )
    return load_workload(WorkloadSpec(name="conv", dataset=spec), seed=0)


def test_a_logged_conversation_is_answered_at_each_assistant_turn(tmp_path: Path) -> None:
    (p,) = _workload(tmp_path)
    assert p.turns == ["def add(a, b):", "3", "def sub(a, b):"]  # the message before each point
    assert p.tools == TOOLS and p.replay
    # replay: every earlier turn as logged, system prompt first, tool call arguments parsed
    ctx = conversation_messages(p, [], 2)
    assert [m["role"] for m in ctx] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert ctx[2]["tool_calls"][0]["function"]["arguments"] == {"a": 1}
    assert conversation_messages(p, [], 1)[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "3",
    }


def test_regenerate_replaces_the_logged_assistant_turns(tmp_path: Path) -> None:
    (p,) = _workload(tmp_path, assistant_turns="regenerate")
    assert not p.replay
    ctx = conversation_messages(p, ["A0", "A1"], 2)
    assert ctx[2] == {"role": "assistant", "content": "A0"}
    assert ctx[4] == {"role": "assistant", "content": "A1"}
    assert ctx[0]["role"] == "system" and ctx[3]["role"] == "tool"


def test_conflicting_fields_and_unreadable_conversations_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(SpecbenchError, match="messages_field are both set"):
        _workload(tmp_path, prompt_field="x")
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": 3}]}) + "\n")
    with pytest.raises(SpecbenchError, match="line 1: the content of message 1"):
        load_workload(WorkloadSpec(name="w", dataset=DatasetSpec(path=str(path))), seed=0)


def test_a_workload_dataset_reads_an_fsspec_url(tmp_path: Path) -> None:
    import uuid

    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/wl-{uuid.uuid4().hex[:8]}"
    rows = [
        {"id": f"r{i}", "meta": {"team": "a" if i % 2 else "b"}, "q": f"q{i}"} for i in range(6)
    ]
    fs.pipe(f"{root}/p.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    try:
        spec = DatasetSpec(
            path=f"memory://{root}/p.jsonl", prompt_field="q", workload_field="meta.team"
        )
        got = load_workload(WorkloadSpec(name="a", dataset=spec), seed=0)
    finally:
        fs.rm(root, recursive=True)
    assert [p.id for p in got] == ["r1", "r3", "r5"] and got[0].turns == ["q1"]
