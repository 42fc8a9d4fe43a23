"""The shipped tiny target/draft pair: files, hashes, loading offline, sizes, and the acceptance
figures recorded in its manifest (recomputed here with specbench.decoding.pairstats; nothing is retrained).

Tolerance: fp32 inference on CPU at batch 1 is deterministic (same result with 1 or 2 threads), so
the recomputed figures must match the manifest to 1e-4; the target's greedy continuations must
match the stored token ids exactly. A different CPU could in principle flip an argmax near-tie;
the failure message then names the prompts instead of hiding it. Latency is not tested here (see
benchmarks/bench_tiny_pair.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from specbench.decoding.pairstats import acceptance_figures, teacher_forced_stats
from specbench.models.tinypair import MODEL_NAMES, TINY_PAIR_DIR, load_manifest, tiny_model_dir

REPO = Path(__file__).resolve().parents[1]
TOL = 1e-4
WORKLOADS = ("tiny_code", "tiny_prose", "tiny_structured", "tiny_encoded")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _records(workload: str) -> list[dict[str, Any]]:
    path = REPO / "datasets" / f"{workload}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return load_manifest()


@pytest.fixture(scope="module")
def pair() -> Iterator[dict[str, Any]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # One thread: batch-1 results are the same as with two (checked when the manifest was made),
    # and no OpenMP worker spins against other processes on a shared machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out: dict[str, Any] = {}
    for name in MODEL_NAMES:
        d = tiny_model_dir(name)
        out[name] = AutoModelForCausalLM.from_pretrained(
            d, dtype=torch.float32, local_files_only=True
        ).eval()
        out[f"{name}_tok"] = AutoTokenizer.from_pretrained(d, local_files_only=True)
    yield out
    torch.set_num_threads(threads)


def test_weight_sha256_match_manifest(manifest: dict[str, Any]) -> None:
    recorded = manifest["files"]["sha256"]
    assert set(recorded) == {"target/model.safetensors", "draft/model.safetensors"}
    for rel, digest in recorded.items():
        assert _sha256(TINY_PAIR_DIR / rel) == digest, f"{rel} differs from the manifest"


def test_loads_offline_with_shared_tokenizer(pair: dict[str, Any]) -> None:
    t_tok, d_tok = pair["target_tok"], pair["draft_tok"]
    assert t_tok.get_vocab() == d_tok.get_vocab()
    assert t_tok.eos_token == "<|endoftext|>" and t_tok.bos_token == "<|endoftext|>"
    assert t_tok.chat_template is None  # a base LM
    for name in MODEL_NAMES:
        cfg = pair[name].config
        assert cfg.model_type == "llama"
        assert cfg.eos_token_id == t_tok.eos_token_id
        assert cfg.bos_token_id == t_tok.bos_token_id
        assert cfg.vocab_size == len(t_tok)
    ids = t_tok("def f(x):\n    return x")["input_ids"]
    assert ids[0] == t_tok.bos_token_id  # BOS is prepended, as in training
    assert t_tok.decode(ids, skip_special_tokens=True) == "def f(x):\n    return x"


def test_parameter_counts(pair: dict[str, Any], manifest: dict[str, Any]) -> None:
    counts = {n: sum(p.numel() for p in pair[n].parameters()) for n in MODEL_NAMES}
    for name in MODEL_NAMES:
        assert counts[name] == manifest["models"][name]["parameters"]
    assert 2_000_000 <= counts["target"] <= 8_000_000  # "a few million"
    assert counts["draft"] * 4 <= counts["target"]
    assert pair["draft"].config.num_hidden_layers < pair["target"].config.num_hidden_layers


def test_teacher_forced_stats_identity(pair: dict[str, Any]) -> None:
    """A model against itself: β = 1 and greedy agreement = 1 at every position."""
    tok = pair["target_tok"]
    ids = tok("import os\n\n\ndef main():\n")["input_ids"]
    st = teacher_forced_stats(pair["draft"], pair["draft"], ids, [10, 20, 30], temperature=1.0)
    assert st["n_positions"] == 3
    assert st["greedy_agreement"] == 1.0
    assert st["mean_beta"] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.slow
def test_acceptance_figures_match_manifest(pair: dict[str, Any], manifest: dict[str, Any]) -> None:
    acc = manifest["acceptance"]
    tok = pair["target_tok"]
    prompts: dict[str, dict[str, list[int]]] = {}
    for workload in WORKLOADS:
        digest = _sha256(REPO / "datasets" / f"{workload}.jsonl")
        assert digest == acc["workloads"][workload]["dataset_sha256"], (
            f"datasets/{workload}.jsonl changed since the manifest was made: re-measure with "
            "`python scripts/train_tiny_pair.py --measure-only` (no retraining needed)"
        )
        recs = {r["id"]: r["prompt"] for r in _records(workload)}
        wanted = acc["workloads"][workload]["prompt_ids"]
        assert set(wanted) <= set(recs), f"{workload}: manifest names prompts not in the dataset"
        prompts[workload] = {pid: list(tok(recs[pid])["input_ids"]) for pid in wanted}

    got = acceptance_figures(
        pair["target"], pair["draft"], prompts, n_new=acc["n_new"], temperature=acc["temperature"]
    )

    flipped = [pid for pid, c in got["continuations"].items() if c != acc["continuations"][pid]]
    assert not flipped, f"target greedy continuations differ from the manifest for {flipped}"
    for workload in WORKLOADS:
        g, m = got["workloads"][workload], acc["workloads"][workload]
        assert g["n_positions"] == m["n_positions"]
        for key in ("greedy_agreement", "mean_beta", "target_self_agreement"):
            assert g[key] == pytest.approx(m[key], abs=TOL), f"{workload} {key}"
    assert got["beta_spread"] == pytest.approx(acc["beta_spread"], abs=TOL)

    # The thresholds.
    assert got["workloads"]["tiny_code"]["greedy_agreement"] >= 0.5
    assert got["beta_spread"] >= 0.1
