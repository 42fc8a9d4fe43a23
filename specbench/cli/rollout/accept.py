"""`specbench accept`: offline accept-rate measurement on logged traffic, and the rollout plan it
implies, before a gray rollout.

The options and the console. The options become one typed request (`AcceptRequest`, checked
together in harness/accept/accept_request.py, run by `measure_accept`); the pipeline is harness/accept/accept.py
(teacher-forced β over the logged responses, α per bucket, the rollout plan), its settings harness/accept/accept_config.py (flags over the
config over the defaults), the rows data/logged.py and data/logged_rows.py.

    specbench accept --config configs/tiny.yaml --data datasets/logged/tiny_traffic.jsonl \\
        --bucket-by workload --measure-timing
    specbench accept --target Qwen/Qwen2.5-7B-Instruct --draft Qwen/Qwen2.5-0.5B-Instruct \\
        --data logs.parquet --bucket-by category --temperature 0 --temperature 0.7 \\
        --timings reports/qwen/results.json --json

A logged row holds a prompt (`prompt`, text) or chat messages (`messages`, a list of
{role, content}; a final assistant message is the response when the row has no response column),
the response text (`response`), optionally a bucket column and the request's `temperature` /
`top_p`. A malformed row stops the command with its row number unless --skip-bad-rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from specbench import defaults
from specbench.cli.options import (
    DEFAULT_COST_RATIO,
    DeviceOption,
    DraftOption,
    DtypeOption,
    JsonOption,
    TargetOption,
    TDraftOption,
    TopKOption,
    TTargetOption,
    csv_list,
)
from specbench.config import MAX_GAMMA, MAX_PROMPTS
from specbench.report.render.terminal import make_console

if TYPE_CHECKING:  # the pipeline (torch) is imported only when the command runs
    from specbench.analysis.rollout import AcceptResult
    from specbench.harness.accept.accept import Progress

MAX_TOKENS = 1 << 22  # context / batch / chunk sizes: 4 M tokens is beyond any model's memory


class StderrEvents:
    """The pipeline's progress on stderr: a spinner per stage, a bar while scoring."""

    def __init__(self) -> None:
        self.console = make_console(stderr=True)

    def stage(self, text: str) -> AbstractContextManager[object]:
        return self.console.status(text)

    @contextmanager
    def progress(self, text: str) -> Iterator[Progress]:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        bar = Progress(
            TextColumn(text), BarColumn(), MofNCompleteColumn(), console=self.console,
            transient=True,
        )  # fmt: skip
        with bar:
            task = bar.add_task("score", total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)


