"""`specbench accept`'s pipeline: logged requests → teacher-forced scores → α and the rollout plan
per bucket.

β depends only on the two models' distributions, so α is measured teacher-forced: one forward of
the target and one of the draft over each logged prompt + response (decoding/teacher_forced.py),
then per bucket α with a bootstrap CI over requests, its profile along the response, and the
predicted ā(γ), optimal γ, speedup CI and ON/OFF verdict (analysis/rollout/accept_summary.py,
analysis/rollout.py). `run_accept` is the whole command without its options and its console:
rows first (a bad file fails before any model loads), then the pair, the timing, the scores.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from specbench import defaults
from specbench.analysis import rollout
from specbench.analysis.rollout.accept_summary import (
    TimeModelFor,
    plan_buckets,
    setting_label,
    settings_meta,
    time_model_resolver,
)
from specbench.analysis.rollout.timing import ForwardLatency
from specbench.config import ModelSpec
from specbench.data.logged import open_logged, select_requests
from specbench.data.logged_rows import FieldNames, LoggedRequest, conversation_notes
from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams

NO_LIMIT = 10**9  # context length when neither model states one


@dataclass
class AcceptOptions:
    settings: list[SamplingParams]
    logged_params: bool = True  # add the "logged" setting when requests carry parameters
    chat_template: str = "auto"
    max_context: int | None = None  # default: the smaller max_position_embeddings of the pair
    overflow: Literal["window", "truncate"] = "window"  # responses longer than the context
    batch_tokens: int | None = None  # None: spec.teacher_forced.default_batch_tokens
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
    top_k: int = 0  # applied to a request's logged temperature / top_p ('logged')


@dataclass(frozen=True)
class TimingFlags:
    """Where T_ar, T_d and T_t(γ) come from: at most one of a run's results.json, --t-target /
    --t-draft, --cost-ratio or `measure` (time batch-1 forwards here); else the default ratio."""

    default_cost_ratio: float
    timings: Path | None = None
    t_target: float | None = None
    t_draft: float | None = None
    verify_slope: float = 0.0
    cost_ratio: float | None = None
    measure: bool = False
    reps: int = 10
    force: bool = False  # --timings of another pair used anyway (said in the report)


@dataclass(frozen=True)
class AcceptData:
    """The logged requests to measure: where they are, their fields, which of them."""

    data: str
    fields: FieldNames
    split: str = "train"
    buckets: list[str] | None = None  # only these buckets
    max_requests: int | None = None  # per bucket, seeded reservoir sample


Progress = Callable[[int, int], None]  # (positions scored so far, positions in all)


class AcceptEvents(Protocol):
    """What the pipeline reports while it runs (the CLI shows it on stderr)."""

    def stage(self, text: str) -> AbstractContextManager[object]:
        """A step of unknown length (loading, timing) runs inside this."""
        ...

    def progress(self, text: str) -> AbstractContextManager[Progress]:
        """Scoring runs inside this and reports through the callable it yields."""
        ...


class NoEvents:
    """Report nothing (tests, benchmarks)."""

    def stage(self, text: str) -> AbstractContextManager[object]:
        return nullcontext()

    def progress(self, text: str) -> AbstractContextManager[Progress]:
        return nullcontext(lambda done, total: None)


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
    encoded without special tokens (text is re-tokenized: see docs/accept.md's caveat)."""
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


def _overflow_notes(windowed: int, cut: list[int], max_len: int) -> list[str]:
    notes = []
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
    return notes


