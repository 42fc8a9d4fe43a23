"""The prompt record and the message list the engine sends for each turn of a conversation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RequestSampling:
    """How a logged request was sampled (`dataset.sampling: logged`); None = not in the row (the
    config's value is used)."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None


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
    # A logged conversation (`data.conversation` normalized): the model answers at each
    # `generation_points` position; `turns` then holds the message before each point.
    logged: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None  # passed to the chat template
    replay: bool = True  # earlier assistant turns as logged (False: the model's own answers)
    request: RequestSampling | None = None  # dataset.sampling: logged
    # a private prompt (data/privacy.py): its id is already hashed, and this is its workload's
    # key for answer digests; the harness then writes no text for it. None = text kept.
    private_key: bytes | None = field(default=None, repr=False)


def generation_points(logged: list[dict[str, Any]]) -> list[int]:
    """Indices of a logged conversation where the model writes the next message: each assistant
    message right after a non-assistant one, and the end when the last is not the assistant's."""
    points: list[int] = [
        i
        for i in range(1, len(logged))
        if logged[i]["role"] == "assistant" and logged[i - 1]["role"] != "assistant"
    ]
    if logged and logged[-1]["role"] != "assistant":
        points.append(len(logged))
    return points


def conversation_messages(
    prompt: Prompt, answers: list[str], upto_turn: int
) -> list[dict[str, Any]]:
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
    if len(answers) < upto_turn and not (prompt.logged is not None and prompt.replay):
        raise ValueError(
            f"turn {upto_turn} of prompt {prompt.id!r} needs {upto_turn} earlier answer(s), "
            f"got {len(answers)}"
        )
    if prompt.logged is not None:
        # The logged context up to this point: replayed as logged, or (regenerate) with each
        # earlier point's assistant message replaced by the model's answer (its tool calls go:
        # the answer is text).
        points = generation_points(prompt.logged)
        end = points[upto_turn]
        context = [dict(m) for m in prompt.logged[:end]]
        if not prompt.replay:
            for j, point in enumerate(points[:upto_turn]):
                if point < len(prompt.logged):
                    context[point] = {"role": "assistant", "content": answers[j]}
        return context
    messages: list[dict[str, Any]] = []
    for turn, answer in zip(prompt.turns[:upto_turn], answers[:upto_turn], strict=True):
        messages.append({"role": "user", "content": turn})
        messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": prompt.turns[upto_turn]})
    return messages
