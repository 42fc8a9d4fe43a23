"""Find a model's config.json — in a local directory or through the Hugging Face hub and its
cache — and check, before any weights load, that transformers can build its architecture.

Every hub failure a user can cause (an id that is not cached while offline, a gated or missing
repo, a bad revision, an unreachable hub) becomes one `SpecbenchError` line. `huggingface_hub` and
`transformers` are imported lazily, inside the functions. `huggingface_hub` reads `HF_HUB_CACHE` /
`HF_HOME` once, when it is imported, so a caller that picks a cache later passes `cache_dir`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from specbench.config import ModelSpec
from specbench.errors import SpecbenchError

logger = logging.getLogger(__name__)

_MAX_DETAIL_CHARS = 200


def one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception message, shortened, for embedding in a sentence."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    if len(text) > _MAX_DETAIL_CHARS:
        text = text[: _MAX_DETAIL_CHARS - 3] + "..."
    return text.rstrip(".")


def not_cached_message(repo_id: str, cache_dir: str | Path | None) -> str:
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


def hub_config_file(
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
        raise SpecbenchError(not_cached_message(repo_id, cache_dir)) from None
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
            f"the hub request for model '{repo_id}' failed: {one_line(exc)}"
        ) from None
    except Exception:  # connection errors from the HTTP client, timeouts, ...
        raise SpecbenchError(not_cached_message(repo_id, cache_dir)) from None


def read_config_dict(config_file: Path, name: str) -> dict[str, Any]:
    try:
        data = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecbenchError(
            f"cannot read the config.json of model '{name}': {one_line(exc)}"
        ) from None
    if not isinstance(data, dict):
        raise SpecbenchError(f"the config.json of model '{name}' is not a JSON object")
    return data


def check_architecture(config_dict: dict[str, Any], spec: ModelSpec) -> None:
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
