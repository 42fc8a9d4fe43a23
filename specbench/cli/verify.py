"""`specbench verify CONFIG`: the losslessness check for a pair and its sampling settings.

    specbench verify configs/tiny.yaml                       # greedy identity + sampled tests
    specbench verify configs/tiny.yaml --temperature 1 --top-p 0.9 --contexts 8 --samples 2000
    specbench verify configs/tiny.yaml --temperature 1 --lossy-epsilon 0.1   # LOSSY rule's cost
    specbench verify configs/tiny.yaml --json

Every drafter of the config is checked (plus n-gram prompt lookup unless --no-ngram). Greedy (T = 0):
speculative tokens vs target-only tokens for every prompt × γ, listing each prompt that differs
and where. Sampling (T > 0): at real contexts, one round sampled many times through the
speculative path; every emitted position (1..γ+1, the bonus token included) tested against the
target's distribution at its own prefix, Bonferroni over all tests. See docs/verify.md.

Exit codes: 0 lossless (every check passes, and at least one ran), 1 a check failed or nothing
was checked, 2 bad input.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from specbench.cli.exit_codes import EXIT_OK, EXIT_VERDICT
from specbench.cli.options import ConfigArgument, JsonOption, MaxPromptsOption
from specbench.config import MAX_GAMMA
from specbench.errors import SpecbenchError
from specbench.report.terminal import make_console

MAX_CONTEXTS = 1_000
MAX_SAMPLES = 1_000_000  # speculative rounds per context


def verify(
    config: ConfigArgument,
    contexts: Annotated[
        int,
        typer.Option(
            "--contexts",
            min=1,
            max=MAX_CONTEXTS,
            help="Contexts for the sampled test (per temperature).",
        ),
    ] = 8,
    samples: Annotated[
        int,
        typer.Option(
            "--samples", min=50, max=MAX_SAMPLES, help="Speculative rounds sampled per context."
        ),
    ] = 800,
    gamma: Annotated[
        int | None,
        typer.Option(
            "--gamma",
            min=1,
            max=MAX_GAMMA,
            help="γ to check (default: greedy at every γ of the config, sampling at min(γ_max, 4)).",
        ),
    ] = None,
    temperature: Annotated[
        list[float] | None,
        typer.Option(
            "--temperature",
            min=0.0,
            max=100.0,
            help="Temperature (repeatable; 0 = greedy; default: config).",
        ),
    ] = None,
    top_p: Annotated[float | None, typer.Option("--top-p", help="Nucleus mass in (0, 1].")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", min=0, help="Top-k (0 = off).")] = None,
    max_prompts: MaxPromptsOption = None,
    lossy_epsilon: Annotated[
        float | None,
        typer.Option(
            "--lossy-epsilon",
            help="Use the LOSSY rule 'accept when p(y) ≥ q(y) − ε' and measure its drift.",
        ),
    ] = None,
    significance: Annotated[
        float,
        typer.Option("--significance", help="Family-wise significance (Bonferroni)."),
    ] = 0.001,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda or auto.")] = None,
    no_ngram: Annotated[
        bool,
        typer.Option(
            "--no-ngram",
            help="Do not add an n-gram prompt-lookup drafter when the config has none.",
        ),
    ] = False,
    no_memo: Annotated[
        bool, typer.Option("--no-memo", help="Run every forward (no memoized logits).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Check that speculative decoding is lossless for the pair and its sampling settings.

    Exit codes: 0 lossless (every check passes), 1 a check failed or nothing was checked,
    2 bad input.
    """
    from specbench.config import deep_merge, parse_config, read_yaml
    from specbench.harness.verify import VerifyOptions, run_verify
    from specbench.report.verify import render, report_to_dict

    # the open bounds a range on the option cannot state
    if top_p is not None and not 0 < top_p <= 1:
        raise SpecbenchError(f"--top-p must be in (0, 1], got {top_p}")
    if lossy_epsilon is not None and not 0 < lossy_epsilon < 1:
        raise SpecbenchError(f"--lossy-epsilon must be in (0, 1), got {lossy_epsilon}")
    if not 0 < significance < 1:
        raise SpecbenchError(f"--significance must be in (0, 1), got {significance}")
    data = read_yaml(config)
    over: dict[str, Any] = {}
    if device is not None:
        over = {"target": {"device": device}, "draft": {"device": device}}
    cfg = parse_config(deep_merge(data, over), str(config))
    if cfg.backend == "openai":  # a server's models are not here to compute distributions from
        raise SpecbenchError(
            f"{config}: verify needs the models' weights (the transformers backend computes the "
            "target's and the draft's distributions itself), and this config measures an "
            "OpenAI-compatible server; give a config with `backend: transformers` and the pair's "
            "model directories or hub ids"
        )
    options = VerifyOptions(
        contexts=contexts,
        samples=samples,
        gamma=gamma,
        temperatures=list(temperature) if temperature else None,
        top_p=top_p,
        top_k=top_k,
        max_prompts=max_prompts,
        lossy_epsilon=lossy_epsilon,
        significance=significance,
        seed=seed,
        memoize=not no_memo,
        ngram=not no_ngram,
    )
    err = make_console(stderr=True)
    if as_json:
        rep = run_verify(cfg, options, config.parent)
        typer.echo(json.dumps(report_to_dict(rep), indent=2))
    else:
        with err.status("verifying…") as status:
            rep = run_verify(cfg, options, config.parent, progress=status.update)
        render(make_console(), rep)
    raise typer.Exit(EXIT_OK if rep.passed else EXIT_VERDICT)
