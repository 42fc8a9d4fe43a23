"""The draft's memory on an engine run: KV capacity as vLLM reports it (/metrics and the
in-process engine object) and model footprints computed from config.json + safetensors headers."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from safetensors.numpy import save_file

from specbench.harness.memory.model_footprint import model_footprint, safetensors_header
from specbench.harness.serving.metrics.engine_memory import (
    earlier_capacity,
    engine_memory,
    kv_capacity_from_engine,
    kv_capacity_from_samples,
    with_earlier_capacity,
)
from specbench.harness.serving.metrics.metrics import parse_prometheus
from specbench.models.tinypair import tiny_model_dir

# vLLM's cache_config_info as two data-parallel engines print it (labels abridged): the front
# end's CacheConfig, so both carry the same num_gpu_blocks
CACHE_INFO = """\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",gpu_memory_utilization="0.9",\
kv_cache_size_tokens="None",num_cpu_blocks="None",num_gpu_blocks="2048"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="1",gpu_memory_utilization="0.9",\
kv_cache_size_tokens="None",num_cpu_blocks="None",num_gpu_blocks="2048"} 1.0
vllm:num_requests_running{engine="0"} 0.0
"""


def test_kv_capacity_from_cache_config_info() -> None:
    cap = kv_capacity_from_samples(parse_prometheus(CACHE_INFO))
    assert cap == {
        "tokens": 2048 * 16,  # one engine's labels, not the sum over label sets
        "num_gpu_blocks": 2048,
        "block_size": 16,
        "kv_cache_size_tokens": None,
    }
    newer = CACHE_INFO.replace('kv_cache_size_tokens="None"', 'kv_cache_size_tokens="32000"')
    assert kv_capacity_from_samples(parse_prometheus(newer))["kv_cache_size_tokens"] == 32000  # type: ignore[index]
    profiling = CACHE_INFO.replace('num_gpu_blocks="2048"', 'num_gpu_blocks="None"')
    assert kv_capacity_from_samples(parse_prometheus(profiling)) is None
    assert (
        kv_capacity_from_samples(parse_prometheus('vllm:num_requests_running{e="0"} 0\n')) is None
    )


def test_kv_capacity_from_the_in_process_engine() -> None:
    v1 = SimpleNamespace(
        llm_engine=SimpleNamespace(
            vllm_config=SimpleNamespace(
                cache_config=SimpleNamespace(
                    num_gpu_blocks=100, block_size=32, kv_cache_size_tokens=3000
                )
            )
        )
    )
    assert kv_capacity_from_engine(v1) == {
        "tokens": 3200,
        "num_gpu_blocks": 100,
        "block_size": 32,
        "kv_cache_size_tokens": 3000,
    }
    older = SimpleNamespace(
        llm_engine=SimpleNamespace(cache_config=SimpleNamespace(num_gpu_blocks=10, block_size=16))
    )
    assert kv_capacity_from_engine(older)["tokens"] == 160  # type: ignore[index]
    unset = SimpleNamespace(
        llm_engine=SimpleNamespace(cache_config=SimpleNamespace(num_gpu_blocks=None, block_size=16))
    )
    assert kv_capacity_from_engine(unset) is None
    assert kv_capacity_from_engine(object()) is None


def _n_params(model_dir: Path) -> int:
    """The parameter count of the model as transformers loads it (an independent count: the
    footprint reads only the file headers)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    return sum(p.numel() for p in model.parameters())


def test_footprint_of_the_tiny_pair_from_its_files() -> None:
    t, d = model_footprint("tiny-target"), model_footprint("tiny-draft")
    assert t is not None and d is not None
    # 2 (K, V) × layers × KV heads × head_dim × 4 bytes (float32), as config.json says
    assert t["kv_bytes_per_token"] == 2 * 10 * 5 * 32 * 4
    assert d["kv_bytes_per_token"] == 2 * 1 * 3 * 32 * 4
    assert t["n_params"] == _n_params(tiny_model_dir("target"))
    assert t["weight_bytes"] == 4 * t["n_params"] and t["dtype"] == "float32"
    assert d["weight_bytes"] == 4 * _n_params(tiny_model_dir("draft"))
    assert t["source"] == "computed"
    # served in bfloat16 with an fp8 KV cache: half the weights, a quarter of the KV
    h = model_footprint("tiny-draft", dtype="bfloat16", kv_dtype="fp8")
    assert h is not None
    assert h["weight_bytes"] == d["weight_bytes"] // 2
    assert h["kv_bytes_per_token"] == d["kv_bytes_per_token"] // 4


