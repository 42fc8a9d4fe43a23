"""A model's memory from its config.json alone: the model built on PyTorch's meta device.

A meta tensor has a shape and a dtype and no storage, so `AutoModelForCausalLM.from_config`
under `torch.device("meta")` builds a 70B model in well under a second, allocating nothing; its
parameters then give the exact weight bytes the real load would take (`memory_profile`, the same
accounting a loaded model's memory line uses), and its key/value projections give the KV cache
per token independently of the config arithmetic (docs/theory.md §12):

    KV bytes per token = Σ over layers of (k_proj.out_features + v_proj.out_features) × element bytes

which equals 2 × layers × KV heads × head dim × element bytes when the config's fields say what
the modules are (`kv_bytes_per_token_formula` vs `kv_bytes_per_token_modules`).

    profile = meta_profile(json.loads(Path("config.json").read_text()), torch.bfloat16)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from specbench.errors import SpecbenchError
from specbench.models.memory import memory_profile


@dataclass(frozen=True)
class MetaProfile:
    """What a model built on the meta device costs."""

    n_params: int
    weight_bytes: int  # memory_profile: Σ numel × element size over the parameters
    kv_bytes_per_token_formula: int | None  # memory_profile: 2 × layers × KV heads × head dim × e
    kv_bytes_per_token_modules: int  # Σ (k_proj + v_proj outputs) over the layers × e
    n_layers: int | None
    n_kv_heads: int | None
    head_dim: int | None
    dtype: str


def build_on_meta(config: dict[str, Any], dtype: torch.dtype) -> torch.nn.Module:
    """The causal LM of a config.json dict, on the meta device (no storage, no initialisation)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.initialization import no_init_weights

    fields = {k: v for k, v in config.items() if k != "model_type"}
    try:
        cfg = AutoConfig.for_model(str(config.get("model_type")), **fields)
        with torch.device("meta"), no_init_weights():
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        # skipping initialisation also skips tying: a tied lm_head is the embedding, not a copy
        model.tie_weights()
    except (ValueError, KeyError, TypeError) as exc:
        raise SpecbenchError(
            f"cannot build model_type '{config.get('model_type')}' from its config.json: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    module: torch.nn.Module = model
    return module


def kv_bytes_from_modules(model: torch.nn.Module) -> int:
    """Σ over attention layers of the key and value projections' output widths × element bytes."""
    total = 0
    for name, module in model.named_modules():
        if name.endswith(("k_proj", "v_proj")) and isinstance(module, torch.nn.Linear):
            total += module.out_features * module.weight.element_size()
    return total


def meta_profile(config: dict[str, Any], dtype: torch.dtype) -> MetaProfile:
    """Weights and KV cache per token of a config.json's model in `dtype` (module docstring)."""
    model = build_on_meta(config, dtype)
    profile = memory_profile(model)  # type: ignore[arg-type]  # a PreTrainedModel at run time
    return MetaProfile(
        n_params=sum(p.numel() for p in model.parameters()),
        weight_bytes=int(profile["weight_bytes"]),
        kv_bytes_per_token_formula=profile["kv_bytes_per_token"],
        kv_bytes_per_token_modules=kv_bytes_from_modules(model),
        n_layers=profile["n_layers"],
        n_kv_heads=profile["n_kv_heads"],
        head_dim=profile["head_dim"],
        dtype=str(dtype).removeprefix("torch."),
    )
