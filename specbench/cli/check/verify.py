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

The options become one typed request (harness/verify/verify_request.py: `VerifyRequest`, checked there,
run by `verify_pair`); this module renders the report through report/verify/verify.py.

Exit codes: 0 lossless (every check passes, and at least one ran), 1 a check failed or nothing
was checked, 2 bad input.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from specbench.cli.exit_codes import EXIT_OK, EXIT_VERDICT
from specbench.cli.options import (
    ConfigArgument,
    DeviceOption,
    JsonOption,
    MaxPromptsOption,
    TopKOption,
)
from specbench.config import MAX_GAMMA
from specbench.report.render.terminal import make_console

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
    top_k: TopKOption = None,
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
    # not run's seed (None: the config's): verify's checks draw from 0 unless told (intentional)
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    device: DeviceOption = None,
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
    from specbench.harness.verify.verify_request import VerifyRequest, verify_pair
    from specbench.report.verify.verify import render, report_to_dict

    request = VerifyRequest(
        config=config,
        contexts=contexts,
        samples=samples,
        gamma=gamma,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        max_prompts=max_prompts,
        lossy_epsilon=lossy_epsilon,
        significance=significance,
        seed=seed,
        device=device,
        no_ngram=no_ngram,
        no_memo=no_memo,
    )
    if as_json:
        rep = verify_pair(request)
        typer.echo(json.dumps(report_to_dict(rep), indent=2))
    else:
        with make_console(stderr=True).status("verifying…") as status:
            rep = verify_pair(request, progress=status.update)
        render(make_console(), rep)
    raise typer.Exit(EXIT_OK if rep.passed else EXIT_VERDICT)
