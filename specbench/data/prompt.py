"""The prompt record and the message list the engine sends for each turn of a conversation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Prompt:
    """One benchmark prompt: one or more user turns, answered in order by the model.

    `workload` is "" when the source says nothing about workloads (`load_workload` then sets it
    to the configured workload's name). `reference` is an optional reference answer (for
    Spec-Bench rows: the first element of the `reference` list; the full list is kept in
    `meta["references"]`). `meta` holds anything else the source knew (e.g. `category`).
    """

    id: str
    workload: str
    turns: list[str]
    reference: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def conversation_messages(
    prompt: Prompt, answers: list[str], upto_turn: int
) -> list[dict[str, str]]:
    """Messages for answering turn `upto_turn` (0-based): every earlier user turn followed by the
    model's answer to it, then the user turn being answered.

    `answers[i]` is the model's answer to `prompt.turns[i]`; answers beyond `upto_turn` are
    ignored. Raises ValueError (a programming error, not a user one) when the turn does not exist
    or an earlier answer is missing.
    """
    if not 0 <= upto_turn < len(prompt.turns):
        raise ValueError(
            f"prompt {prompt.id!r} has {len(prompt.turns)} turn(s); turn {upto_turn} does not exist"
        )
    if len(answers) < upto_turn:
        raise ValueError(
            f"turn {upto_turn} of prompt {prompt.id!r} needs {upto_turn} earlier answer(s), "
            f"got {len(answers)}"
        )
    messages: list[dict[str, str]] = []
    for turn, answer in zip(prompt.turns[:upto_turn], answers[:upto_turn], strict=True):
        messages.append({"role": "user", "content": turn})
        messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": prompt.turns[upto_turn]})
    return messages
