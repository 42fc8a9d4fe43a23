"""Which model a configured name means: the shipped tiny pair, a local directory, or a hub id.

No torch, no transformers: resolving a name is string and path work (`resolve_model_path`).
Whether to stay offline is re-read from HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE on every call
(`offline_requested`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from specbench.errors import SpecbenchError
from specbench.models.tinypair import tiny_model_dir

TINY_MODEL_NAMES: dict[str, Literal["target", "draft"]] = {
    "tiny-target": "target",
    "tiny-draft": "draft",
}

# "name" or "org/name": what the hub accepts as a model repo id.
_HUB_ID_PATTERN = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
_PATH_PREFIXES = ("./", "../", "/", "~", ".\\", "..\\")
_TRUE_STRINGS = {"1", "ON", "YES", "TRUE"}


def offline_requested() -> bool:
    """True when HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set now or was set at import time."""
    from huggingface_hub import constants

    env_value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return bool(constants.HF_HUB_OFFLINE) or env_value.strip().upper() in _TRUE_STRINGS


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
        tiny_dir = tiny_model_dir(TINY_MODEL_NAMES[name])
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
