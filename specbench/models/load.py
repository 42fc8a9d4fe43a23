"""Load a target or draft model (hub id, local directory or the shipped tiny pair) ready for
decoding: eval mode, gradients off, on the picked device and dtype.

    loaded = load_model(ModelSpec(model="tiny-target", dtype="float32", device="cpu"))

Every failure a user can cause (a missing directory, an architecture transformers does not know,
out of memory, a missing accelerate for device_map) becomes one `SpecbenchError` line; no traceback
reaches the user. `transformers` is imported lazily, inside `load_model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from specbench.config import ModelSpec
from specbench.errors import SpecbenchError
from specbench.models.hub import (
    check_architecture,
    hub_config_file,
    not_cached_message,
    one_line,
    read_config_dict,
)
from specbench.models.resolve import offline_requested, resolve_model_path

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for decoding: in eval mode, gradients off, on `device`."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    path: str  # the local directory or hub id it was loaded from
    device: torch.device  # where its inputs go (the first parameter's device under a device_map)
    dtype: torch.dtype
    name: str  # the name the config gave (e.g. "tiny-target", "Qwen/Qwen2.5-0.5B")
    n_params: int


def pick_device(spec_device: str) -> torch.device:
    """The torch device for a config's `device`: "auto" is cuda when available, else cpu."""
    wanted = spec_device.strip().lower()
    if wanted == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(wanted)
    except (RuntimeError, ValueError):
        raise SpecbenchError(
            f"unknown device '{spec_device}'; use auto, cpu, cuda or cuda:N"
        ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SpecbenchError(
                f"device '{spec_device}' was requested but CUDA is not available; use device: cpu"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise SpecbenchError(
                f"device '{spec_device}' does not exist: only {torch.cuda.device_count()} "
                "CUDA device(s) are visible"
            )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise SpecbenchError(
            f"device '{spec_device}' was requested but MPS is not available; use device: cpu"
        )
    return device


def pick_dtype(spec_dtype: str, device: torch.device) -> torch.dtype:
    """The weight dtype for a config's `dtype`.

    "auto" is bfloat16 on CUDA (float16 on GPUs without bfloat16 support) and float32 everywhere
    else, since half precision is slow or unsupported for matmuls on most CPUs. An explicit
    "float32" / "float16" / "bfloat16" is used as given.
    """
    if spec_dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    explicit = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    if spec_dtype not in explicit:
        raise SpecbenchError(
            f"unknown dtype '{spec_dtype}'; use auto, float32, float16 or bfloat16"
        )
    return explicit[spec_dtype]


def offloaded(placement: Mapping[str, int | str | torch.device]) -> list[str]:
    """The modules a device_map put in host memory or on disk beside a GPU (empty when none, or
    when no module is on a GPU: a CPU-only machine maps everything to "cpu", which is no offload).

    accelerate's `device_map: auto` fills the GPUs and then offloads the rest rather than fail;
    a forward of such a model streams those layers over PCIe each time, so its timings would
    measure the offload, not the GPU the run reports.
    """
    where = {k: str(v) for k, v in placement.items()}
    on_host = [k for k, v in where.items() if v in ("cpu", "disk", "meta")]
    return on_host if len(on_host) < len(where) else []


def _load_failure(
    spec: ModelSpec, what: str, exc: Exception, cache_dir: str | Path | None
) -> SpecbenchError:
    """One line for an exception raised while transformers builds a model or tokenizer."""
    detail = one_line(exc)
    if isinstance(exc, torch.OutOfMemoryError):
        return SpecbenchError(
            f"out of memory while loading the {what} of '{spec.model}'; use a smaller dtype, "
            "a smaller model or device_map: auto"
        )
    if "Unrecognized configuration class" in detail:
        return SpecbenchError(
            f"model '{spec.model}' has no causal language-model head in transformers "
            "(AutoModelForCausalLM); speculative decoding needs a decoder-only model"
        )
    if "couldn't connect" in detail or isinstance(exc, ConnectionError):
        return SpecbenchError(not_cached_message(spec.model, cache_dir))
    return SpecbenchError(f"could not load the {what} of '{spec.model}': {detail}")


def load_model(
    spec: ModelSpec,
    *,
    cache_dir: str | Path | None = None,
    local_files_only: bool | None = None,
) -> LoadedModel:
    """Load a spec's model and tokenizer, in eval mode on the picked device and dtype.

    `cache_dir` overrides the Hugging Face cache for hub ids (default: the cache huggingface_hub
    chose at import time). `local_files_only=None` means "offline iff HF_HUB_OFFLINE is set".
    `trust_remote_code` is passed through from the spec, so it stays False unless a config sets it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import is_accelerate_available

    path = resolve_model_path(spec.model)
    offline = offline_requested() if local_files_only is None else local_files_only
    device = pick_device(spec.device)
    dtype = pick_dtype(spec.dtype, device)
    if spec.device_map is not None and not is_accelerate_available():
        raise SpecbenchError(
            f"device_map '{spec.device_map}' needs the accelerate package; "
            "pip install accelerate or remove device_map"
        )

    if Path(path).is_dir():
        config_file = Path(path) / "config.json"
        if not config_file.is_file():
            raise SpecbenchError(
                f"{path} has no config.json, so it is not a transformers model directory "
                "(expected a folder written by save_pretrained)"
            )
    else:
        config_file, offline = hub_config_file(path, spec.revision, cache_dir, offline)
    check_architecture(read_config_dict(config_file, spec.model), spec)

    common: dict[str, Any] = {
        "revision": spec.revision,
        "trust_remote_code": spec.trust_remote_code,
        "cache_dir": cache_dir,
        "local_files_only": offline,
    }
    try:
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, device_map=spec.device_map, **common
        )
    except Exception as exc:
        raise _load_failure(spec, "weights", exc, cache_dir) from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **common)
    except Exception as exc:
        raise _load_failure(spec, "tokenizer", exc, cache_dir) from None

    if spec.device_map is None:
        try:
            module: torch.nn.Module = model  # typed as Module: transformers' `to` confuses mypy
            module.to(device)  # in place
        except Exception as exc:
            raise _load_failure(spec, f"weights onto {device}", exc, cache_dir) from None
    else:
        # the input device: accelerate's hooks bring every output back to it (docs/configuration.md)
        device = next(model.parameters()).device
        host = offloaded(getattr(model, "hf_device_map", None) or {})
        if host:
            raise SpecbenchError(
                f"device_map '{spec.device_map}' could not fit '{spec.model}' on the visible GPUs "
                f"and put {len(host)} of its modules in host memory or on disk ({host[0]}, …): "
                "its timings would measure the offload; use more GPUs, a smaller dtype or "
                "model (specbench validate CONFIG --gpu-memory GIB --gpus N says what fits)"
            )
    model.eval()
    model.requires_grad_(False)
    n_params = sum(parameter.numel() for parameter in model.parameters())
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        path=path,
        device=device,
        dtype=dtype,
        name=spec.model,
        n_params=n_params,
    )