def _config(path: Path, **over: object) -> None:
    cfg = {
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "hidden_size": 256,
        "torch_dtype": "bfloat16",
        **over,
    }
    (path / "config.json").write_text(json.dumps(cfg))


def test_sharded_and_index_only_weights(tmp_path: Path) -> None:
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    _config(sharded)
    save_file({"a": np.zeros((3, 5), np.float16)}, str(sharded / "m-1.safetensors"))
    save_file({"b": np.zeros((7,), np.float16)}, str(sharded / "m-2.safetensors"))
    index = {
        "metadata": {"total_size": 44},
        "weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors"},
    }
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    assert safetensors_header(sharded / "m-1.safetensors")["a"]["shape"] == [3, 5]
    fp = model_footprint(str(sharded))
    assert fp is not None
    assert (fp["n_params"], fp["weight_bytes"], fp["dtype"]) == (22, 44, "float16")
    # head_dim = hidden / heads = 32; 2 × 4 layers × 2 KV heads × 32 × 2 bytes
    assert fp["kv_bytes_per_token"] == 2 * 4 * 2 * 32 * 2

    index_only = tmp_path / "index-only"  # the shards are not on this machine
    index_only.mkdir()
    _config(index_only)
    (index_only / "model.safetensors.index.json").write_text(json.dumps(index))
    fp = model_footprint(str(index_only), dtype="float32")
    assert fp is not None and fp["n_params"] is None
    assert fp["weight_bytes"] == 44 * 4 // 2  # total_size in bfloat16, served in float32

    config_only = tmp_path / "config-only"
    config_only.mkdir()
    _config(config_only, head_dim=64)
    fp = model_footprint(str(config_only))
    assert fp is not None and fp["weight_bytes"] is None
    assert fp["kv_bytes_per_token"] == 2 * 4 * 2 * 64 * 2


def test_models_not_on_this_machine() -> None:
    assert model_footprint("as served") is None
    assert model_footprint("no-such-org/no-such-model-xyz") is None
    assert engine_memory("no-such-org/no-such-model-xyz", ["as served"], []) is None


def test_engine_memory_marks_its_source() -> None:
    computed = engine_memory("tiny-target", ["tiny-draft"], [])
    assert computed is not None and computed["source"] == "computed"
    assert computed["kv_capacity"] is None
    assert computed["drafts"]["tiny-draft"]["kv_bytes_per_token"] == 768
    caps = [
        {"gamma": 3, "label": "x", "endpoint": None, "tokens": 900},
        {"gamma": 0, "label": "", "endpoint": None, "tokens": 1000},
    ]
    reported = engine_memory("as served", [], caps)
    assert reported is not None and reported["source"] == "engine"
    assert [c["gamma"] for c in reported["kv_capacity"]] == [0, 3]
    assert reported["target"] is None and reported["drafts"] == {}


@pytest.mark.parametrize("spec_model", [None, "tiny-draft"])
def test_vllm_backend_keeps_what_its_engines_report(spec_model: str | None) -> None:
    """The in-process path without vLLM: a backend object given a fake started engine."""
    from specbench.config import parse_config
    from specbench.harness.serving.vllm.vllm_backend import VllmBackend
    from specbench.setting import Setting

    cfg = parse_config(
        {
            "backend": "vllm",
            "target": {"model": "tiny-target"},
            "draft": {"model": "tiny-draft"},
            "speculative": {"model": spec_model} if spec_model else {},
            "gammas": [2],
            "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
        }
    )
    b = object.__new__(VllmBackend)  # skip __init__: it imports vLLM
    b.cfg, b.specs = cfg, {"draft_model": cfg.speculative}
    b.spec_models = {"draft_model": str(tiny_model_dir("draft"))}
    b.kv_capacity, b.served_dtype = {}, None

    def engine(blocks: int) -> SimpleNamespace:
        cc = SimpleNamespace(num_gpu_blocks=blocks, block_size=16)
        mc = SimpleNamespace(dtype="torch.bfloat16")
        return SimpleNamespace(
            llm_engine=SimpleNamespace(
                vllm_config=SimpleNamespace(cache_config=cc), model_config=mc
            )
        )

    b._note_memory(Setting(0, ""), engine(100))
    b._note_memory(Setting(2, "draft_model"), engine(90))
    mem = b.memory(b.served_dtype)
    assert mem is not None and mem["source"] == "engine"
    assert [(c["gamma"], c["tokens"]) for c in mem["kv_capacity"]] == [(0, 1600), (2, 1440)]
    assert mem["drafts"]["tiny-draft"]["dtype"] == "bfloat16"  # what "auto" became
    assert mem["target"]["kv_bytes_per_token"] == 2 * 10 * 5 * 32 * 2


