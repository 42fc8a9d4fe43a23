"""Load a target or draft model (hub id, local directory or the shipped tiny pair) and check that a
draft can speculate for a target.

Every failure a user can cause (a missing directory, a hub id that is not cached while offline, an
architecture transformers does not know, mismatched tokenizers) becomes one `SpecbenchError` line;
no traceback reaches the user. `transformers` and `huggingface_hub` are imported lazily so that
importing this module stays cheap.

Hub ids are resolved through the Hugging Face cache. `huggingface_hub` reads `HF_HUB_CACHE` /
`HF_HOME` once, when it is imported, so a caller that picks a cache later passes `cache_dir`;
`HF_HUB_OFFLINE` / `TRANSFORMERS_OFFLINE` are re-read on every call (see `offline_requested`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch

from specbench.config import ModelSpec
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

TINY_MODEL_NAMES: dict[str, Literal["target", "draft"]] = {
    "tiny-target": "target",
    "tiny-draft": "draft",
}

# "name" or "org/name": what the hub accepts as a model repo id.
_HUB_ID_PATTERN = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
_PATH_PREFIXES = ("./", "../", "/", "~", ".\\", "..\\")
_MAX_DETAIL_CHARS = 200
_TRUE_STRINGS = {"1", "ON", "YES", "TRUE"}


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


@dataclass(frozen=True)
class VocabInfo:
    """How a compatible pair's vocabularies line up.

    Both tokenizers map the same token to the same id for every id below `real_vocab_size`. The
    models' logits may be wider (embeddings padded for efficiency), so the engine compares and
    samples over `logits[..., :real_vocab_size]` only.
    """

    real_vocab_size: int
    target_logits_size: int
    draft_logits_size: int
    eos_token_ids: tuple[int, ...] = ()  # the target's EOS ids: decoding stops on these
    notes: tuple[str, ...] = ()  # non-fatal findings (e.g. the draft's EOS ids differ)


def offline_requested() -> bool:
    """True when HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set now or was set at import time."""
    from huggingface_hub import constants

    env_value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return bool(constants.HF_HUB_OFFLINE) or env_value.strip().upper() in _TRUE_STRINGS


def _one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception message, shortened, for embedding in a sentence."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    if len(text) > _MAX_DETAIL_CHARS:
        text = text[: _MAX_DETAIL_CHARS - 3] + "..."
    return text.rstrip(".")


def _tiny_model_dir(which: Literal["target", "draft"]) -> Path:
    """Where the shipped tiny pair lives (from `specbench.tinypair` once that module exists)."""
    try:
        from specbench.tinypair import tiny_model_dir
    except ImportError:
        return Path(__file__).parent / "assets" / "tiny-pair" / which
    return Path(tiny_model_dir(which))


def _looks_like_path(name: str) -> bool:
    """Whether a name that is not an existing directory was meant as a local path."""
    if name in {".", ".."} or name.startswith(_PATH_PREFIXES) or name.endswith(("/", "\\")):
        return True
    separators = {os.sep, os.altsep or os.sep, "\\"}
    has_separator = any(sep in name for sep in separators)
    # "org/name" contains os.sep on POSIX but is a hub id; "a/b/c" or "dir\\model" are paths.
    return has_separator and not _HUB_ID_PATTERN.fullmatch(name)


def resolve_model_path(name: str) -> str:
    """A local directory or a hub id for a configured model name.

    `tiny-target` / `tiny-draft` name the shipped tiny pair; an existing directory is used as is;
    a name that looks like a path (starts with ./, ../, /, ~ or has more than one path separator)
    but does not exist is an error; anything else is a hub id such as "org/name".
    """
    if not name.strip():
        raise SpecbenchError("the model name is empty; give a hub id or a local model directory")
    if name in TINY_MODEL_NAMES:
        tiny_dir = _tiny_model_dir(TINY_MODEL_NAMES[name])
        if not (tiny_dir / "config.json").is_file():
            raise SpecbenchError(
                f"the shipped tiny model '{name}' has not been built yet (no config.json in "
                f"{tiny_dir}); build it with scripts/train_tiny_pair.py"
            )
        return str(tiny_dir)
    local = Path(name).expanduser()
    if local.is_dir():
        return str(local)
    if local.exists():
        raise SpecbenchError(f"model path is a file, not a model directory: {name}")
    if _looks_like_path(name):
        raise SpecbenchError(f"model directory not found: {name}")
    return name


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


def _not_cached_message(repo_id: str, cache_dir: str | Path | None) -> str:
    from huggingface_hub import constants

    cache = cache_dir if cache_dir is not None else constants.HF_HUB_CACHE
    return (
        f"model '{repo_id}' is not in the local Hugging Face cache ({cache}) and the hub cannot be "
        "reached (no network, or HF_HUB_OFFLINE=1 is set); download it first "
        f"(`hf download {repo_id}`) or give a local model directory"
    )


def _hub_reachable(repo_id: str, revision: str | None) -> bool:
    """One HEAD request, without retries: False when the hub cannot be reached at all.

    Without this probe an air-gapped machine that did not set HF_HUB_OFFLINE waits through the
    hub client's retries for every optional file (minutes, even for a fully cached model).
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError

    try:
        get_hf_file_metadata(hf_hub_url(repo_id, "config.json", revision=revision))
    except HfHubHTTPError:
        return True  # the hub answered (e.g. 401 or 404); hf_hub_download reports what it said
    except Exception:  # DNS failure, refused connection, timeout, offline mode
        return False
    return True


