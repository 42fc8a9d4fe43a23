"""`specbench accept`: offline accept-rate measurement on logged traffic, and the rollout plan it
implies, before a gray rollout.

β depends only on the two models' distributions, so α is measured teacher-forced: one forward of
the target and one of the draft over each logged prompt + response (spec/teacher_forced.py),
then per bucket α with a bootstrap CI over requests, its profile along the response, and the
predicted ā(γ), optimal γ, speedup CI and ON/OFF verdict (analysis/rollout.py).

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

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console

from specbench import defaults
from specbench.analysis import rollout
from specbench.cli import app, user_errors
from specbench.config import MAX_GAMMA, MAX_PROMPTS, ModelSpec
from specbench.data.logged import (
    DEFAULT_BUCKET,
    FieldNames,
    LoggedRequest,
    Selection,
    open_logged,
    select_requests,
)
from specbench.errors import SpecbenchError, malformed_file
from specbench.spec.sampling import SamplingParams

OVERALL = "(all)"
MAX_TOKENS = 1 << 22  # context / batch / chunk sizes: 4 M tokens is beyond any model's memory
DEFAULT_COST_RATIO = 0.1
__all__ = ["DEFAULT_BUCKET", "FieldNames", "LoggedRequest", "Selection", "accept"]


# --------------------------------------------------------------------------------------------
# settings and timing


def setting_label(p: SamplingParams) -> str:
    parts = [f"T={p.temperature:g}"]
    if not p.greedy and p.top_p < 1:
        parts.append(f"top-p={p.top_p:g}")
    if not p.greedy and p.top_k > 0:
        parts.append(f"top-k={p.top_k}")
    return " ".join(parts)


def make_settings(
    temps: Sequence[float], top_ps: Sequence[float], top_k: int
) -> list[SamplingParams]:
    """Every temperature × top-p (greedy once), in the order given."""
    out: list[SamplingParams] = []
    for t, p in itertools.product(temps, top_ps):
        params = SamplingParams(0.0) if t == 0 else SamplingParams(t, top_k, p)
        if params not in out:
            out.append(params)
    return out


# --------------------------------------------------------------------------------------------
# the core: loaded models + requests → AcceptResult


@dataclass
class AcceptOptions:
    settings: list[SamplingParams]
    logged_params: bool = True  # add the "logged" setting when requests carry parameters
    chat_template: str = "auto"
    max_context: int | None = None  # default: the smaller max_position_embeddings of the pair
    overflow: Literal["window", "truncate"] = "window"  # responses longer than the context
    batch_tokens: int | None = None  # None: engine.teacher_forced.default_batch_tokens
    chunk_tokens: int = 2048
    position_bin: int = 16
    n_boot: int = 2000
    level: float = 0.95
    target_halfwidth: float = defaults.ACCEPT_CI_HALFWIDTH
    gamma_max: int = defaults.GAMMA_MAX
    margin: float = defaults.MARGIN
    seed: int = 0
    draft_logit_noise: float = 0.0
    skip_bad_rows: bool = False


def _max_positions(model: Any) -> int | None:
    value = getattr(model.config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) else None


def tokenize_requests(
    requests: list[LoggedRequest],
    tokenizer: Any,
    chat_template: str,
    skipped: list[dict[str, str]],
    skip_bad: bool,
    source: str,
) -> list[tuple[LoggedRequest, list[int], list[int]]]:
    """(request, prompt ids, response ids): the prompt rendered as `run` renders it, the response
    encoded without special tokens (text is re-tokenized: see the README's caveat)."""
    from specbench.data import build_context_ids

    out = []
    for r in requests:
        prompt_ids, _ = build_context_ids(tokenizer, r.messages, chat_template, None, r.tools)
        response_ids = [
            int(t) for t in tokenizer(r.response, add_special_tokens=False)["input_ids"]
        ]
        if not response_ids:
            if not skip_bad:
                raise SpecbenchError(
                    f"{source} {r.location}: the response encodes to zero tokens; fix the row or "
                    "pass --skip-bad-rows"
                )
            reason = "the response encodes to zero tokens"
            skipped.append({"row": r.location, "reason": reason, "bucket": r.bucket})
            continue
        out.append((r, prompt_ids, response_ids))
    return out


def measure_requests(
    target: Any,
    draft: Any,
    vocab_size: int,
    requests: list[LoggedRequest],
    opts: AcceptOptions,
    time_model_for: Callable[[str | None], rollout.TimeModel],
    source: str = "data",
    skipped: list[dict[str, str]] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> rollout.AcceptResult:
    """Score `requests` with the loaded pair (`models.LoadedModel`s) and plan every bucket."""
    from specbench.spec.teacher_forced import (
        default_batch_tokens,
        plan_sequences,
        score_sequences,
    )

    skipped = skipped if skipped is not None else []
    notes: list[str] = []
    tokenized = tokenize_requests(
        requests, target.tokenizer, opts.chat_template, skipped, opts.skip_bad_rows, source
    )
    if not tokenized:
        raise SpecbenchError(f"{source} has no usable rows; nothing to measure")
    limits = [m for m in (_max_positions(target.model), _max_positions(draft.model)) if m]
    max_len = opts.max_context or (min(limits) if limits else 10**9)
    bos = getattr(target.tokenizer, "bos_token_id", None)
    sequences, windowed, cut = [], 0, [0, 0, 0]
    for i, (_, p_ids, r_ids) in enumerate(tokenized):
        planned = plan_sequences(p_ids, r_ids, max_len, i, opts.overflow, bos)
        sequences += planned.sequences
        windowed += planned.windowed
        if planned.prompt_cut or planned.response_cut:
            cut = [cut[0] + 1, cut[1] + planned.prompt_cut, cut[2] + planned.response_cut]
    notes += conversation_notes([r for r, _, _ in tokenized], opts.chat_template, target.tokenizer)
    if windowed:
        notes.append(
            f"{windowed} request(s) longer than the {max_len}-token context were scored in "
            f"windows of {max(1, max_len // 2)} response tokens, each seeing only the "
            f"{max_len - max(1, max_len // 2)} tokens before it (--overflow window)"
        )
    if cut[0]:
        notes.append(
            f"{cut[0]} request(s) did not fit the {max_len}-token context: {cut[1]} prompt tokens "
            f"dropped from the front and {cut[2]} response tokens not scored (--overflow truncate)"
        )
    logged = {i: r.params for i, (r, _, _) in enumerate(tokenized) if r.params is not None}
    use_logged = opts.logged_params and bool(logged)
    labels = [setting_label(p) for p in opts.settings] + (["logged"] if use_logged else [])
    total = sum(len(s.response_ids) for s in sequences)
    done = [0]

    def progress(n: int) -> None:
        done[0] += n
        if on_progress is not None:
            on_progress(done[0], total)

    scores = score_sequences(
        target.model,
        draft.model,
        sequences,
        opts.settings,
        vocab_size,
        logged if use_logged else None,
        opts.batch_tokens or default_batch_tokens(target.device),
        chunk_tokens=opts.chunk_tokens,
        pad_id=getattr(target.tokenizer, "pad_token_id", None) or 0,
        draft_logit_noise=opts.draft_logit_noise,
        seed=opts.seed,
        on_progress=progress,
    )
    longest = max(len(r) for _, _, r in tokenized)
    edges = rollout.position_edges(longest, opts.position_bin)
    by_bucket: dict[str, list[Any]] = {}
    for s in scores:
        by_bucket.setdefault(tokenized[s.request][0].bucket, []).append(s)

    def summarize(name: str, scored: list[Any], tm: rollout.TimeModel) -> rollout.BucketResult:
        acc = rollout.summarize_bucket(
            name, scored, labels, edges, opts.n_boot, opts.level, opts.target_halfwidth
        )
        return rollout.bucket_result(acc, tm, opts.gamma_max, opts.margin, opts.target_halfwidth)

    buckets = [summarize(b, sc, time_model_for(b)) for b, sc in by_bucket.items()]
    overall = summarize(OVERALL, scores, time_model_for(None))
    meta = {
        "source": source,
        "requests": len(tokenized),
        "positions": total,
        "max_context": max_len if max_len < 10**9 else None,
        "overflow": opts.overflow,
        "chat_template": opts.chat_template,
        "settings": [
            {
                "label": setting_label(p),
                "temperature": p.temperature,
                "top_p": p.top_p,
                "top_k": p.top_k,
            }
            for p in opts.settings
        ]
        + ([{"label": "logged", "requests": len(logged)}] if use_logged else []),
        "position_edges": edges,
        "gamma_max": opts.gamma_max,
        "margin": opts.margin,
        "ci_level": opts.level,
        "bootstrap": opts.n_boot,
        "target_halfwidth": opts.target_halfwidth,
        "estimator": rollout.ESTIMATOR,
    }
    if use_logged and len(logged) < len(tokenized):
        notes.append(
            f"'logged' covers the {len(logged)} of {len(tokenized)} requests that carry sampling "
            "parameters"
        )
    return rollout.AcceptResult(meta, labels, buckets, overall, notes, skipped)


def conversation_notes(
    requests: list[LoggedRequest], chat_template: str, tokenizer: Any
) -> list[str]:
    """What of the logged conversations did not reach the scored context, said once each."""
    notes = []
    dropped: dict[str, int] = {}
    with_parts = 0
    for r in requests:
        with_parts += bool(r.dropped_parts)
        for kind, n in r.dropped_parts.items():
            dropped[kind] = dropped.get(kind, 0) + n
    if dropped:
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(dropped.items()))
        notes.append(
            f"{with_parts} request(s) hold non-text content parts ({kinds}); only their text "
            "parts were scored (a text-only pair never sees them)"
        )
    templated = chat_template == "on" or (
        chat_template == "auto" and bool(getattr(tokenizer, "chat_template", None))
    )
    with_tools = sum(1 for r in requests if r.tools)
    if with_tools and not templated:
        notes.append(
            f"{with_tools} request(s) carry a tools list, but prompts are sent as plain text "
            "(no chat template), which has no place for tool definitions: they were not scored"
        )
    return notes


def time_model_resolver(
    timings: Path | None,
    t_target: float | None,
    t_draft: float | None,
    verify_slope: float,
    cost_ratio: float | None,
    measured: dict[str, Any] | None,
) -> Callable[[str | None], rollout.TimeModel]:
    """bucket → TimeModel from exactly one timing source (validated by the caller)."""
    if timings is not None:
        path = timings / "results.json" if timings.is_dir() else timings
        if not path.is_file():
            raise SpecbenchError(
                f"--timings: {path} not found; pass a run's results.json or its directory"
            )
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise SpecbenchError(f"--timings: {path} is not a JSON file") from None
        if not isinstance(results, dict):
            raise SpecbenchError(f"--timings: {path} is not a specbench results.json")
        try:  # fail now, not per bucket
            rollout.time_model_from_results(results, None, str(path))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise malformed_file(path, exc, "results.json") from None
        return lambda bucket: rollout.time_model_from_results(results, bucket, str(path))
    if measured is not None:
        tm = rollout.time_model_from_measurement(measured)
    elif t_target is not None and t_draft is not None:
        tm = rollout.time_model_from_flags(t_target, t_draft, verify_slope)
    elif cost_ratio is not None:
        tm = rollout.time_model_relative(cost_ratio, verify_slope, "flags")
    else:
        tm = rollout.time_model_relative(DEFAULT_COST_RATIO, verify_slope, "default")
    return lambda _bucket: tm


UNSCORABLE_HINTS = ("eagle", "medusa", "mtp", "hydra")


def unscorable_drafter(kind: str) -> SpecbenchError:
    """Teacher forcing needs a standalone draft LM over the target's vocabulary; heads that read
    the target's hidden states (EAGLE, MTP, Medusa) or model-free drafters have no such forward."""
    return SpecbenchError(
        f"accept cannot score a '{kind}' drafter by teacher forcing: it is not a standalone model "
        "with the target's vocabulary (it drafts from the target's hidden states); measure it "
        "through the engine backend instead (backend: vllm with speculative.method "
        f"{kind}, `specbench run`), whose results report α from the engine's acceptance counters"
    )


def _drafter_head(model: str | None) -> str | None:
    """The head kind ("eagle", "mtp", …) when a local draft folder's config.json says so."""
    if not model:
        return None
    cfg_path = Path(model).expanduser() / "config.json"
    if not cfg_path.is_file():
        return None
    try:
        info = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # load_model reports an unreadable model in its own words
    if not isinstance(info, dict):
        return None
    names = [str(info.get("model_type", ""))] + [str(a) for a in info.get("architectures") or []]
    for name in names:
        for hint in UNSCORABLE_HINTS:
            if hint in name.lower():
                return hint
    return None


def _specs(
    config: Path | None,
    target: str | None,
    draft: str | None,
    device: str | None,
    dtype: str | None,
) -> tuple[ModelSpec, ModelSpec, Any]:
    from specbench.config import parse_config, read_yaml

    cfg = None
    if config is not None:
        cfg = parse_config(read_yaml(config), str(config))
        method = cfg.speculative.method if cfg.backend == "vllm" else "draft_model"
        if method not in ("draft_model", "ngram") and draft is None:
            raise unscorable_drafter(method)
        if cfg.draft.method != "model" and draft is None:
            raise SpecbenchError(
                "accept needs a draft model; the config's draft.method is 'ngram' (pass --draft)"
            )
        t_spec: ModelSpec = cfg.target
        # the draft as a plain model spec (drafter-only keys such as method or name dropped)
        d_spec: ModelSpec = ModelSpec(
            **{k: v for k, v in cfg.draft.model_dump().items() if k in ModelSpec.model_fields}
        )
    elif target is None or draft is None:
        raise SpecbenchError(
            "give --config CONFIG, or both --target and --draft (model ids or directories)"
        )
    else:
        t_spec, d_spec = ModelSpec(model=target), ModelSpec(model=draft)
    over: dict[str, Any] = {}
    if device is not None:
        over["device"] = device
    if dtype is not None:
        if dtype not in ("auto", "float32", "float16", "bfloat16"):
            raise SpecbenchError(
                f"--dtype must be auto, float32, float16 or bfloat16, got '{dtype}'"
            )
        over["dtype"] = dtype
    head = _drafter_head(d_spec.model if draft is None else draft)
    if head is not None:
        raise unscorable_drafter(head)
    t_spec = t_spec.model_copy(update=over | ({"model": target} if target else {}))
    d_spec = d_spec.model_copy(update=over | ({"model": draft} if draft else {}))
    return t_spec, d_spec, cfg


# --------------------------------------------------------------------------------------------
# the command


def _csv_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise SpecbenchError(message)


@app.command()
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
    target: Annotated[
        str | None, typer.Option("--target", help="Target model (hub id or directory).")
    ] = None,
    draft: Annotated[
        str | None, typer.Option("--draft", help="Draft model (hub id or directory).")
    ] = None,
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
        int | None, typer.Option("--max-requests", help="At most N requests per bucket (seeded).")
    ] = None,
    temperature: Annotated[
        list[float] | None,
        typer.Option(
            "--temperature",
            help="Temperature to measure β at (repeatable; 0 = greedy; default: the config's, else 1).",
        ),
    ] = None,
    top_p: Annotated[
        list[float] | None,
        typer.Option("--top-p", help="Top-p (repeatable; default: the config's, else 1)."),
    ] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", help="Top-k (0 = off).")] = None,
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
        str | None,
        typer.Option("--chat-template", help="auto, on or off (default: the config's, else auto)."),
    ] = None,
    max_context: Annotated[
        int | None,
        typer.Option(
            "--max-context", help="Context limit in tokens (default: the pair's max positions)."
        ),
    ] = None,
    overflow: Annotated[
        str,
        typer.Option(
            "--overflow",
            help="Longer requests: 'window' (score the response in windows) or 'truncate'.",
        ),
    ] = "window",
    batch_tokens: Annotated[
        int | None,
        typer.Option(
            "--batch-tokens",
            help="Padded tokens per forward batch (default: 1024 on CPU, 16384 on GPU).",
        ),
    ] = None,
    chunk_tokens: Annotated[
        int, typer.Option("--chunk-tokens", help="Longer batches run in chunks through a KV cache.")
    ] = 2048,
    position_bin: Annotated[
        int, typer.Option("--position-bin", help="First position bin (bins double: 16, 32, 64 …).")
    ] = 16,
    timings: Annotated[
        Path | None,
        typer.Option(
            "--timings", help="A run's results.json (or run directory) for T_ar, T_d, T_t(γ)."
        ),
    ] = None,
    t_target: Annotated[
        float | None, typer.Option("--t-target", help="Baseline per-token latency T_ar in ms.")
    ] = None,
    t_draft: Annotated[
        float | None, typer.Option("--t-draft", help="One draft step T_d in ms.")
    ] = None,
    verify_slope: Annotated[
        float,
        typer.Option("--verify-slope", help="Extra verify cost per drafted token (ms, or ×T_ar)."),
    ] = 0.0,
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
        int, typer.Option("--timing-reps", help="Repetitions of each timed forward.")
    ] = 10,
    gamma_max: Annotated[
        int, typer.Option("--gamma-max", help="Largest γ to consider.")
    ] = defaults.GAMMA_MAX,
    margin: Annotated[
        float | None,
        typer.Option(
            "--margin",
            help="ON needs speedup CI low > 1 + margin (default: the config's, else 0.05).",
        ),
    ] = None,
    target_halfwidth: Annotated[
        float,
        typer.Option("--target-halfwidth", help="α CI half-width to size requests for."),
    ] = defaults.ACCEPT_CI_HALFWIDTH,
    device: Annotated[
        str | None, typer.Option("--device", help="cpu, cuda, cuda:1 or auto.")
    ] = None,
    dtype: Annotated[
        str | None, typer.Option("--dtype", help="auto, float32, float16 or bfloat16.")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for sampling rows.")] = None,
    skip_bad_rows: Annotated[
        bool,
        typer.Option("--skip-bad-rows", help="Skip malformed rows (reported) instead of stopping."),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")
    ] = False,
    report_dir: Annotated[
        Path | None,
        typer.Option("--report", help="Also write accept.json, report.md, report.html here."),
    ] = None,
) -> None:
    """Offline accept rate on logged traffic (teacher-forced β) and the rollout plan per bucket."""
    from specbench.models import check_pair_compatible, load_model
    from specbench.report import accept as render

    with user_errors():
        # --- validate options: one line naming the option ---
        n_sources = sum(
            [
                timings is not None,
                t_target is not None or t_draft is not None,
                cost_ratio is not None,
                measure_timing,
            ]
        )
        _check(
            n_sources <= 1,
            "give one timing source: --timings, --t-target/--t-draft, --cost-ratio or --measure-timing",
        )
        _check(
            (t_target is None) == (t_draft is None),
            "--t-target and --t-draft go together: give both (in ms) or neither",
        )
        for name, value in (
            ("--t-target", t_target),
            ("--t-draft", t_draft),
            ("--cost-ratio", cost_ratio),
        ):
            _check(value is None or value > 0, f"{name} must be > 0, got {value}")
        _check(verify_slope >= 0, f"--verify-slope must be >= 0, got {verify_slope:g}")
        _check(
            1 <= gamma_max <= MAX_GAMMA, f"--gamma-max must be in [1, {MAX_GAMMA}], got {gamma_max}"
        )
        _check(
            1 <= timing_reps <= 10_000, f"--timing-reps must be in [1, 10000], got {timing_reps}"
        )
        _check(margin is None or margin >= 0, f"--margin must be >= 0, got {margin}")
        _check(
            0 < target_halfwidth < 1,
            f"--target-halfwidth must be in (0, 1), got {target_halfwidth:g}",
        )
        _check(
            overflow in ("window", "truncate"),
            f"--overflow must be 'window' or 'truncate', got '{overflow}'",
        )
        _check(
            max_requests is None or 1 <= max_requests <= MAX_PROMPTS,
            f"--max-requests must be in [1, {MAX_PROMPTS}], got {max_requests}",
        )
        _check(
            max_context is None or 2 <= max_context <= MAX_TOKENS,
            f"--max-context must be in [2, {MAX_TOKENS}], got {max_context}",
        )
        for name, value in (("--batch-tokens", batch_tokens), ("--chunk-tokens", chunk_tokens)):
            _check(
                value is None or 1 <= value <= MAX_TOKENS,
                f"{name} must be in [1, {MAX_TOKENS}], got {value}",
            )
        _check(
            1 <= position_bin <= MAX_TOKENS,
            f"--position-bin must be in [1, {MAX_TOKENS}], got {position_bin}",
        )
        for t in temperature or []:
            _check(0 <= t <= 100, f"--temperature must be in [0, 100] (0 = greedy), got {t:g}")
        for p in top_p or []:
            _check(0 < p <= 1, f"--top-p must be in (0, 1], got {p:g}")
        _check(
            top_k is None or 0 <= top_k <= 1_000_000,
            f"--top-k must be in [0, 1000000], got {top_k}",
        )
        _check(seed is None or 0 <= seed < 2**63, f"--seed must be in [0, 2^63), got {seed}")
        _check(
            chat_template in (None, "auto", "on", "off"),
            f"--chat-template must be auto, on or off, got '{chat_template}'",
        )

        t_spec, d_spec, cfg = _specs(config, target, draft, device, dtype)
        sampling = cfg.sampling if cfg is not None else None
        decision = cfg.decision if cfg is not None else None
        k = top_k if top_k is not None else (sampling.top_k if sampling else 0)
        settings = make_settings(
            temperature or (sampling.temperatures if sampling else [1.0]),
            top_p or ([sampling.top_p] if sampling else [1.0]),
            k,
        )
        run_seed = seed if seed is not None else (cfg.seed if cfg else 0)
        fields = FieldNames(
            prompt=prompt_field or "prompt",
            messages=messages_field or "messages",
            response=response_field,
            bucket=bucket_by,
            id=id_field,
            temperature=temperature_field,
            top_p=top_p_field,
            prompt_explicit=prompt_field is not None,
            messages_explicit=messages_field is not None,
        )
        _check(
            not (fields.prompt_explicit and fields.messages_explicit),
            "give --prompt-field or --messages-field, not both",
        )

        # --- data first: a bad file fails before any model loads; one streaming pass ---
        wanted = _csv_list(buckets)
        source, rows = open_logged(data, split, fields.columns())
        selection = select_requests(
            source, rows, fields, k, skip_bad_rows, wanted, max_requests, run_seed
        )
        requests, skipped = selection.requests, selection.skipped
        notes: list[str] = []
        kept_buckets = {r.bucket for r in requests}
        emptied = sorted({s["bucket"] for s in skipped} - kept_buckets - ({""}))
        notes += [
            f"bucket '{b}': every row was malformed and skipped"
            for b in emptied
            if wanted is None or b in wanted
        ]
        if selection.skipped_total > len(skipped):
            notes.append(
                f"{selection.skipped_total} malformed rows skipped; the first {len(skipped)} "
                "are listed"
            )

        err = Console(stderr=True)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # keep stderr to our own lines (errors are one line)
        with err.status("loading the target and draft models…"):
            t_loaded = load_model(t_spec)
            d_loaded = load_model(d_spec)
            vocab = check_pair_compatible(t_loaded, d_loaded)
        measured = None
        if measure_timing:
            with err.status("timing batch-1 forwards of both models…"):
                from specbench.spec.timing import measure_forward_latency

                measured = measure_forward_latency(
                    t_loaded.model, d_loaded.model, vocab.real_vocab_size, reps=timing_reps
                )
        time_model_for = time_model_resolver(
            timings, t_target, t_draft, verify_slope, cost_ratio, measured
        )
        opts = AcceptOptions(
            settings=settings,
            logged_params=logged_params,
            chat_template=chat_template or (cfg.chat_template if cfg else "auto"),
            max_context=max_context,
            overflow="truncate" if overflow == "truncate" else "window",
            batch_tokens=batch_tokens,
            chunk_tokens=chunk_tokens,
            position_bin=position_bin,
            n_boot=decision.bootstrap if decision else 2000,
            level=decision.ci_level if decision else 0.95,
            target_halfwidth=target_halfwidth,
            gamma_max=gamma_max,
            margin=margin
            if margin is not None
            else (decision.margin if decision else defaults.MARGIN),
            seed=run_seed,
            draft_logit_noise=d_spec.logit_noise,
            skip_bad_rows=skip_bad_rows,
        )
        import torch
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        bar = Progress(
            TextColumn("scoring positions"), BarColumn(), MofNCompleteColumn(), console=err,
            transient=True,
        )  # fmt: skip
        try:
            with bar:
                task = bar.add_task("score", total=None)
                result = measure_requests(
                    t_loaded, d_loaded, vocab.real_vocab_size, requests, opts, time_model_for,
                    source, skipped,
                    lambda done, total: bar.update(task, completed=done, total=total),
                )  # fmt: skip
        except torch.OutOfMemoryError:
            raise SpecbenchError(
                "out of memory while scoring a batch; lower --batch-tokens (or --chunk-tokens for "
                "long requests)"
            ) from None
        result.warnings[:0] = notes + list(vocab.notes)
        result.meta["target"] = t_spec.model
        result.meta["draft"] = d_spec.model
        result.meta["device"] = str(t_loaded.device)
        result.meta["dtype"] = str(t_loaded.dtype).removeprefix("torch.")
        result.meta["bucket_by"] = bucket_by
        result.meta["rows_read"] = selection.rows_read
        result.meta["bucket_rows"] = selection.bucket_rows
        result.meta["max_requests"] = max_requests
        if measured is not None:
            result.meta["measured_timing"] = measured

        doc = render.to_json(result)
        if report_dir is not None:
            render.write_report(report_dir, result, doc)
        if as_json:
            typer.echo(json.dumps(doc, indent=2, allow_nan=False))
            return
        console = Console()
        render.render_console(console, result)
        if report_dir is not None:
            console.print(f"report: {report_dir}/report.md, report.html, accept.json")
