"""`specbench validate` as one typed request: the configs and how to check them, and the one
function that checks each (harness/run/validate_checks.py).

    request = ValidateRequest(configs=[...], offline=False, ...)
    results = validate_configs(request, check_gate)   # one `Checked` per config, in order

A CI gate's thresholds file is checked by `check_gate`, which the command hands in: its plan is
put in words by report/ (the MDE, the plan's size), which the harness does not import. The
fields are the command's options under the same names, without defaults (the command's options
state them once, and `--help` shows them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specbench.harness.run.validate_checks import Checked, MemoryOptions, validate_config


@dataclass(frozen=True, kw_only=True)
class ValidateRequest:
    """What `specbench validate` was asked: the configs, the network (--offline, --timeout),
    --strict, and the GPU to plan memory for (--gpu-memory or --gpu, --gpus, --context-tokens)."""

    configs: list[Path]
    offline: bool
    strict: bool
    timeout: float
    gpu_memory: float | None
    gpu: str | None
    gpus: int | None
    context_tokens: int | None

    @property
    def memory(self) -> MemoryOptions:
        return MemoryOptions(self.gpu_memory, self.gpu, self.gpus, self.context_tokens)


def validate_configs(
    request: ValidateRequest, check_gate: Callable[[Path, Checked], None]
) -> list[Checked]:
    """Each config checked; with --strict a valid config's first warning is its error."""
    r = request
    results = [validate_config(p, r.offline, r.timeout, r.memory, check_gate) for p in r.configs]
    if r.strict:
        for c in results:
            if c.error is None and c.warnings:
                c.error = f"{c.warnings[0]} (--strict)"
    return results