def measure_requests(
    target: Any,
    draft: Any,
    vocab_size: int,
    requests: list[LoggedRequest],
    opts: AcceptOptions,
    time_model_for: TimeModelFor,
    source: str = "data",
    skipped: list[dict[str, str]] | None = None,
    on_progress: Progress | None = None,
) -> rollout.AcceptResult:
    """Score `requests` with the loaded pair (`models.LoadedModel`s) and plan every bucket."""
    from specbench.decoding.teacher_forced import (
        default_batch_tokens,
        plan_sequences,
        score_sequences,
    )

    skipped = skipped if skipped is not None else []
    tokenized = tokenize_requests(
        requests, target.tokenizer, opts.chat_template, skipped, opts.skip_bad_rows, source
    )
    if not tokenized:
        raise SpecbenchError(f"{source} has no usable rows; nothing to measure")
    limits = [m for m in (_max_positions(target.model), _max_positions(draft.model)) if m]
    max_len = opts.max_context or (min(limits) if limits else NO_LIMIT)
    bos = getattr(target.tokenizer, "bos_token_id", None)
    sequences, windowed, cut = [], 0, [0, 0, 0]
    for i, (_, p_ids, r_ids) in enumerate(tokenized):
        planned = plan_sequences(p_ids, r_ids, max_len, i, opts.overflow, bos)
        sequences += planned.sequences
        windowed += planned.windowed
        if planned.prompt_cut or planned.response_cut:
            cut = [cut[0] + 1, cut[1] + planned.prompt_cut, cut[2] + planned.response_cut]
    templated = opts.chat_template == "on" or (
        opts.chat_template == "auto" and bool(getattr(target.tokenizer, "chat_template", None))
    )
    notes = conversation_notes([r for r, _, _ in tokenized], templated)
    notes += _overflow_notes(windowed, cut, max_len)
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
    edges = rollout.position_edges(max(len(r) for _, _, r in tokenized), opts.position_bin)
    buckets, overall = plan_buckets(
        scores, [r.bucket for r, _, _ in tokenized], labels, edges, time_model_for,
        opts.n_boot, opts.level, opts.target_halfwidth, opts.gamma_max, opts.margin,
    )  # fmt: skip
    meta = {
        "source": source,
        "requests": len(tokenized),
        "positions": total,
        "max_context": max_len if max_len < NO_LIMIT else None,
        "overflow": opts.overflow,
        "chat_template": opts.chat_template,
        "settings": settings_meta(opts.settings, len(logged) if use_logged else None),
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


def run_accept(
    data: AcceptData,
    target: ModelSpec,
    draft: ModelSpec,
    opts: AcceptOptions,
    timing: TimingFlags,
    events: AcceptEvents | None = None,
) -> rollout.AcceptResult:
    """Sample the logged requests (one streaming pass), load the pair, time it if asked, score
    every response position and plan each bucket."""
    import torch
    from transformers.utils import logging as hf_logging

    from specbench.models import check_pair_compatible, load_model
    from specbench.models.fingerprint import pair_fingerprints

    events = events or NoEvents()
    forced = None
    if timing.timings is not None:  # before anything loads: another pair's run is refused
        from specbench.harness.accept.timings_check import check_timings_pair

        forced = check_timings_pair(timing.timings, target, draft, timing.force)
    source, rows = open_logged(
        data.data, data.split, data.fields.columns(), bad_lines=opts.skip_bad_rows
    )
    selection = select_requests(
        source, rows, data.fields, opts.top_k, opts.skip_bad_rows, data.buckets,
        data.max_requests, opts.seed,
    )  # fmt: skip
    notes = selection.notes(data.buckets)

    hf_logging.disable_progress_bar()  # keep stderr to our own lines (errors are one line)
    with events.stage("loading the target and draft models…"):
        t_loaded = load_model(target)
        d_loaded = load_model(draft)
        vocab = check_pair_compatible(t_loaded, d_loaded)
    tokenizers = pair_fingerprints(t_loaded.tokenizer, d_loaded.tokenizer)
    if timing.timings is not None:  # per-token timings of another vocabulary: refused
        from specbench.harness.accept.timings_check import check_timings_tokenizers

        other = check_timings_tokenizers(timing.timings, tokenizers, timing.force)
        forced = "; ".join(n for n in (forced, other) if n) or None
    measured = None
    if timing.measure:
        with events.stage("timing batch-1 forwards of both models…"):
            from specbench.decoding.timing import measure_forward_latency

            measured = ForwardLatency.model_validate(
                measure_forward_latency(
                    t_loaded.model, d_loaded.model, vocab.real_vocab_size, reps=timing.reps
                )
            )
    time_model_for = time_model_resolver(
        timing.timings, timing.t_target, timing.t_draft, timing.verify_slope, timing.cost_ratio,
        measured, timing.default_cost_ratio,
    )  # fmt: skip
    try:
        with events.progress("scoring positions") as on_progress:
            result = measure_requests(
                t_loaded, d_loaded, vocab.real_vocab_size, selection.requests, opts,
                time_model_for, source, selection.skipped, on_progress,
            )  # fmt: skip
    except torch.OutOfMemoryError:
        raise SpecbenchError(
            "out of memory while scoring a batch; lower --batch-tokens (or --chunk-tokens for "
            "long requests)"
        ) from None
    result.warnings[:0] = notes + list(vocab.notes) + ([forced] if forced else [])
    result.meta["target"] = target.model
    result.meta["draft"] = draft.model
    result.meta["device"] = str(t_loaded.device)
    result.meta["dtype"] = str(t_loaded.dtype).removeprefix("torch.")
    result.meta["tokenizers"] = tokenizers
    result.meta["bucket_by"] = data.fields.bucket
    result.meta["rows_read"] = selection.rows_read
    result.meta["bucket_rows"] = selection.bucket_rows
    result.meta["max_requests"] = data.max_requests
    if measured is not None:
        result.meta["measured_timing"] = measured.model_dump()
    return result
