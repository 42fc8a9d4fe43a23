"""The tiny target/draft pair shipped inside the package (Llama architecture, one shared
byte-level BPE tokenizer), trained on the Python standard library by
`scripts/train_tiny_pair.py`.

`tiny_model_dir("target")` / `tiny_model_dir("draft")` are Hugging Face model directories, loadable
offline with `AutoModelForCausalLM.from_pretrained(dir)` and `AutoTokenizer.from_pretrained(dir)`.
`load_manifest()` returns how they were trained and measured (corpus, sizes, weight sha256,
decode-step latencies, acceptance figures per tiny workload).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TINY_PAIR_DIR: Path = Path(__file__).parents[1] / "assets" / "tiny-pair"
MANIFEST_NAME = "manifest.json"
MODEL_NAMES: tuple[str, ...] = ("target", "draft")


def tiny_model_dir(which: str) -> Path:
    """Directory of the shipped tiny `"target"` or `"draft"` model."""
    if which not in MODEL_NAMES:
        raise ValueError(f"unknown tiny model {which!r}; expected one of {', '.join(MODEL_NAMES)}")
    return TINY_PAIR_DIR / which


def load_manifest() -> dict[str, Any]:
    """The shipped pair's manifest.json as a dict."""
    with (TINY_PAIR_DIR / MANIFEST_NAME).open(encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data
