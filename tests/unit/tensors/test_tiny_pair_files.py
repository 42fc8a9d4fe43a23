"""The shipped tiny pair's files and prompt sets, without loading it: paths, the files present and
small, the tiny datasets well formed (tests/test_tiny_pair.py loads the models)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specbench.models.tinypair import MODEL_NAMES, TINY_PAIR_DIR, load_manifest, tiny_model_dir

REPO = Path(__file__).resolve().parents[3]


WORKLOADS = ("tiny_code", "tiny_prose", "tiny_structured", "tiny_encoded")


def _records(workload: str) -> list[dict[str, Any]]:
    path = REPO / "datasets" / f"{workload}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return load_manifest()


def test_tinypair_paths() -> None:
    assert tiny_model_dir("target") == TINY_PAIR_DIR / "target"
    assert tiny_model_dir("draft").parent == TINY_PAIR_DIR
    with pytest.raises(ValueError, match="unknown tiny model"):
        tiny_model_dir("teacher")


def test_files_present_and_small(manifest: dict[str, Any]) -> None:
    for name in MODEL_NAMES:
        d = tiny_model_dir(name)
        for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
            assert (d / f).is_file(), f"{name}/{f} missing"
    total = sum(f.stat().st_size for f in TINY_PAIR_DIR.rglob("*") if f.is_file())
    assert total <= 30 * 1024 * 1024, f"tiny pair is {total / 1e6:.1f} MB (> 30 MB)"


def test_datasets_well_formed() -> None:
    for workload in WORKLOADS:
        recs = _records(workload)
        assert len(recs) >= 20
        ids = [r["id"] for r in recs]
        assert len(set(ids)) == len(ids)
        for r in recs:
            assert r["workload"] == workload and r["id"].startswith(f"{workload}-")
            assert 20 <= len(r["prompt"]) <= 400, r["id"]
