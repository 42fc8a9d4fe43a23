"""A tokenizer's fingerprint: which token each id stands for, as one sha256.

Token counts, acceptance per token and T_d / T_t(γ) per token all mean something only for one
tokenizer: the same text is another number of tokens under another vocabulary. Runs and accept
record the fingerprint of the target's and the draft's tokenizer (env.json → results.json's
`env.tokenizers`; accept.json's `pair.tokenizers`), and the commands that feed one run's figures
into another (`accept --timings`, `compare`) refuse to mix fingerprints that differ.

The fingerprint is "sha256:" + the sha256 of the JSON (sorted keys, no spaces) of the
tokenizer's model vocab and merges and its added tokens: what maps text to ids. Settings that do
not (truncation, padding, the chat template) are left out, so loading the same files with
different options gives the same fingerprint. A slow tokenizer (no tokenizer.json backend) is
fingerprinted from `get_vocab()`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """ "sha256:<hex>" of the tokenizer's vocab, merges and added tokens (module docstring)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        full = json.loads(backend.to_str())
        model = full.get("model") or {}
        part: dict[str, Any] = {
            "type": model.get("type"),
            "vocab": model.get("vocab"),
            "merges": model.get("merges"),
            "added_tokens": [
                (t.get("id"), t.get("content")) for t in full.get("added_tokens") or []
            ],
        }
    else:
        part = {"vocab": sorted(tokenizer.get_vocab().items())}
    text = json.dumps(part, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def pair_fingerprints(target: Any, draft: Any | None) -> dict[str, str | None]:
    """{"target": …, "draft": …} of two tokenizers (draft None: a model-free drafter)."""
    return {
        "target": tokenizer_fingerprint(target),
        "draft": None if draft is None else tokenizer_fingerprint(draft),
    }