def _hub_config_file(
    repo_id: str,
    revision: str | None,
    cache_dir: str | Path | None,
    local_files_only: bool,
) -> tuple[Path, bool]:
    """Fetch (or find in the cache) a hub model's config.json, mapping hub errors to one line.

    Returns the file and whether the rest of the load must stay on local files (offline, or the
    hub is unreachable).
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
        if not local_files_only and not _hub_reachable(repo_id, revision):
            logger.warning(
                "the Hugging Face hub is unreachable; loading '%s' from the local cache only "
                "(set HF_HUB_OFFLINE=1 to skip this check)",
                repo_id,
            )
            local_files_only = True
        config_file = hf_hub_download(
            repo_id,
            "config.json",
            revision=revision,
            cache_dir=cache_dir,
            local_files_only=local_files_only,
        )
        return Path(config_file), local_files_only
    except HFValidationError:
        raise SpecbenchError(
            f"'{repo_id}' is neither a local model directory nor a valid hub id (org/name)"
        ) from None
    except LocalEntryNotFoundError:
        raise SpecbenchError(_not_cached_message(repo_id, cache_dir)) from None
    except GatedRepoError:
        raise SpecbenchError(
            f"model '{repo_id}' is gated on the hub; accept its terms on huggingface.co and log in "
            "with `hf auth login`, or give a local model directory"
        ) from None
    except RepositoryNotFoundError:
        raise SpecbenchError(
            f"model '{repo_id}' was not found on the hub; check the id (and log in with "
            "`hf auth login` if it is private) or give a local model directory"
        ) from None
    except RevisionNotFoundError:
        raise SpecbenchError(
            f"revision '{revision}' does not exist for model '{repo_id}'; check the revision"
        ) from None
    except EntryNotFoundError:
        raise SpecbenchError(
            f"hub model '{repo_id}' has no config.json, so it is not a transformers model"
        ) from None
    except HfHubHTTPError as exc:
        raise SpecbenchError(
            f"the hub request for model '{repo_id}' failed: {_one_line(exc)}"
        ) from None
    except Exception:  # connection errors from the HTTP client, timeouts, ...
        raise SpecbenchError(_not_cached_message(repo_id, cache_dir)) from None


def _read_config_dict(config_file: Path, name: str) -> dict[str, Any]:
    try:
        data = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecbenchError(
            f"cannot read the config.json of model '{name}': {_one_line(exc)}"
        ) from None
    if not isinstance(data, dict):
        raise SpecbenchError(f"the config.json of model '{name}' is not a JSON object")
    return data


def _check_architecture(config_dict: dict[str, Any], spec: ModelSpec) -> None:
    """Fail fast, before loading weights, when transformers cannot build this architecture."""
    from transformers import __version__ as transformers_version
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    auto_map = config_dict.get("auto_map")
    has_remote_code = isinstance(auto_map, dict) and "AutoModelForCausalLM" in auto_map
    if has_remote_code and spec.trust_remote_code:
        return
    model_type = config_dict.get("model_type")
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
        return
    if has_remote_code:
        raise SpecbenchError(
            f"model '{spec.model}' uses custom code (auto_map in its config.json) that "
            f"transformers {transformers_version} does not include; set trust_remote_code: true "
            "for it in the config only if you trust that repository's code"
        )
    if not model_type:
        raise SpecbenchError(
            f"the config.json of model '{spec.model}' has no model_type, so transformers cannot "
            "tell which architecture to build"
        )
    raise SpecbenchError(
        f"model '{spec.model}' has model type '{model_type}', which transformers "
        f"{transformers_version} does not know; upgrade transformers or pick another model"
    )


def _load_failure(
    spec: ModelSpec, what: str, exc: Exception, cache_dir: str | Path | None
) -> SpecbenchError:
    """One line for an exception raised while transformers builds a model or tokenizer."""
    detail = _one_line(exc)
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
        return SpecbenchError(_not_cached_message(spec.model, cache_dir))
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
        config_file, offline = _hub_config_file(path, spec.revision, cache_dir, offline)
    _check_architecture(_read_config_dict(config_file, spec.model), spec)

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
        device = next(model.parameters()).device
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


def logits_size(model: PreTrainedModel) -> int:
    """How many logits the model emits per position (its lm_head rows, padding included)."""
    output_embeddings = model.get_output_embeddings()
    weight = getattr(output_embeddings, "weight", None)
    if isinstance(weight, torch.Tensor):
        return int(weight.shape[0])
    return int(model.config.get_text_config().vocab_size)


def eos_token_ids(loaded: LoadedModel) -> tuple[int, ...]:
    """The EOS ids of a model: its tokenizer's plus its generation config's, sorted."""
    ids: set[int] = set()
    tokenizer_eos = loaded.tokenizer.eos_token_id
    if isinstance(tokenizer_eos, int):
        ids.add(tokenizer_eos)
    generation_config = getattr(loaded.model, "generation_config", None)
    generation_eos = getattr(generation_config, "eos_token_id", None)
    if isinstance(generation_eos, int):
        ids.add(generation_eos)
    elif isinstance(generation_eos, list | tuple):
        ids.update(token_id for token_id in generation_eos if isinstance(token_id, int))
    return tuple(sorted(ids))


def _ids_to_tokens(tokenizer: PreTrainedTokenizerBase) -> dict[int, str]:
    return {token_id: token for token, token_id in tokenizer.get_vocab().items()}


def _show_token(token: str | None) -> str:
    return repr(token) if token is not None else "(no token)"


def check_pair_compatible(target: LoadedModel, draft: LoadedModel) -> VocabInfo:
    """Check that the draft shares the target's vocabulary and return how the logits line up.

    The real vocabulary is every id the tokenizer can produce (added tokens included). It must map
    id → token identically in both; logits wider than it (padded embeddings) are fine. EOS ids
    that differ only produce a warning (logged and kept in `VocabInfo.notes`): the target
    verifies every token, so outputs are unchanged and decoding stops on the target's EOS ids; a
    draft with other EOS ids merely drafts less usefully near the end of an answer.
    """
    family_hint = "use a draft from the same model family"
    target_tokens = _ids_to_tokens(target.tokenizer)
    draft_tokens = _ids_to_tokens(draft.tokenizer)
    target_vocab_size = max(target_tokens, default=-1) + 1
    draft_vocab_size = max(draft_tokens, default=-1) + 1
    if target_vocab_size != draft_vocab_size:
        raise SpecbenchError(
            f"draft and target vocabularies differ in size: target has {target_vocab_size} "
            f"tokens, draft has {draft_vocab_size}; {family_hint}"
        )
    for token_id in range(target_vocab_size):
        target_token = target_tokens.get(token_id)
        draft_token = draft_tokens.get(token_id)
        if target_token != draft_token:
            raise SpecbenchError(
                f"draft and target tokenizers differ at id {token_id}: target "
                f"{_show_token(target_token)} vs draft {_show_token(draft_token)}; {family_hint}"
            )

    sizes = {"target": logits_size(target.model), "draft": logits_size(draft.model)}
    for role, size in sizes.items():
        if size < target_vocab_size:
            raise SpecbenchError(
                f"the {role} model emits {size} logits but its tokenizer has {target_vocab_size} "
                "tokens; its output layer does not cover the vocabulary"
            )

    notes: list[str] = []
    target_eos = eos_token_ids(target)
    draft_eos = eos_token_ids(draft)
    if target_eos != draft_eos:
        notes.append(
            f"draft EOS ids {list(draft_eos)} differ from target EOS ids {list(target_eos)}; "
            "decoding stops on the target's"
        )
    if not target_eos:
        notes.append("the target has no EOS token; generation stops only at max_new_tokens")
    for note in notes:
        logger.warning(note)
    return VocabInfo(
        real_vocab_size=target_vocab_size,
        target_logits_size=sizes["target"],
        draft_logits_size=sizes["draft"],
        eos_token_ids=target_eos,
        notes=tuple(notes),
    )


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
