"""A model's memory from its config.json alone: the model built on PyTorch's meta device.

A meta tensor has a shape and a dtype and no storage, so `AutoModelForCausalLM.from_config`
under `torch.device("meta")` builds a 70B model in well under a second, allocating nothing; its
parameters then give the exact weight bytes the real load would take (`memory_profile`, the same
accounting a loaded model's memory line uses), and its key/value projections give the KV cache
per token independently of the config arithmetic (docs/theory.md §12):

    KV bytes per token = Σ over layers of (k_proj.out_features + v_proj.out_features) × element bytes

which equals 2 × layers × KV heads × head dim × element bytes when the config's fields say what
the modules are (`kv_bytes_per_token_formula` vs `kv_bytes_per_token_modules`).

An EAGLE-3 head is no transformers architecture; `eagle3_head_profile` builds it as the engines
hold it (vLLM's `llama_eagle3.py`, the EAGLE reference `cnets.py`): an `fc` fusing three target
hidden states (3 × target hidden → hidden), one Llama decoder layer whose attention reads the
input embedding and the fused state side by side (q/k/v take 2 × hidden), a `hidden_norm`, the
final norm, and its own lm_head over `draft_vocab_size` tokens with the draft→target id map `d2t`
(int64) and the target→draft mask `t2d` (bool) where that vocabulary is smaller. Its input
embedding is the target's (shared, not a second copy), so it is not counted.

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
    replicated_bytes: int = 0  # held whole by every tensor-parallel rank (an EAGLE-3 head's fc)


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


EAGLE3_REQUIRED = ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size")


def build_eagle3_head_on_meta(config: dict[str, Any], dtype: torch.dtype) -> torch.nn.ModuleDict:
    """An EAGLE-3 head of a config.json dict on the meta device (module docstring). Takes the
    EAGLE/SpecForge form (Llama fields + `draft_vocab_size`) and the speculators form (the layer's
    fields under `transformer_layer_config`)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm

    layer_fields = config.get("transformer_layer_config") or config
    fields = {k: v for k, v in layer_fields.items() if k not in ("model_type", "architectures")}
    # LlamaConfig would fill a missing size with Llama-2-7B's default: a wrong plan, not an error
    lacking = [k for k in EAGLE3_REQUIRED if not isinstance(fields.get(k), int)]
    if lacking:
        raise SpecbenchError(f"the EAGLE-3 head's config.json lacks {', '.join(lacking)}")
    try:
        cfg = LlamaConfig(**fields)
        hidden, vocab = int(cfg.hidden_size), int(cfg.vocab_size)
        draft_vocab = int(config.get("draft_vocab_size") or vocab)
        target_hidden = int(config.get("target_hidden_size") or hidden)
        with torch.device("meta"):
            layer = LlamaDecoderLayer(cfg, layer_idx=0)
            attn = layer.self_attn
            for name in ("q_proj", "k_proj", "v_proj"):
                old = getattr(attn, name)
                wide = torch.nn.Linear(2 * hidden, old.out_features, bias=old.bias is not None)
                setattr(attn, name, wide)
            head = torch.nn.ModuleDict(
                {
                    "fc": torch.nn.Linear(3 * target_hidden, hidden, bias=False),
                    "hidden_norm": LlamaRMSNorm(hidden, eps=cfg.rms_norm_eps),
                    "midlayer": layer,
                    "norm": LlamaRMSNorm(hidden, eps=cfg.rms_norm_eps),
                    "lm_head": torch.nn.Linear(hidden, draft_vocab, bias=False),
                }
            ).to(dtype)
            if draft_vocab != vocab:
                head.register_buffer("d2t", torch.empty(draft_vocab, dtype=torch.int64))
                head.register_buffer("t2d", torch.empty(vocab, dtype=torch.bool))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SpecbenchError(
            "cannot build an EAGLE-3 head from its config.json: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    return head


def eagle3_head_profile(config: dict[str, Any], dtype: torch.dtype) -> MetaProfile:
    """Weights (parameters in `dtype`, d2t/t2d at their own types) and KV per token of an EAGLE-3
    head; the fc, the norms and the maps are what a tensor-parallel rank holds whole."""
    head = build_eagle3_head_on_meta(config, dtype)
    tensors = [*head.named_parameters(), *head.named_buffers()]
    whole = ("fc.", "hidden_norm.", "norm.", "d2t", "t2d")
    c = config.get("transformer_layer_config") or config
    heads = int(c["num_attention_heads"])
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or c["hidden_size"] // heads)
    elem = next(head.parameters()).element_size()
    return MetaProfile(
        n_params=sum(p.numel() for p in head.parameters()),
        weight_bytes=sum(t.numel() * t.element_size() for _, t in tensors),
        kv_bytes_per_token_formula=2 * 1 * kv_heads * head_dim * elem,  # one layer
        kv_bytes_per_token_modules=kv_bytes_from_modules(head),
        n_layers=1,
        n_kv_heads=kv_heads,
        head_dim=head_dim,
        dtype=str(dtype).removeprefix("torch."),
        replicated_bytes=sum(
            t.numel() * t.element_size()
            for name, t in tensors
            if name.startswith(whole) or name.endswith("layernorm.weight")
        ),
    )
