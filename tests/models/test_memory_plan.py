"""Memory plans without the memory: the shipped large configs' models built on the meta device from
their config.json (specbench/assets/model-configs), checked against the architectures' parameter
formulas, the model cards' published sizes, specbench's own accounting (`memory_profile` on a
loaded model, `model_footprint`'s KV formula from config.json) and the KV formula; then
`validate --gpu-memory` on the shipped configs, with the numbers worked by hand.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.config import parse_config, read_yaml
from specbench.errors import SpecbenchError
from specbench.harness.memory.memory_plan import GIB, SHIPPED_CONFIGS, plan_memory
from specbench.harness.memory.model_footprint import model_footprint
from specbench.models import memory_profile
from specbench.models.meta import eagle3_head_profile, meta_profile

REPO = Path(__file__).resolve().parents[2]
EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
# parameter counts the model cards publish (billions, as rounded there)
PUBLISHED_B = {
    "meta-llama/Llama-3.3-70B-Instruct": 70.6,
    "meta-llama/Llama-3.1-8B-Instruct": 8.03,
    "meta-llama/Llama-3.2-1B-Instruct": 1.24,
    "Qwen/Qwen2.5-7B-Instruct": 7.61,
    "Qwen/Qwen2.5-0.5B-Instruct": 0.49,
}


def _config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (SHIPPED_CONFIGS / name.replace("/", "--") / "config.json").read_text()
    )
    return data


def params_by_hand(c: dict[str, Any]) -> int:
    """Llama / Qwen2 decoder: embedding, per layer q/k/v/o (+ q/k/v bias for Qwen2), gate/up/down,
    two RMSNorms; the final norm; an untied lm_head."""
    h, layers, vocab, inter = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"]  # fmt: skip
    d = c.get("head_dim") or h // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    bias = q + 2 * kv if c["model_type"] == "qwen2" else 0
    layer = h * q + 2 * h * kv + q * h + bias + 3 * h * inter + 2 * h
    return vocab * h + layers * layer + h + (0 if c["tie_word_embeddings"] else vocab * h)


@pytest.mark.parametrize("name", sorted(PUBLISHED_B))
def test_meta_model_matches_the_architecture_and_the_model_card(name: str) -> None:
    c = _config(name)
    prof = meta_profile(c, torch.bfloat16)
    assert prof.n_params == params_by_hand(c)
    assert abs(prof.n_params / 1e9 - PUBLISHED_B[name]) <= 0.006 * PUBLISHED_B[name] + 0.005
    assert prof.weight_bytes == 2 * prof.n_params  # bf16
    kv_by_hand = 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * prof.head_dim * 2  # type: ignore[operator]
    assert prof.kv_bytes_per_token_modules == prof.kv_bytes_per_token_formula == kv_by_hand
    assert prof.head_dim == c.get("head_dim", c["hidden_size"] // c["num_attention_heads"])


def test_meta_build_equals_a_real_load_of_the_tiny_pair(tiny_pair: Any) -> None:
    for loaded in (tiny_pair.target, tiny_pair.draft):
        c = json.loads((Path(loaded.path) / "config.json").read_text())
        prof = meta_profile(c, torch.float32)
        real = memory_profile(loaded.model)
        assert prof.n_params == loaded.n_params
        assert prof.weight_bytes == real["weight_bytes"]
        assert prof.kv_bytes_per_token_modules == real["kv_bytes_per_token"]
        # the engine backends' accounting (safetensors headers, engine_memory) agrees too
        fp = model_footprint(loaded.name, dtype="float32")
        assert fp is not None and fp["n_params"] == prof.n_params
        assert fp["weight_bytes"] == prof.weight_bytes
        assert fp["kv_bytes_per_token"] == prof.kv_bytes_per_token_modules


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen2.5-7B-Instruct"])
def test_engine_footprint_kv_formula_equals_the_meta_modules(name: str, tmp_path: Path) -> None:
    """model_footprint (the engine backends' accounting from config.json) against the projection
    widths of the model it describes."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copy(SHIPPED_CONFIGS / name.replace("/", "--") / "config.json", model_dir)
    fp = model_footprint(str(model_dir), dtype="bfloat16")
    assert fp is not None and fp["weight_bytes"] is None  # no weights here: never guessed
    assert fp["kv_bytes_per_token"] == meta_profile(_config(name), torch.bfloat16).kv_bytes_per_token_modules  # fmt: skip


def _cfg(name: str) -> Any:
    path = REPO / "configs" / name
    return parse_config(read_yaml(path), str(path))


def test_llama70b_vllm_plan_by_hand() -> None:
    plan = plan_memory(_cfg("llama70b-vllm.yaml"), 80 * GIB, "--gpu-memory")
    target, draft = (_config(n) for n in ("meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"))  # fmt: skip
    w_target, w_draft = 2 * params_by_hand(target), 2 * params_by_hand(draft)
    assert w_target == 141_107_412_992  # Llama-3-70B in bf16
    assert plan.gpus == 8 and plan.usable_bytes == int(0.9 * 80 * GIB)
    assert plan.weights_per_gpu == math.ceil(w_target / 8) + math.ceil(w_draft / 8)
    # 8 KV heads over 8 ranks: one head each; 2 × layers × 1 × 128 × 2 bytes
    assert plan.kv_per_token_per_gpu == 2 * 80 * 128 * 2 + 2 * 32 * 128 * 2
    assert plan.context_tokens == 8192 and plan.fits
    left = plan.usable_bytes - plan.weights_per_gpu
    assert plan.kv_capacity_tokens == left // plan.kv_per_token_per_gpu
    assert [m.source for m in plan.models] == ["shipped copy"] * 2


def test_llama70b_two_nodes_plan_by_hand() -> None:
    """tensor parallel 4 × pipeline parallel 2 (two nodes of 4 GPUs, ray): the target's weights
    over all 8 GPUs, its KV heads over the 4 tensor ranks and its layers over the 2 stages; the
    draft (pipeline parallel 1, draft_tensor_parallel_size 4) whole on the last stage's 4 GPUs,
    so those GPUs are the plan."""
    cfg = _cfg("llama70b-vllm-2node.yaml")
    assert (cfg.engine.tensor_parallel_size, cfg.engine.pipeline_parallel_size) == (4, 2)
    assert cfg.engine.distributed_executor_backend == "ray"
    plan = plan_memory(cfg, 46068 << 20, "L40S")
    target, draft = (_config(n) for n in ("meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"))  # fmt: skip
    w_target, w_draft = 2 * params_by_hand(target), 2 * params_by_hand(draft)
    assert plan.gpus == 8 and plan.layout == "tensor parallel 4 × pipeline parallel 2"
    assert plan.weights_per_gpu == math.ceil(w_target / 8) + math.ceil(w_draft / 4)
    # target: 80 layers / 2 stages, 8 KV heads / 4 ranks = 2 each; draft: 32 layers, 2 heads each
    assert plan.kv_per_token_per_gpu == 40 * 2 * 2 * 128 * 2 + 32 * 2 * 2 * 128 * 2
    assert plan.context_tokens == 8192 and plan.fits
    assert plan.summary().startswith(
        "memory plan: 8 × 45.0 GiB GPU (L40S) as tensor parallel 4 × pipeline parallel 2, "
    )
    out = CliRunner().invoke(app, ["validate", "configs/llama70b-vllm-2node.yaml", "--gpu", "L40S", "--offline"])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "target meta-llama/Llama-3.3-70B-Instruct 131.4 GiB / 8 " in out.output
    assert "draft_model meta-llama/Llama-3.1-8B-Instruct 15.0 GiB / 4 " in out.output
    # 20.2 GiB of weights per GPU + 0.6 GiB of KV fit in 40.5 usable; on 24 GiB GPUs they do not
    assert "weights 20.2 GiB per GPU" in out.output and ": fits, " in out.output
    small = CliRunner().invoke(app, ["validate", "configs/llama70b-vllm-2node.yaml", "--gpu", "L4", "--offline"])  # fmt: skip
    assert small.exit_code == 2 and "does NOT fit" in small.output


def test_transformers_70b_needs_two_gpus_and_eagle_head_is_named() -> None:
    one = plan_memory(_cfg("llama70b.yaml"), 80 * GIB, "--gpu-memory")
    two = plan_memory(_cfg("llama70b.yaml"), 80 * GIB, "--gpu-memory", gpus=2)
    assert one.fits is False and two.fits is True
    assert one.weights_per_gpu > 140 * 10**9 and two.weights_per_gpu < 80 * GIB
    eagle = plan_memory(_cfg("llama8b-eagle3-vllm.yaml"), 24 * GIB, "--gpu-memory")
    # the 1B draft's engine needs more per GPU than the EAGLE-3 head's: it is the one planned,
    # and the head is counted and listed beside it (no longer "not counted")
    assert [m.role for m in eagle.models] == ["target", "draft_model"]
    assert [m.role for m in eagle.smaller_engines] == ["eagle3"]
    assert not any("eagle" in n for n in eagle.not_counted)
    qwen = plan_memory(_cfg("qwen2.5-7b.yaml"), 24 * GIB, "--gpu-memory", gpus=4)
    assert qwen.gpus == 1  # device: cuda, no device_map: --gpus does not spread it


def test_validate_reports_the_fit_with_numbers() -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["validate", "configs/llama70b-vllm.yaml", "--gpu-memory", "80", "--offline"])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert "memory plan: 8 × 80.0 GiB GPU" in ok.output and ": fits, " in ok.output
    l4 = runner.invoke(app, ["validate", "configs/llama70b-vllm.yaml", "--gpu", "L4", "--offline"])  # fmt: skip
    assert l4.exit_code == 0 and "8 × 22.5 GiB GPU (L4)" in l4.output  # 20.2 usable > 18.7 needed
    bad = runner.invoke(app, ["validate", "configs/llama70b-vllm.yaml", "--gpu-memory", "16", "--offline"])  # fmt: skip
    assert bad.exit_code == 2
    (line,) = [x for x in bad.output.splitlines() if x.startswith("error:")]
    assert "does NOT fit: " in line and "GiB needed per GPU" in line
    unknown = runner.invoke(app, ["validate", "configs/tiny.yaml", "--gpu", "Z9000", "--offline"])
    assert unknown.exit_code == 2 and "unknown GPU 'Z9000'" in unknown.output
    nan = runner.invoke(app, ["validate", "configs/tiny.yaml", "--gpu-memory", "nan"])
    assert nan.exit_code == 2 and "finite" in nan.output
    remote = runner.invoke(app, ["validate", "configs/tiny-openai.yaml", "--gpu", "H200", "--offline"])  # fmt: skip
    assert remote.exit_code == 0 and "no memory plan here" in remote.output  # the server's GPUs


