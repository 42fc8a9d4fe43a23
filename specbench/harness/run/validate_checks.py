"""The checks of `specbench validate` (cli/validate.py lists them for the user): one run config
read as `run` reads it, its prompt sets, profile, tokenizers, endpoints and memory plan, without
running a model. Each check adds facts and warnings to a `Checked`, or raises SpecbenchError —
the config's one error.

    out = validate_config(path, offline, timeout_s, MemoryOptions(...), check_gate)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.errors import SpecbenchError

# A CI gate's thresholds file has these keys and no `target` (cli/validate.py checks it: its plan
# is put in words by report/, which the harness does not import).
GATE_KEYS = ("gate", "calibration", "plan")


@dataclass(frozen=True)
class MemoryOptions:
    """`--gpu-memory` / `--gpu`, `--gpus`, `--context-tokens`: plan memory when a GPU is named."""

    gpu_memory_gib: float | None = None
    gpu: str | None = None
    gpus: int | None = None
    context_tokens: int | None = None


@dataclass
class Checked:
    """What validating one config found: facts that passed, warnings, and the error if any."""

    path: Path
    facts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


def check_datasets(cfg: Any, base_dir: Path, out: Checked) -> None:
    from specbench.data.loader import load_workload
    from specbench.harness.serving.load.prompt_checks import check_concurrency, prompt_warnings

    prompts = {}
    for wl in cfg.workloads:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            prompts[wl.name] = load_workload(wl, cfg.seed, base_dir)  # raises for no prompts
    out.warnings += prompt_warnings(cfg, prompts)  # n above the set, concurrency above some
    check_concurrency(cfg, prompts)  # a concurrency no workload reaches: an error
    total = sum(len(p) for p in prompts.values())
    out.facts.append(f"{len(cfg.workloads)} workloads, {total} prompts")


def check_profile(cfg: Any, base_dir: Path, out: Checked) -> None:
    """The deployment profile (config/profile.py): its arrival trace reads, as `run` reads one;
    its resolved mix and load said in the facts."""
    p = cfg.profile
    if p is None:
        return
    if p.load.trace is not None:
        from specbench.harness.serving.load.arrivals import read_trace

        try:
            n = len(read_trace(p.load.trace, base_dir))
        except SpecbenchError as exc:
            raise SpecbenchError(f"profile.{exc}") from None
        out.facts.append(f"profile trace of {n} arrivals")
    out.facts.append(f"profile: {p.objective}")


def _tokenizer(name: str, revision: str | None, out: Checked, role: str) -> Any:
    """The tokenizer from local files, or None (with a warning) when a hub id is not cached."""
    from transformers import AutoTokenizer

    from specbench.models import resolve_model_path

    path = resolve_model_path(name)  # a missing local directory is an error here
    try:
        return AutoTokenizer.from_pretrained(path, revision=revision, local_files_only=True)
    except OSError:
        if Path(path).is_dir():
            raise SpecbenchError(f"{role} model '{name}': no tokenizer in {path}") from None
        out.warnings.append(
            f"{role} model '{name}' is not available locally: download it first "
            f"(huggingface-cli download {name}) or let run fetch it"
        )
        return None


def check_tokenizers(cfg: Any, out: Checked) -> None:
    needs_target = cfg.backend != "openai" or cfg.server.prompt_format == "tokens"
    target = (
        _tokenizer(cfg.target.model, cfg.target.revision, out, "target") if needs_target else None
    )
    drafts = [d for d in cfg.drafters if d.method == "model" and d.model]
    if cfg.backend == "transformers":
        for d in drafts:
            tok = _tokenizer(str(d.model), d.revision, out, "draft")
            if tok is not None and target is not None:
                tv, dv = target.get_vocab(), tok.get_vocab()
                if tv != dv:
                    inv_t = {i: t for t, i in tv.items()}
                    inv_d = {i: t for t, i in dv.items()}
                    first = min(i for i in set(inv_t) | set(inv_d) if inv_t.get(i) != inv_d.get(i))
                    raise SpecbenchError(
                        f"draft '{d.model}' and target tokenizers differ at id {first} "
                        f"({inv_t.get(first)!r} vs {inv_d.get(first)!r}); use a draft from the "
                        "same model family"
                    )
    if target is not None:
        out.facts.append("tokenizers load")


def check_endpoints(cfg: Any, timeout_s: float, out: Checked) -> None:
    import httpx2 as httpx

    server = cfg.server
    endpoints = server.endpoints or ([server] if server.url else [])
    if not endpoints:
        raise SpecbenchError("backend openai needs server.url or server.endpoints")
    for ep in endpoints:
        base = str(ep.url).rstrip("/")
        origin = base.removesuffix("/v1")
        api = origin + "/v1"
        try:
            resp = httpx.get(api + "/models", timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise SpecbenchError(
                f"cannot reach the server at {ep.url} within {timeout_s:g} s "
                f"({type(exc).__name__}); start it, fix server.url, or pass --offline"
            ) from None
        if resp.status_code in (401, 403):
            out.warnings.append(f"{ep.url}: /v1/models needs an API key (HTTP {resp.status_code})")
            continue
        if resp.status_code != 200:
            raise SpecbenchError(f"the server at {ep.url} answered HTTP {resp.status_code}")
        try:
            names = [str(m.get("id")) for m in resp.json().get("data", [])]
        except (ValueError, AttributeError):
            names = []
        if server.model and names and server.model not in names:
            raise SpecbenchError(
                f"the server at {ep.url} serves {', '.join(names)}, not '{server.model}'; "
                "set server.model"
            )
        metrics = server.metrics_url or origin + "/metrics"
        try:
            ok = httpx.get(metrics, timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            ok = False
        if not ok:
            out.warnings.append(
                f"{ep.url}: no /metrics at {metrics}: latency is measured, acceptance unavailable"
            )
        out.facts.append(f"{ep.url} (γ={ep.gamma}) reachable" + (", /metrics ok" if ok else ""))


def check_memory(cfg: Any, opts: MemoryOptions, out: Checked) -> None:
    from specbench.harness.memory.memory_plan import GIB, gpu_bytes, plan_memory

    if opts.gpu_memory_gib is not None:
        each, source = int(opts.gpu_memory_gib * GIB), "--gpu-memory"
    elif opts.gpu is not None:
        each, source = gpu_bytes(opts.gpu), opts.gpu
    else:
        return
    if cfg.backend == "openai":
        out.warnings.append("backend openai: the models run on the server; no memory plan here")
        return
    plan = plan_memory(cfg, each, source, opts.gpus, opts.context_tokens)
    if plan.fits is False:
        raise SpecbenchError(plan.summary())
    (out.facts if plan.fits else out.warnings).append(plan.summary())


def validate_config(
    path: Path,
    offline: bool,
    timeout_s: float,
    memory: MemoryOptions,
    check_gate: Callable[[Path, Checked], None],
) -> Checked:
    """Every check of one config; a SpecbenchError becomes `error` (on one line, without the
    path it starts with: the path is printed before it once, not twice). A thresholds file goes
    to `check_gate`."""
    from specbench.config import parse_config, read_yaml

    out = Checked(path)
    try:
        data = read_yaml(path)
        if "target" not in data and any(k in data for k in GATE_KEYS):
            check_gate(path, out)
            return out
        cfg = parse_config(data, str(path))
        out.facts.append(f"backend {cfg.backend}")
        check_datasets(cfg, path.parent, out)
        check_profile(cfg, path.parent, out)
        check_tokenizers(cfg, out)
        if cfg.backend == "openai":
            from specbench.harness.serving.openai import endpoints as eps

            eps.check_endpoints(eps.endpoints_of(cfg))  # distinct labels, one baseline server
            if offline:
                out.facts.append("endpoints not contacted (--offline)")
            else:
                check_endpoints(cfg, timeout_s, out)
        elif cfg.backend == "vllm":
            import importlib.util

            if importlib.util.find_spec("vllm") is None:
                out.warnings.append("vLLM is not installed here: make install-vllm")
        check_memory(cfg, memory, out)
    except SpecbenchError as exc:
        out.error = " ".join(str(exc).split()).removeprefix(f"{path}: ")
    return out
