"""`specbench validate CONFIG...`: check a run configuration without running a model.

    specbench validate configs/tiny.yaml
    specbench validate configs/*.yaml --offline      # no network: endpoints are not contacted

Checks, in order (the first failure of a config is its one `error:` line; exit code 2):
- the file parses and every key and value is within its bounds (the same `RunConfig` `run` uses);
- every workload's dataset loads, its columns are there, and the prompts available cover the
  prompts asked (fewer is a warning: `run` uses all of them); engine backends: a concurrency
  above every workload's prompt count is an error, above some workloads' a warning
  (`harness.serving.load.prompt_checks`);
- tokenizers load from the local files (the shipped tiny pair, a local directory, or the Hugging
  Face cache) and the draft's vocabulary is the target's. A hub id that is not in the local cache
  is a warning, not an error: `run` would download it (or fail offline) — `--strict` makes every
  warning an error;
- backend `openai`: each endpoint answers `/v1/models` within `--timeout` seconds and serves the
  configured model; `/metrics` is scraped once (absent: a warning, acceptance is then unavailable).
  `--offline` skips these network checks (said so in the output);
- backend `vllm`: vLLM is importable (absent: a warning naming `make install-vllm`);
- with `--gpu-memory GIB` or `--gpu NAME`: the memory plan (`harness.memory.memory_plan`): every model
  built from its config.json on the meta device, weights and KV cache per GPU against the GPU's
  memory — a plan that does not fit is an error, with the numbers.

    specbench validate configs/llama70b-vllm.yaml --gpu-memory 80

A CI gate's thresholds file (`ci/specbench-thresholds.yaml`: a mapping with `gate`, `calibration`
or `plan` and no `target`) is checked as `compare --thresholds` reads it, and its `plan` with its
`calibration` (docs/ci.md): a plan whose gating rows cannot detect their minimum effects is an
error (exit 2), naming the MDE and pointing at `specbench compare --plan`.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from specbench.cli.exit_codes import EXIT_BAD_INPUT, one_line
from specbench.cli.options import JsonOption
from specbench.errors import SpecbenchError

DEFAULT_TIMEOUT_S = 3.0


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


GATE_KEYS = ("gate", "calibration", "plan")


def check_gate(path: Path, out: Checked) -> None:
    """A CI gate's thresholds file: its keys, and whether its plan detects its minimum effects."""
    from specbench.analysis.compare.plan import check_plan
    from specbench.harness.compare.compare_inputs import load_thresholds
    from specbench.report.compare.compare_gate import fmt_effect, plan_lines

    th = load_thresholds(path, {})
    out.facts.append(f"CI gate thresholds, gating {', '.join(th.gate)}")
    try:
        plan = check_plan(th)
    except ValueError as exc:
        raise SpecbenchError(str(exc)) from None
    if plan is None:
        out.warnings.append(
            "no plan: nothing says the gate can see its minimum effects (compare exits 5 when "
            "it cannot); size it with `specbench compare --plan --write-plan`"
        )
        return
    short = [r for r in plan.rows if not r.detects]
    if short:
        what = "; ".join(
            f"{r.metric} MDE {fmt_effect(r.metric, r.mde)} > minimum "
            f"{fmt_effect(r.metric, r.minimum)}" + (f" ({r.note})" if r.note else "")
            for r in short
        )
        raise SpecbenchError(
            f"its plan ({plan.prompts} prompts, {plan.runs_per_side} runs per side) cannot detect "
            f"its minimum effects: {what}; size it with `specbench compare --plan --thresholds "
            f"{path} --write-plan`"
        )
    out.facts.append(plan_lines(plan)[0])


def validate_config(
    path: Path, offline: bool, timeout_s: float, memory: MemoryOptions | None = None
) -> Checked:
    """Every check of one config; a SpecbenchError becomes `error`."""
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
        check_memory(cfg, memory or MemoryOptions(), out)
    except SpecbenchError as exc:  # the path is printed before it once: not twice
        out.error = one_line(str(exc)).removeprefix(f"{path}: ")
    return out


def validate(
    configs: Annotated[
        list[Path], typer.Argument(help="Run configurations (YAML) to check.", show_default=False)
    ],
    offline: Annotated[
        bool,
        typer.Option("--offline", help="Contact no server (skip the endpoint checks)."),
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Treat every warning as an error.")
    ] = False,
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="Seconds to wait for each endpoint.", min=0.1, max=60.0),
    ] = DEFAULT_TIMEOUT_S,
    gpu_memory: Annotated[
        float | None,
        typer.Option(
            "--gpu-memory",
            help="GiB of memory per GPU: plan whether the models fit (built on the meta device).",
            min=1.0,
            max=4096.0,
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="A GPU by name (H100-80GB, A100-40GB, L4, …) instead."),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(
            "--gpus",
            help="GPUs of a transformers run (vllm: tensor × pipeline parallel).",
            min=1,
            max=1024,
        ),
    ] = None,
    context_tokens: Annotated[
        int | None,
        typer.Option(
            "--context-tokens",
            help="Tokens of KV cache to plan for (default: vllm max_model_len; else 8192).",
            min=1,
            max=10_000_000,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check configs without running a model: keys and bounds, datasets, tokenizers, endpoints,
    and with --gpu-memory / --gpu whether the models fit.

    Exit codes: 0 every config is valid; 2 at least one is not (one `error:` line each)."""
    memory = MemoryOptions(gpu_memory, gpu, gpus, context_tokens)
    results = [validate_config(p, offline, timeout, memory) for p in configs]
    if strict:
        for r in results:
            if r.error is None and r.warnings:
                r.error = f"{r.warnings[0]} (--strict)"
    if as_json:
        doc = [
            {
                "config": str(r.path),
                "valid": r.error is None,
                **{k: getattr(r, k) for k in ("facts", "warnings", "error")},
            }
            for r in results
        ]
        typer.echo(json.dumps(doc, indent=2))
    else:
        for r in results:
            if r.error is None:
                typer.echo(f"{r.path}: valid ({'; '.join(r.facts)})")
            for w in r.warnings:
                typer.echo(f"warning: {r.path}: {w}", err=True)
    for r in results:
        if r.error is not None:
            typer.echo(f"error: {r.path}: {r.error}", err=True)
    if any(r.error is not None for r in results):
        raise typer.Exit(EXIT_BAD_INPUT)
