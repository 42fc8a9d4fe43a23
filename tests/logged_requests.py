"""Logged requests with their own sampling, for the `dataset.sampling: logged` tests of every
backend (transformers: tests/cli/test_cli_logged_sampling.py; openai and vLLM: tests/harness)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# (id, temperature, top_p, max_tokens); None = not in the row (the config's value is used)
ROWS: list[tuple[str, float | None, float | None, int | None]] = [
    ("a", 0.0, 1.0, 4),
    ("b", 0.7, 0.9, 7),
    ("c", 1.0, None, 50),  # top_p from the config; max tokens capped at max_new_tokens
    ("d", None, 0.5, None),  # temperature from the config; max tokens = max_new_tokens
]


def write_logged_requests(path: Path) -> dict[str, Any]:
    """Write ROWS as OpenAI request logs (one user turn each) to `path`; return the workload's
    `dataset:` section that reads them with `sampling: logged`."""
    lines = []
    for rid, t, p, m in ROWS:
        request: dict[str, Any] = {"messages": [{"role": "user", "content": f"def f_{rid}(x):"}]}
        for key, value in (("temperature", t), ("top_p", p), ("max_tokens", m)):
            if value is not None:
                request[key] = value
        lines.append(json.dumps({"id": rid, "request": request}))
    path.write_text("\n".join(lines) + "\n")
    return {
        "path": str(path),
        "messages_field": "request.messages",
        "sampling": "logged",
        "temperature_field": "request.temperature",
        "top_p_field": "request.top_p",
        "max_tokens_field": "request.max_tokens",
    }
