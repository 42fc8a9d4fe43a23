"""`specbench validate CONFIG...`: check a run configuration without running a model.

    specbench validate configs/tiny.yaml
    specbench validate configs/*.yaml --offline      # no network: endpoints are not contacted

Checks, in order (the first failure of a config is its one `error:` line; exit code 2):
- the file parses and every key and value is within its bounds (the same `RunConfig` `run` uses);
- every workload's dataset loads, its columns are there, and the prompts available cover the
  prompts asked (fewer is a warning: `run` uses all of them); engine backends: a concurrency
  above every workload's prompt count is an error, above some workloads' a warning
  (`harness.prompt_checks`);
- tokenizers load from the local files (the shipped tiny pair, a local directory, or the Hugging
  Face cache) and the draft's vocabulary is the target's. A hub id that is not in the local cache
  is a warning, not an error: `run` would download it (or fail offline) — `--strict` makes every
  warning an error;
- backend `openai`: each endpoint answers `/v1/models` within `--timeout` seconds and serves the
  configured model; `/metrics` is scraped once (absent: a warning, acceptance is then unavailable).
  `--offline` skips these network checks (said so in the output);
- backend `vllm`: vLLM is importable (absent: a warning naming `make install-vllm`).
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


@dataclass
class Checked:
    """What validating one config found: facts that passed, warnings, and the error if any."""

    path: Path
    facts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


def check_datasets(cfg: Any, base_dir: Path, out: Checked) -> None:
    from specbench.data.loader import load_workload
    from specbench.harness.prompt_checks import check_concurrency, prompt_warnings

    prompts = {}
    for wl in cfg.workloads:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            prompts[wl.name] = load_workload(wl, cfg.seed, base_dir)  # raises for no prompts
    out.warnings += prompt_warnings(cfg, prompts)  # n above the set, concurrency above some
    check_concurrency(cfg, prompts)  # a concurrency no workload reaches: an error
    total = sum(len(p) for p in prompts.values())
    out.facts.append(f"{len(cfg.workloads)} workloads, {total} prompts")


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


def validate_config(path: Path, offline: bool, timeout_s: float) -> Checked:
    """Every check of one config; a SpecbenchError becomes `error`."""
    from specbench.config import parse_config, read_yaml

    out = Checked(path)
    try:
        cfg = parse_config(read_yaml(path), str(path))
        out.facts.append(f"backend {cfg.backend}")
        check_datasets(cfg, path.parent, out)
        check_tokenizers(cfg, out)
        if cfg.backend == "openai":
            from specbench.harness.serving import endpoints as eps

            eps.check_endpoints(eps.endpoints_of(cfg))  # distinct labels, one baseline server
            if offline:
                out.facts.append("endpoints not contacted (--offline)")
            else:
                check_endpoints(cfg, timeout_s, out)
        elif cfg.backend == "vllm":
            import importlib.util

            if importlib.util.find_spec("vllm") is None:
                out.warnings.append("vLLM is not installed here: make install-vllm")
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
    as_json: JsonOption = False,
) -> None:
    """Check configs without running a model: keys and bounds, datasets, tokenizers, endpoints.

    Exit codes: 0 every config is valid; 2 at least one is not (one `error:` line each)."""
    results = [validate_config(p, offline, timeout) for p in configs]
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