def test_resume_keeps_the_capacity_of_settings_not_started_again(tmp_path: Path) -> None:
    base = {"gamma": 0, "label": "", "endpoint": "http://a", "tokens": 1000}
    spec = {"gamma": 2, "label": "γ=2", "endpoint": "http://b", "tokens": 900}
    (tmp_path / "env.json").write_text(json.dumps({"memory": {"kv_capacity": [base]}}))
    earlier = earlier_capacity(tmp_path)
    assert earlier == [base]
    now = {"backend": "openai", "memory": {"source": "engine", "kv_capacity": [spec]}}
    merged = with_earlier_capacity(now, earlier)
    assert merged["memory"]["kv_capacity"] == [base, spec]
    # a setting started again reports afresh; nothing earlier: env.json as it is
    again = {"memory": {"source": "engine", "kv_capacity": [{**base, "tokens": 990}]}}
    assert with_earlier_capacity(again, earlier) == again
    assert with_earlier_capacity({"memory": None}, []) == {"memory": None}
    plain = with_earlier_capacity({"memory": None}, earlier)
    assert plain["memory"]["source"] == "engine" and plain["memory"]["kv_capacity"] == [base]
    assert earlier_capacity(tmp_path / "missing") == []


def test_a_dtype_of_unknown_size_leaves_the_stored_bytes_unknown(tmp_path: Path) -> None:
    from specbench.harness.memory.model_footprint import _weights

    _config(tmp_path)
    save_file({"a": np.zeros((3, 5), np.uint16)}, str(tmp_path / "model.safetensors"))
    header = safetensors_header(tmp_path / "model.safetensors")
    assert header["a"] == {"dtype": "U16", "shape": [3, 5], "nbytes": None}
    n_params, stored_bytes, _ = _weights(tmp_path)
    assert n_params == 15 and stored_bytes is None  # not 0: the size is not guessed


def test_vllm_backend_settings_for_several_methods() -> None:
    """`speculative:` as a list: one engine per method × γ, each with its own speculative_config
    (without starting vLLM: the backend object is built by hand, as above)."""
    from specbench.config import parse_config, speculative_label, speculative_specs
    from specbench.harness.serving.vllm.vllm_backend import VllmBackend

    cfg = parse_config(
        {
            "backend": "vllm",
            "target": {"model": "tiny-target"},
            "draft": {"model": "tiny-draft"},
            "speculative": [
                {"method": "draft_model", "num_speculative_tokens": [2, 4]},
                {
                    "method": "ngram",
                    "num_speculative_tokens": [4],
                    "options": {"prompt_lookup_min": 2, "prompt_lookup_max": 3},
                },
            ],
            "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
        }
    )
    b = object.__new__(VllmBackend)
    b.cfg = cfg
    b.specs = {speculative_label(s): s for s in speculative_specs(cfg.speculative)}
    b.spec_models = {"draft_model": "/weights/draft", "ngram": None}
    b.schedule_of, b.schedule = None, None
    got = [(s.gamma, s.drafter, s.method, s.label) for s in b.settings()]
    assert got == [
        (0, "", "none", "baseline"),
        (2, "draft_model", "draft_model", "draft_model γ=2"),
        (4, "draft_model", "draft_model", "draft_model γ=4"),
        (4, "ngram", "ngram", "ngram γ=4"),
    ]
    assert b.speculative_config(4, "ngram") == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 3,
    }
    assert b.speculative_config(2, "draft_model") == {
        "method": "draft_model",
        "num_speculative_tokens": 2,
        "model": "/weights/draft",
    }
    confs = b.speculative_configs()
    assert isinstance(confs, list)
    assert [c["num_speculative_tokens"] for c in confs] == [[2, 4], [4]]
