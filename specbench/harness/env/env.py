"""env.json: what produced a run's numbers (versions, machine, device), written beside its
records by every backend. The serving backends add what their engines report about themselves
(`Backend.environment()`); the transformers runner adds torch's device, dtype and the models'
memory."""

from __future__ import annotations

import json
import platform
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.config import RunConfig
from specbench.harness.env.gpu_env import gpu_environment

if TYPE_CHECKING:
    import torch


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what `platform` knows)."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def git_commit() -> str | None:
    """specbench's git commit when it runs from a checkout."""
    import specbench

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(specbench.__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return commit or None


def pair_facts(target: Any, drafts: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(memory, tokenizers) of the loaded pair (`LoadedModel`s; a model-free drafter is None):
    each model's weights and KV cache per token, and the tokenizer fingerprints of the target
    and of the first draft model (models/fingerprint.py; a pair shares its vocabulary)."""
    from specbench.models import memory_profile
    from specbench.models.fingerprint import pair_fingerprints

    loaded = {label: m for label, m in drafts.items() if m is not None}
    memory = {
        "target": memory_profile(target.model),
        "drafts": {label: memory_profile(m.model) for label, m in loaded.items()},
    }
    first = next(iter(loaded.values()), None)
    return memory, pair_fingerprints(target.tokenizer, first.tokenizer if first else None)


def transformers_environment(
    cfg: RunConfig,
    target_device: torch.device,
    dtype: torch.dtype,
    memory: dict[str, Any] | None = None,
    tokenizers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The transformers backend's env.json: versions, device, CPU/GPU model, specbench's git
    commit, (`memory`) each model's weights and KV cache per token, and (`tokenizers`) the
    pair's tokenizer fingerprints."""
    import torch  # here, not at the top: the serving backends write env.json without torch
    import transformers

    import specbench

    gpu = torch.cuda.get_device_name(target_device) if target_device.type == "cuda" else None
    return {
        "specbench": specbench.__version__,
        "specbench_git_commit": git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_threads": torch.get_num_threads(),
        "device": str(target_device),
        "gpu": gpu,
        "cuda": torch.version.cuda,
        "dtype": str(dtype).removeprefix("torch."),
        "backend": cfg.backend,
        "memory": memory,
        "tokenizers": tokenizers,
        **gpu_environment(),  # driver, clocks, power limit, MIG, ECC, other processes
    }


def serving_environment(cfg: RunConfig, engine: dict[str, Any]) -> dict[str, Any]:
    """A serving backend's env.json: versions and machine (no torch device: the engine owns it),
    then what the backend reports about its engines (`engine`)."""
    import specbench

    base = {
        "specbench": specbench.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "backend": cfg.backend,
        "concurrency": cfg.concurrency,
    }
    return {**base, **engine}


def write_env(out_dir: Path, env: dict[str, Any]) -> None:
    (out_dir / "env.json").write_text(json.dumps(env, indent=2, default=str) + "\n")
