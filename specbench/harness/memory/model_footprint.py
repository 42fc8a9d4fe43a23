"""A model's memory without loading it: weights and KV cache per token from its config.json and
the headers of its safetensors files (docs/theory.md §12).

The engine backends (`backend: vllm` / `openai`) never load the models into specbench, so the
draft's memory that the transformers runner measures from loaded parameters
(`models.memory_profile`) is computed here instead, with the same keys plus `n_params`, `dtype`
and `source: "computed"`:

- weights: the parameter count from the safetensors headers (read through the safetensors
  library's `safe_open`, which maps the file and reads no tensor), or the
  index's `metadata.total_size` when the shards are not local, times the bytes of the dtype the
  engine serves in (the stored dtype when unknown or `auto`);
- KV bytes per token: 2 (K and V) × layers × KV heads × head dim × bytes of the KV-cache dtype.

A model is found when its name is a local directory, the shipped tiny pair, or already in the
Hugging Face hub cache; nothing is downloaded. Anything missing is None.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open

from specbench.errors import SpecbenchError

# bytes per element, by safetensors dtype and by torch / config dtype name
ELEMENT_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
    "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "float64": 8, "float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
}  # fmt: skip
TORCH_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def local_model_dir(name: str, revision: str | None = None) -> Path | None:
    """The directory holding `name`'s config.json: a local directory, the shipped tiny pair, or
    the hub cache's snapshot (never a download); None when not on this machine."""
    from specbench.models import resolve_model_path

    try:
        path = resolve_model_path(name)
    except SpecbenchError:
        return None
    local = Path(path)
    if (local / "config.json").is_file():
        return local
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(path, "config.json", revision=revision)
    except Exception:  # not a valid repo id, no cache: nothing local
        return None
    return Path(cached).parent if isinstance(cached, str) else None


def safetensors_header(path: Path) -> dict[str, Any]:
    """Tensor name → {dtype, shape, nbytes} from a .safetensors file's header, through the
    safetensors library (`safe_open` reads the header only; no tensor is loaded). `nbytes` is None
    for a dtype whose element size is not in ELEMENT_BYTES (never guessed as 0)."""
    out: dict[str, Any] = {}
    with safe_open(str(path), framework="numpy") as fh:
        for name in fh.keys():  # noqa: SIM118 (a safe_open handle is not a mapping)
            tensor = fh.get_slice(name)
            shape, dtype = [int(d) for d in tensor.get_shape()], str(tensor.get_dtype())
            out[name] = {
                "dtype": dtype,
                "shape": shape,
                "nbytes": math.prod(shape) * ELEMENT_BYTES[dtype]
                if dtype in ELEMENT_BYTES
                else None,
            }
    return out


def _weights(model_dir: Path) -> tuple[int | None, int | None, str | None]:
    """(parameter count, stored bytes, dominant stored dtype) from the safetensors headers; the
    index's total size alone when the shards are not here."""
    files = sorted(model_dir.glob("*.safetensors"))
    index = model_dir / "model.safetensors.index.json"
    shards: set[str] = set()
    total_size = None
    if index.is_file():
        meta = json.loads(index.read_text())
        shards = set((meta.get("weight_map") or {}).values())
        total_size = (meta.get("metadata") or {}).get("total_size")
    if files and (not shards or shards <= {f.name for f in files}):
        n_params, n_bytes = 0, 0
        sized = True  # every tensor's dtype has a known element size
        by_dtype: dict[str, int] = {}
        for f in files if not shards else [model_dir / s for s in sorted(shards)]:
            for t in safetensors_header(f).values():
                numel = math.prod(t["shape"])
                n_params += numel
                sized = sized and t["nbytes"] is not None
                n_bytes += t["nbytes"] or 0
                by_dtype[t["dtype"]] = by_dtype.get(t["dtype"], 0) + numel
        main = max(by_dtype, key=lambda k: by_dtype[k]) if by_dtype else None
        return n_params, n_bytes if sized else None, TORCH_NAMES.get(main, main) if main else None
    return None, int(total_size) if total_size else None, None


def model_footprint(
    name: str,
    *,
    revision: str | None = None,
    dtype: str | None = None,
    kv_dtype: str | None = None,
) -> dict[str, Any] | None:
    """The memory profile of a model found locally (module docstring); None when its config.json
    is not on this machine. `dtype`: the dtype the engine serves the weights in (None or "auto":
    as stored); `kv_dtype`: the KV cache's (None or "auto": the weights')."""
    model_dir = local_model_dir(name, revision)
    if model_dir is None:
        return None
    try:
        cfg = json.loads((model_dir / "config.json").read_text())
        n_params, stored_bytes, stored = _weights(model_dir)
    except (OSError, ValueError, KeyError, TypeError, SafetensorError):
        return None
    cfg = cfg.get("text_config") or cfg  # multimodal configs nest the language model's
    stored_name = stored or cfg.get("dtype") or cfg.get("torch_dtype")
    served = dtype if dtype and dtype != "auto" else stored_name
    elem = ELEMENT_BYTES.get(str(served)) if served else None
    kv_elem = ELEMENT_BYTES.get(str(kv_dtype)) if kv_dtype and kv_dtype != "auto" else elem
    weight_bytes = n_params * elem if n_params is not None and elem else None
    if weight_bytes is None and stored_bytes is not None:
        stored_elem = ELEMENT_BYTES.get(str(stored_name)) if stored_name else None
        # the index's size is in the stored dtype: rescale to the served one when both are known
        weight_bytes = stored_bytes * elem // stored_elem if elem and stored_elem else stored_bytes
    layers = cfg.get("num_hidden_layers")
    heads = cfg.get("num_attention_heads")
    kv_heads = cfg.get("num_key_value_heads") or heads
    hidden = cfg.get("hidden_size")
    head_dim = cfg.get("head_dim") or (hidden // heads if hidden and heads else None)
    kv = (
        2 * layers * kv_heads * head_dim * kv_elem
        if layers and kv_heads and head_dim and kv_elem
        else None
    )
    return {
        "weight_bytes": weight_bytes,
        "n_params": n_params,
        "n_layers": layers,
        "n_kv_heads": kv_heads,
        "head_dim": head_dim,
        "kv_bytes_per_token": kv,  # keys and values, every layer
        "dtype": served,
        "source": "computed",
    }
