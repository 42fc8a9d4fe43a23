"""Tokenizer fingerprints (models/fingerprint.py) on the shipped pair's real tokenizer files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from transformers import AutoTokenizer

from specbench.models.fingerprint import pair_fingerprints, tokenizer_fingerprint
from specbench.models.tinypair import tiny_model_dir


def test_one_vocabulary_one_fingerprint_another_differs(tmp_path: Path) -> None:
    target = AutoTokenizer.from_pretrained(tiny_model_dir("target"))
    draft = AutoTokenizer.from_pretrained(tiny_model_dir("draft"))
    fp = tokenizer_fingerprint(target)
    assert fp.startswith("sha256:") and len(fp) == 7 + 64
    assert pair_fingerprints(target, draft) == {"target": fp, "draft": fp}  # a shared vocabulary
    # options that do not map text to ids leave it unchanged
    loaded = AutoTokenizer.from_pretrained(tiny_model_dir("target"), padding_side="left")
    assert tokenizer_fingerprint(loaded) == fp
    # two tokens' ids swapped (the same tokens and merges, another mapping): another tokenizer
    copy = tmp_path / "tok"
    shutil.copytree(tiny_model_dir("target"), copy, ignore=shutil.ignore_patterns("*.safetensors"))
    doc = json.loads((copy / "tokenizer.json").read_text())
    vocab = doc["model"]["vocab"]
    (a, i), (b, j) = sorted(vocab.items(), key=lambda kv: kv[1])[-2:]
    vocab[a], vocab[b] = j, i
    (copy / "tokenizer.json").write_text(json.dumps(doc))
    assert tokenizer_fingerprint(AutoTokenizer.from_pretrained(copy)) != fp
    assert pair_fingerprints(target, None)["draft"] is None  # a model-free drafter
