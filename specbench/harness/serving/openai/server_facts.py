"""What an OpenAI-compatible server says about itself, for env.json's `server_info` (cheap GETs,
each optional: a server that does not answer one is still measured).

- `/version` (vLLM): {"version": "0.32.0"} → `server_version`;
- `/v1/models`, the served model's entry: `root` (the weights it loaded), `owned_by` (vLLM
  answers "vllm", SGLang "sglang"), `max_model_len` (read by the caller);
- `/get_server_info` (SGLang): `version`, and the speculative settings it runs
  (`speculative_algorithm`, `speculative_num_draft_tokens`, `speculative_draft_model_path`).

No engine exposes its GPU over the OpenAI API; `gpu` is left null unless a server's info names
one (`gpu`/`device_name` keys where present).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from specbench.errors import SpecbenchError
from specbench.harness.serving.openai.openai_http import RequestFailed

SGLANG_KEYS = (
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "speculative_num_steps",
    "speculative_draft_model_path",
)


def _json(get: Callable[[str], str], path: str) -> dict[str, Any]:
    try:
        got = json.loads(get(path))
    except (RequestFailed, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def server_facts(get: Callable[[str], str], model_entry: dict[str, Any]) -> dict[str, Any]:
    """`get(path)`: the text of GET <origin><path> (RequestFailed when it fails)."""
    version = _json(get, "/version").get("version")
    facts: dict[str, Any] = {
        "server_version": version,
        "engine": model_entry.get("owned_by"),
        "model_root": model_entry.get("root"),
        "gpu": None,
    }
    if version is None and facts["engine"] != "vllm":
        info = _json(get, "/get_server_info")
        if info:
            facts["server_version"] = info.get("version")
            facts["speculative"] = {k: info[k] for k in SGLANG_KEYS if k in info} or None
            facts["gpu"] = info.get("gpu") or info.get("device_name")
    return facts


def served_model(
    listing_text: str, wanted: str | None, fallback: str, where: str
) -> tuple[str, dict[str, Any]]:
    """(the model to request, its /v1/models entry) from the listing's text: `server.model`, else
    the one model served, else `target.model`; a model the server does not serve is an error."""
    try:
        listing = json.loads(listing_text)
    except ValueError:
        listing = {}
    data = listing.get("data", []) if isinstance(listing, dict) else []
    served = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    names = [str(m.get("id")) for m in served]
    model = wanted or (names[0] if len(names) == 1 else fallback)
    if names and model not in names:
        raise SpecbenchError(
            f"the server at {where} serves {', '.join(names)}, not '{model}'; set server.model"
        )
    return model, next((m for m in served if str(m.get("id")) == model), {})
