"""Replaying logged assistant turns on the tiny pair: each turn is answered on the logged context,
or on the model's own earlier answers with `assistant_turns: regenerate`."""

from __future__ import annotations

import dataclasses
from typing import Any

from specbench.config import parse_config
from specbench.data import build_context_ids
from specbench.data.prompt import Prompt


def test_run_replays_logged_turns_and_regenerates_on_request(tiny_pair: Any) -> None:

    cfg = parse_config(
        {
            "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
            "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
            "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
            "max_new_tokens": 6,
        }
    )
    session = tiny_pair.session(cfg)
    logged = [
        {"role": "user", "content": "def add(a, b):"},
        {
            "role": "assistant",
            "content": "\n    # add them\n    total = a + b\n    return total\n\n",
        },
        {"role": "user", "content": "def sub(a, b):"},
    ]
    prompt = Prompt("p", "w", ["def add(a, b):", "def sub(a, b):"], logged=logged)
    tok = tiny_pair.target.tokenizer
    body, _ = session.run_prompt(prompt, 0.0, 2, seed=1)
    assert body["turns"] == 2 and len(body["answers"]) == 2
    replayed, _ = build_context_ids(tok, logged, "auto", None)
    assert body["prompt_tokens"][1] == len(replayed)
    regen = dataclasses.replace(prompt, replay=False)
    body2, _ = session.run_prompt(regen, 0.0, 2, seed=1)
    own = [logged[0], {"role": "assistant", "content": body2["answers"][0]}, logged[2]]
    want, _ = build_context_ids(tok, own, "auto", None)
    assert body2["prompt_tokens"][1] == len(want)
    # the logged answer is longer than the 6 tokens the model may write: the contexts differ
    assert body2["prompt_tokens"][1] != body["prompt_tokens"][1]