def eagle3_params_by_hand(c: dict[str, Any]) -> int:
    """An EAGLE-3 head counted from its config.json fields, module by module as the EAGLE paper
    (arXiv 2503.01840, §3) and vLLM's llama_eagle3.py lay it out: fc 3·H_target → H (no bias);
    one Llama layer whose q/k/v read [embedding; fused state] (2·H wide), o_proj, the SwiGLU MLP;
    four RMSNorms (hidden_norm, input, post-attention, final); lm_head H → draft vocabulary. No
    embedding: the target's is used."""
    h, inter = c["hidden_size"], c["intermediate_size"]
    d = c.get("head_dim") or h // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    target_h = c.get("target_hidden_size") or h
    return 3 * target_h * h + 2 * h * (q + 2 * kv) + q * h + 3 * h * inter + 4 * h + h * c["draft_vocab_size"]  # fmt: skip


def test_eagle3_head_counted_from_its_config_by_hand() -> None:
    c = _config(EAGLE3)
    target = _config("meta-llama/Llama-3.1-8B-Instruct")
    assert c["hidden_size"] == target["hidden_size"] and c["vocab_size"] == target["vocab_size"]
    prof = eagle3_head_profile(c, torch.bfloat16)
    n = eagle3_params_by_hand(c)
    assert n == 424_689_664 and prof.n_params == n
    dv, v = c["draft_vocab_size"], c["vocab_size"]
    # bf16 parameters, d2t int64 per draft token, t2d one bool byte per target token
    assert prof.weight_bytes == 2 * n + 8 * dv + v
    # one layer's keys and values: 2 × 1 layer × 8 KV heads × 128 × 2 bytes
    assert prof.kv_bytes_per_token_modules == prof.kv_bytes_per_token_formula == 2 * 8 * 128 * 2
    h = c["hidden_size"]
    assert prof.replicated_bytes == 2 * (3 * h * h + 4 * h) + 8 * dv + v  # fc, norms, maps
    # the head without a smaller vocabulary: lm_head over the full one, no maps
    full = eagle3_head_profile({**c, "draft_vocab_size": None}, torch.bfloat16)
    assert full.n_params == n + h * (v - dv) and full.weight_bytes == 2 * full.n_params