def accept(
    data: Annotated[
        str,
        typer.Option(
            "--data",
            help="Logged requests: a JSONL, CSV or Parquet file, a save_to_disk folder, or a "
            "Hugging Face dataset id / folder.",
        ),
    ],
    config: Annotated[
        Path | None, typer.Option("--config", help="Run config (YAML) naming target and draft.")
    ] = None,
    target: TargetOption = None,
    draft: DraftOption = None,
    prompt_field: Annotated[
        str | None,
        typer.Option("--prompt-field", help="Column with the prompt text (default: prompt)."),
    ] = None,
    messages_field: Annotated[
        str | None,
        typer.Option(
            "--messages-field",
            help="Column with chat messages, a list of {role, content} (default: messages, used when present).",
        ),
    ] = None,
    response_field: Annotated[
        str, typer.Option("--response-field", help="Column with the logged response text.")
    ] = "response",
    id_field: Annotated[str, typer.Option("--id-field", help="Column with a request id.")] = "id",
    bucket_by: Annotated[
        str | None,
        typer.Option("--bucket-by", help="Column to group requests by (default: one bucket)."),
    ] = None,
    buckets: Annotated[
        str | None, typer.Option("--buckets", help="Only these buckets, e.g. code,chat.")
    ] = None,
    max_requests: Annotated[
        int | None,
        typer.Option(
            "--max-requests", min=1, max=MAX_PROMPTS, help="At most N requests per bucket (seeded)."
        ),
    ] = None,
    temperature: Annotated[
        list[float] | None,
        typer.Option(
            "--temperature",
            min=0.0,
            max=100.0,
            help="Temperature to measure β at (repeatable; 0 = greedy; default: the config's, else 1).",
        ),
    ] = None,
    top_p: Annotated[
        list[float] | None,
        typer.Option("--top-p", help="Top-p (repeatable; default: the config's, else 1)."),
    ] = None,
    top_k: TopKOption = None,
    logged_params: Annotated[
        bool,
        typer.Option(
            "--logged-params/--no-logged-params",
            help="Also measure each request at its own logged temperature/top_p ('logged').",
        ),
    ] = True,
    temperature_field: Annotated[
        str, typer.Option("--temperature-field", help="Column with a request's temperature.")
    ] = "temperature",
    top_p_field: Annotated[
        str, typer.Option("--top-p-field", help="Column with a request's top_p.")
    ] = "top_p",
    split: Annotated[
        str, typer.Option("--split", help="Split of a Hugging Face dataset.")
    ] = "train",
    chat_template: Annotated[
        Literal["auto", "on", "off"] | None,
        typer.Option("--chat-template", help="auto, on or off (default: the config's, else auto)."),
    ] = None,
    max_context: Annotated[
        int | None,
        typer.Option(
            "--max-context",
            min=2,
            max=MAX_TOKENS,
            help="Context limit in tokens (default: the pair's max positions).",
        ),
    ] = None,
    overflow: Annotated[
        Literal["window", "truncate"],
        typer.Option(
            "--overflow",
            help="Longer requests: 'window' (score the response in windows) or 'truncate'.",
        ),
    ] = "window",
    batch_tokens: Annotated[
        int | None,
        typer.Option(
            "--batch-tokens",
            min=1,
            max=MAX_TOKENS,
            help="Padded tokens per forward batch (default: 1024 on CPU, 16384 on GPU).",
        ),
    ] = None,
    chunk_tokens: Annotated[
        int,
        typer.Option(
            "--chunk-tokens",
            min=1,
            max=MAX_TOKENS,
            help="Longer batches run in chunks through a KV cache.",
        ),
    ] = 2048,
    position_bin: Annotated[
        int,
        typer.Option(
            "--position-bin",
            min=1,
            max=MAX_TOKENS,
            help="First position bin (bins double: 16, 32, 64 …).",
        ),
    ] = 16,
    timings: Annotated[
        Path | None,
        typer.Option(
            "--timings", help="A run's results.json (or run directory) for T_ar, T_d, T_t(γ)."
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Use --timings from a run of another target/draft anyway (the report says so).",
        ),
    ] = False,
    t_target: TTargetOption = None,
    t_draft: TDraftOption = None,
    verify_slope: Annotated[
        float,
        typer.Option(
            "--verify-slope", min=0.0, help="Extra verify cost per drafted token (ms, or ×T_ar)."
        ),
    ] = 0.0,
    # its own help in each command on purpose (cli/options.py says why)
    cost_ratio: Annotated[
        float | None,
        typer.Option(
            "--cost-ratio",
            help=f"T_d / T_ar when no timing is known (default {DEFAULT_COST_RATIO}).",
        ),
    ] = None,
    measure_timing: Annotated[
        bool,
        typer.Option("--measure-timing", help="Time batch-1 forwards of both models here first."),
    ] = False,
    timing_reps: Annotated[
        int,
        typer.Option("--timing-reps", min=1, max=10_000, help="Repetitions of each timed forward."),
    ] = 10,
    gamma_max: Annotated[
        int, typer.Option("--gamma-max", min=1, max=MAX_GAMMA, help="Largest γ to consider.")
    ] = defaults.GAMMA_MAX,
    margin: Annotated[
        float | None,
        typer.Option(
            "--margin",
            min=0.0,
            help="ON needs speedup CI low > 1 + margin (default: the config's, else 0.05).",
        ),
    ] = None,
    target_halfwidth: Annotated[
        float,
        typer.Option("--target-halfwidth", help="α CI half-width to size requests for."),
    ] = defaults.ACCEPT_CI_HALFWIDTH,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    seed: Annotated[
        int | None, typer.Option("--seed", min=0, max=2**63 - 1, help="Seed for sampling rows.")
    ] = None,
    skip_bad_rows: Annotated[
        bool,
        typer.Option("--skip-bad-rows", help="Skip malformed rows (reported) instead of stopping."),
    ] = False,
    as_json: JsonOption = False,
    report_dir: Annotated[
        Path | None,
        typer.Option("--report", help="Also write accept.json, report.md, report.html here."),
    ] = None,
) -> None:
    """Offline accept rate on logged traffic (teacher-forced β) and the rollout plan per bucket."""
    from specbench.harness.accept.accept_request import AcceptRequest, measure_accept

    request = AcceptRequest(
        data=data,
        config=config,
        target=target,
        draft=draft,
        prompt_field=prompt_field,
        messages_field=messages_field,
        response_field=response_field,
        id_field=id_field,
        bucket_by=bucket_by,
        buckets=csv_list(buckets),
        max_requests=max_requests,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        logged_params=logged_params,
        temperature_field=temperature_field,
        top_p_field=top_p_field,
        split=split,
        chat_template=chat_template,
        max_context=max_context,
        overflow=overflow,
        batch_tokens=batch_tokens,
        chunk_tokens=chunk_tokens,
        position_bin=position_bin,
        timings=timings,
        force=force,
        t_target=t_target,
        t_draft=t_draft,
        verify_slope=verify_slope,
        cost_ratio=cost_ratio,
        measure_timing=measure_timing,
        timing_reps=timing_reps,
        gamma_max=gamma_max,
        margin=margin,
        target_halfwidth=target_halfwidth,
        device=device,
        dtype=dtype,
        seed=seed,
        skip_bad_rows=skip_bad_rows,
    )
    show(measure_accept(request, StderrEvents()), report_dir, as_json)


def show(result: AcceptResult, report_dir: Path | None, as_json: bool) -> None:
    """accept.json, report.md and report.html when asked, then JSON or the console."""
    from specbench.report.accept import accept as render

    document = render.as_document(result)
    if report_dir is not None:
        render.write_report(report_dir, document)
    if as_json:
        typer.echo(json.dumps(document.to_json(), indent=2, allow_nan=False))
        return
    console = make_console()
    render.render_console(console, result)
    if report_dir is not None:
        console.print(f"report: {report_dir}/report.md, report.html, accept.json")
