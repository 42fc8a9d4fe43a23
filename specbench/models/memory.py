"""What a loaded model costs in memory: its weights, and its KV cache per token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def memory_profile(model: PreTrainedModel) -> dict[str, Any]:
    """Weights and KV cache per token of a loaded model, from its parameters and config: the
    inputs of the report's memory line (docs/theory.md §12). Fields a config lacks are None."""
    params = list(model.parameters())
    elem = params[0].element_size() if params else None
    cfg = model.config
    layers = getattr(cfg, "num_hidden_layers", None)
    heads = getattr(cfg, "num_attention_heads", None)
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    hidden = getattr(cfg, "hidden_size", None)
    head_dim = getattr(cfg, "head_dim", None) or (hidden // heads if hidden and heads else None)
    kv = (
        2 * layers * kv_heads * head_dim * elem
        if layers and kv_heads and head_dim and elem
        else None
    )
    return {
        "weight_bytes": int(sum(p.numel() * p.element_size() for p in params)),
        "n_layers": layers,
        "n_kv_heads": kv_heads,
        "head_dim": head_dim,
        "kv_bytes_per_token": kv,  # keys and values, every layer
    }