def test_eagle3_head_in_the_speculators_form_and_a_config_lacking_a_size() -> None:
    c = _config(EAGLE3)
    layer = {k: v for k, v in c.items() if k != "draft_vocab_size"}
    spec_form = {"speculators_model_type": "eagle3", "transformer_layer_config": layer, "draft_vocab_size": c["draft_vocab_size"]}  # fmt: skip
    assert eagle3_head_profile(spec_form, torch.bfloat16) == eagle3_head_profile(c, torch.bfloat16)
    with pytest.raises(SpecbenchError, match="lacks intermediate_size"):
        eagle3_head_profile({k: v for k, v in c.items() if k != "intermediate_size"}, torch.bfloat16)  # fmt: skip


def _eagle3_only(tp: int) -> Any:
    raw = read_yaml(REPO / "configs" / "llama8b-eagle3-vllm.yaml")
    raw["speculative"] = [s for s in raw["speculative"] if s["method"] == "eagle3"]
    raw["engine"]["tensor_parallel_size"] = tp
    return parse_config(raw, "eagle3-only.yaml")


@pytest.mark.parametrize("tp", [1, 2])
def test_eagle3_plan_by_hand(tp: int) -> None:
    plan = plan_memory(_eagle3_only(tp), 80 * GIB, "--gpu-memory")
    assert [(m.role, m.name) for m in plan.models] == [("target", "meta-llama/Llama-3.1-8B-Instruct"), ("eagle3", EAGLE3)]  # fmt: skip
    assert plan.models[1].source == "shipped copy"
    c = _config(EAGLE3)
    h, dv, v = c["hidden_size"], c["draft_vocab_size"], c["vocab_size"]
    head = 2 * eagle3_params_by_hand(c) + 8 * dv + v
    whole = 2 * (3 * h * h + 4 * h) + 8 * dv + v  # fc, norms and maps on every rank
    target = 2 * params_by_hand(_config("meta-llama/Llama-3.1-8B-Instruct"))
    assert plan.weights_per_gpu == math.ceil(target / tp) + math.ceil((head - whole) / tp) + whole
    # target 32 layers, head 1 layer; 8 KV heads split over the tp ranks; bf16
    assert plan.kv_per_token_per_gpu == (32 + 1) * 2 * (8 // tp) * 128 * 2
    assert plan.needed_bytes == plan.weights_per_gpu + plan.kv_per_token_per_gpu * 8192


def test_validate_counts_the_eagle3_head() -> None:
    out = CliRunner().invoke(app, ["validate", "configs/llama8b-eagle3-vllm.yaml", "--gpu-memory", "80", "--offline"])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert f"eagle3 {EAGLE3} 0.8 GiB (0.42 B params, bfloat16, shipped copy)" in out.output
    assert "eagle3 head" not in out.output and ": fits, " in out.output
