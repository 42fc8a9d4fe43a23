"""Check an exported γ schedule against the installed vLLM (`specbench schedule --format vllm`):
its `SpeculativeConfig` must know `num_speculative_tokens_per_batch_size`, and vLLM's own
validator (`vllm.v1.spec_decode.dynamic.utils.validate_and_normalize_dynamic_sd_schedule`) must
accept the ranges. vLLM is imported only here, only when installed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import warnings
from collections.abc import Sequence

from specbench.errors import SpecbenchError

FIELD = "num_speculative_tokens_per_batch_size"


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def check_with_installed_vllm(ranges: Sequence[Sequence[int]]) -> str:
    """The installed vLLM's version once it accepts the schedule; a SpecbenchError naming what it
    refused otherwise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import vllm
        from vllm.config import SpeculativeConfig

    version = str(getattr(vllm, "__version__", "?"))
    if FIELD not in {f.name for f in dataclasses.fields(SpeculativeConfig)}:
        raise SpecbenchError(
            f"the installed vLLM {version} has no speculative_config option '{FIELD}' "
            "(per-batch-size γ needs a newer vLLM): use --format json"
        )
    try:
        from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule
    except ImportError:  # the field exists but the validator moved: the field is the contract
        return version
    try:
        validate_and_normalize_dynamic_sd_schedule([list(r) for r in ranges])
    except ValueError as exc:
        raise SpecbenchError(f"the installed vLLM {version} refuses the schedule: {exc}") from None
    return version
