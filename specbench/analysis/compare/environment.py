"""Comparability of two sides: what they measured (identity: schema, models, sampling — differences
refuse the comparison without --force) and where (the environment — listed, never disqualifying;
for engine runs the server's, as env.json records it)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

from specbench.analysis.compare.samples import setting_name
from specbench.analysis.compare.sides import IdentityValue, Side, env_value
from specbench.analysis.documents.results_model import RunEnv

# the GPU's state as nvidia-smi reported it when env.json was written (harness/env/gpu_env.py)
GPU_ENV_KEYS = (
    "gpu_name",
    "gpu_driver",
    "cuda_driver",
    "gpu_memory_total_mib",
    "gpu_clock_sm_mhz",
    "gpu_clock_max_sm_mhz",
    "gpu_clock_mem_mhz",
    "gpu_power_limit_w",
    "gpu_mig_mode",
    "gpu_ecc_mode",
    "gpu_count",
    "gpu_other_processes",
)
# the machine and software a transformers run measured on (the client is the machine)
ENV_KEYS = ("device", "gpu", "cpu", "cpu_threads", "torch", "transformers", "cuda", *GPU_ENV_KEYS)
# engine runs: the server is the machine (engine version, GPU, engine flags), not the client
ENGINE_ENV_KEYS = (
    "vllm",
    "device",
    "gpu",
    "cuda",
    "torch",
    "engine_args",
    "speculative_config",
    "server_info",
    "servers",
    *GPU_ENV_KEYS,
)
ENGINE_BACKENDS = ("vllm", "openai")


@dataclass(frozen=True)
class Difference:
    """One identity key or env.json key whose value differs, each side's value as written."""

    field: str
    base: IdentityValue | JsonValue
    new: IdentityValue | JsonValue


# what a setting labelled by method carries itself: runs of different drafts compare by label
DRAFT_IDENTITY = ("draft model", "draft revision", "draft dtype", "draft tokenizer")


def identity_differences(base: Side, new: Side) -> list[Difference]:
    """Schema, models or sampling settings that differ: the runs measure different things.
    Two engine runs whose settings are labelled by method may run different drafts: their
    settings are matched by label (`matched_settings`), not refused."""
    out = []
    skip = DRAFT_IDENTITY if base.by_method and new.by_method else ()
    for k in sorted((set(base.identity) & set(new.identity)) - set(skip)):
        b, n = base.identity[k], new.identity[k]
        if b is None or n is None:
            continue  # unknown on one side (e.g. only results.json there)
        if b != n:
            out.append(Difference(k, b, n))
    return out


def matched_settings(base: Side, new: Side) -> str | None:
    """One note saying which method-labelled settings were matched by label, and which only one
    side measured (None unless both sides are labelled by method)."""
    if not (base.by_method and new.by_method):
        return None
    b = {k for g in base.groups.values() for k in g.methods}
    n = {k for g in new.groups.values() for k in g.methods}

    def names(keys: set[str]) -> str:
        return ", ".join(sorted(setting_name(k) for k in keys))

    parts = [f"settings matched by label: {names(b & n) or 'none'}"]
    if b - n:
        parts.append(f"only in {base.label}: {names(b - n)}")
    if n - b:
        parts.append(f"only in {new.label}: {names(n - b)}")
    return "; ".join(parts)


def env_keys(env: RunEnv) -> tuple[str, ...]:
    """The keys of env.json that describe the machine that did the measured work: the server's
    for engine backends (the client only sends requests), the local machine's otherwise."""
    return ENGINE_ENV_KEYS if env.backend in ENGINE_BACKENDS else ENV_KEYS


def env_differences(base: Side, new: Side) -> list[Difference]:
    """Hardware or software that differs. Listed, never disqualifying: within-run ratios stay
    comparable; absolute timing gates across it only when it is the subject."""
    keys = dict.fromkeys([*env_keys(base.env), *env_keys(new.env)])
    pairs = [(k, env_value(base.env, k), env_value(new.env, k)) for k in keys]
    return [Difference(k, b, n) for k, b, n in pairs if (b or None) != (n or None)]
