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
- backend `vllm`: vLLM is importable (absent: a warning naming `make install-vllm`);
- with `--gpu-memory GIB` or `--gpu NAME`: the memory plan (`harness.memory_plan`): every model
  built from its config.json on the meta device, weights and KV cache per GPU against the GPU's
  memory — a plan that does not fit is an error, with the numbers.

    specbench validate configs/llama70b-vllm.yaml --gpu-memory 80

A CI gate's thresholds file (`ci/specbench-thresholds.yaml`: a mapping with `gate`, `calibration`
or `plan` and no `target`) is checked as `compare --thresholds` reads it, and its `plan` with its
`calibration` (docs/ci.md): a plan whose gating rows cannot detect their minimum effects is an
error (exit 2), naming the MDE and pointing at `specbench compare --plan`.

The options become one typed request (harness/run/validate_request.py: `ValidateRequest`, checked by
`validate_configs` with harness/run/validate_checks.py); the thresholds file's check stays here, as
it words its plan through report/compare_gate.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from specbench.cli.exit_codes import EXIT_BAD_INPUT, one_line
from specbench.cli.options import JsonOption
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.harness.run.validate_checks import Checked

DEFAULT_TIMEOUT_S = 3.0


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
    from specbench.harness.run.validate_request import ValidateRequest, validate_configs

    request = ValidateRequest(
        configs=configs,
        offline=offline,
        strict=strict,
        timeout=timeout,
        gpu_memory=gpu_memory,
        gpu=gpu,
        gpus=gpus,
        context_tokens=context_tokens,
    )
    results = validate_configs(request, check_gate)
    show(results, as_json)
    if any(r.error is not None for r in results):
        raise typer.Exit(EXIT_BAD_INPUT)


def show(results: list[Checked], as_json: bool) -> None:
    """Each config's facts (or --json's document) on stdout; warnings, then errors, on stderr."""
    for r in results:
        if r.error is not None:
            r.error = one_line(r.error)
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
