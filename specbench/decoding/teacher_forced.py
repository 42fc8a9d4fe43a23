"""Teacher-forced acceptance: exact β at every position of logged responses, no generation.

β_t = Σ_x min(p_t(x), q_t(x)) depends only on the two models' distributions at a context
(docs/theory.md §2), so α = E[β] can be measured over logged prompt + response text with one forward of
the target and one of the draft (estimator (a), teacher-forced), instead of decoding.

    sequences = plan_sequences(prompt_ids, response_ids, max_len=1024, request=0)
    scores = score_sequences(target.model, draft.model, sequences, [SamplingParams(1.0)], vocab)

Batches are left-padded with an attention mask and explicit position ids, so every row's logits
equal those of an unpadded forward; the logits are kept only for the rows that predict response
tokens (`logits_to_keep`). A batch longer than `chunk_tokens` is run in time chunks through a KV
cache (same logits, bounded activation memory). Responses that do not fit the context are
scored in windows (each window sees as much preceding text as fits) or truncated; the caller is
told how many positions were affected and must warn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from transformers import DynamicCache

from specbench.decoding.acceptance_rules import exact_beta
from specbench.decoding.lm import cache_kwargs
from specbench.decoding.sampling import process_logits
from specbench.sampling_params import SamplingParams

Overflow = Literal["window", "truncate"]
ROW_BLOCK = 1024  # logits rows turned into probabilities at once (bounds memory for big vocabs)


def default_batch_tokens(device: torch.device) -> int:
    """Padded tokens per forward batch: small on CPU (cache-friendly, little padding), large on
    accelerators (one big batch keeps them busy)."""
    return 1024 if device.type == "cpu" else 16384


@dataclass(frozen=True)
class ScoredSequence:
    """One forward unit: `context_ids` then `response_ids`; every response token is scored.

    `offset` is the position (0-based, in the request's response) of `response_ids[0]`: 0 unless
    a long response was split into windows.
    """

    request: int
    context_ids: list[int]
    response_ids: list[int]
    offset: int = 0

    @property
    def length(self) -> int:
        return len(self.context_ids) + len(self.response_ids)


@dataclass(frozen=True)
class Planned:
    """What `plan_sequences` made of one request and what did not fit the context."""

    sequences: list[ScoredSequence]
    windowed: bool  # the response was split into windows with shortened context
    prompt_cut: int  # prompt tokens dropped from the front (truncate mode)
    response_cut: int  # response tokens not scored (truncate mode)


def _keep_bos(ids: list[int], n: int, bos_id: int | None) -> list[int]:
    """The last n tokens of ids, with a leading BOS kept in front (as build_context_ids does)."""
    if len(ids) <= n:
        return list(ids)
    if n >= 2 and bos_id is not None and ids and ids[0] == bos_id:
        return [ids[0], *ids[len(ids) - n + 1 :]]
    return list(ids[len(ids) - n :])


def plan_sequences(
    prompt_ids: Sequence[int],
    response_ids: Sequence[int],
    max_len: int,
    request: int,
    overflow: Overflow = "window",
    bos_id: int | None = None,
) -> Planned:
    """Split one request into forward units of at most `max_len` tokens.

    Fits: one unit. Otherwise, `window`: the response is cut into windows of max_len // 2 tokens,
    each scored after the last max_len − window tokens before it (prompt and earlier response);
    `truncate`: a prompt longer than max_len // 2 keeps its last max_len // 2 tokens, and the
    response tokens beyond the context are not scored.
    """
    if max_len < 2:
        raise ValueError("max_len must be >= 2")
    prompt, response = list(prompt_ids), list(response_ids)
    if not prompt or not response:
        raise ValueError("prompt_ids and response_ids must both hold tokens")
    if len(prompt) + len(response) <= max_len:
        return Planned([ScoredSequence(request, prompt, response)], False, 0, 0)
    if overflow == "truncate":
        context = _keep_bos(prompt, max(1, min(len(prompt), max_len // 2)), bos_id)
        kept = response[: max_len - len(context)]
        return Planned(
            [ScoredSequence(request, context, kept)],
            False,
            len(prompt) - len(context),
            len(response) - len(kept),
        )
    window = max(1, max_len // 2)
    full = prompt + response
    units = []
    for start in range(0, len(response), window):
        chunk = response[start : start + window]
        before = full[: len(prompt) + start]
        units.append(
            ScoredSequence(request, _keep_bos(before, max_len - len(chunk), bos_id), chunk, start)
        )
    return Planned(units, True, 0, 0)


@dataclass(frozen=True)
class SequenceScores:
    """Per scored position of one unit: β under each setting, greedy agreement, target NLL."""

    request: int
    offset: int
    beta: np.ndarray  # (S, n) float32: one row per sampling setting
    agree: np.ndarray  # (n,) bool: argmax q == argmax p (β at T = 0)
    target_nll: np.ndarray  # (n,) float32: −log p_target(token) at T = 1 (natural log)


@dataclass(frozen=True)
class RequestScores:
    """All scored positions of one request (windows merged), in response order."""

    request: int
    positions: np.ndarray  # (n,) int: position in the response
    beta: np.ndarray  # (S, n)
    agree: np.ndarray  # (n,)
    target_nll: np.ndarray  # (n,)


def _betas(
    p_logits: torch.Tensor,  # (n, V) float32
    q_logits: torch.Tensor,  # (n, V) float32
    settings: Sequence[SamplingParams],
    agree: torch.Tensor,  # (n,) bool
) -> torch.Tensor:
    """β = Σ min(p, q) under each setting's processed distributions → (S, n)."""
    rows = []
    for params in settings:
        if params.greedy:  # one-hot p and q: β is the argmax match indicator
            rows.append(agree.float())
        else:
            rows.append(
                exact_beta(process_logits(p_logits, params), process_logits(q_logits, params))
            )
    return torch.stack(rows) if rows else p_logits.new_zeros((0, p_logits.shape[0]))


def _forward_tail(
    model: Any,
    ids: torch.Tensor,  # (B, L) left-padded
    mask: torch.Tensor,  # (B, L)
    keep: int,
    chunk_tokens: int,
    vocab_size: int,
) -> torch.Tensor:
    """Logits of the last `keep` positions → (B, keep, V), running in time chunks via a KV cache
    when L > chunk_tokens."""
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    length = ids.shape[1]
    if length <= chunk_tokens:
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=False,
            logits_to_keep=keep,
        )
        return out.logits[:, :, :vocab_size]
    cache = DynamicCache(config=model.config)
    first_needed = length - keep
    parts = []
    for a in range(0, length, chunk_tokens):
        b = min(a + chunk_tokens, length)
        n_keep = b - max(a, first_needed)
        out = model(
            input_ids=ids[:, a:b],
            attention_mask=mask[:, :b],
            position_ids=positions[:, a:b],
            use_cache=True,
            **cache_kwargs(model, cache),
            logits_to_keep=max(n_keep, 1),
        )
        if n_keep > 0:
            parts.append(out.logits[:, -n_keep:, :vocab_size])
    return torch.cat(parts, dim=1)


def make_batches(
    sequences: Sequence[ScoredSequence], batch_tokens: int, max_batch: int
) -> list[list[int]]:
    """Indices of `sequences` grouped so that (rows × longest) ≤ batch_tokens (a longer unit runs
    alone), longest first so padding stays small."""
    order = sorted(range(len(sequences)), key=lambda i: -sequences[i].length)
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = sequences[current[0]].length if current else sequences[i].length
        if current and ((len(current) + 1) * longest > batch_tokens or len(current) >= max_batch):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


@torch.inference_mode()
def score_batch(
    target: Any,
    draft: Any,
    units: Sequence[ScoredSequence],
    settings: Sequence[SamplingParams],
    vocab_size: int,
    unit_settings: Sequence[SamplingParams | None] | None = None,
    chunk_tokens: int = 2048,
    pad_id: int = 0,
    draft_logit_noise: float = 0.0,
    noise_generator: torch.Generator | None = None,
) -> list[SequenceScores]:
    """One padded forward of each model over `units`; β at every response position.

    `unit_settings[i]`, when given, adds one more β row for unit i under its own sampling
    parameters (the request's logged temperature / top-p); None there gives NaN.
    `draft_logit_noise` adds Gaussian noise of that std to the draft logits, as the run's
    ModelDrafter does for `draft.logit_noise`.
    """
    device = next(target.parameters()).device
    draft_device = next(draft.parameters()).device
    length = max(u.length for u in units)
    keep = max(len(u.response_ids) for u in units) + 1
    # The batch is assembled on the host (device="cpu", said explicitly: tests/harness/
    # test_device_placement.py runs this with another default device) and copied over once.
    host = torch.device("cpu")
    ids = torch.full((len(units), length), pad_id, dtype=torch.long, device=host)
    mask = torch.zeros((len(units), length), dtype=torch.long, device=host)
    for row, u in enumerate(units):
        ids[row, length - u.length :] = torch.tensor(u.context_ids + u.response_ids, device=host)
        mask[row, length - u.length :] = 1
    p_all = _forward_tail(target, ids.to(device), mask.to(device), keep, chunk_tokens, vocab_size)
    q_all = _forward_tail(
        draft, ids.to(draft_device), mask.to(draft_device), keep, chunk_tokens, vocab_size
    ).to(device)  # (B, keep, V)
    # Row keep − r − 1 + t predicts response token t (the last kept row predicts past the end).
    rows = [
        (b, keep - len(u.response_ids) - 1 + t)
        for b, u in enumerate(units)
        for t in range(len(u.response_ids))
    ]
    bi = torch.tensor([b for b, _ in rows], device=device)
    ti = torch.tensor([t for _, t in rows], device=device)
    tokens = torch.tensor([tok for u in units for tok in u.response_ids], device=device)
    n_settings = len(settings) + (1 if unit_settings is not None else 0)
    beta = torch.empty((n_settings, len(rows)), dtype=torch.float32, device=host)  # results
    agree = torch.empty(len(rows), dtype=torch.bool, device=host)
    nll = torch.empty(len(rows), dtype=torch.float32, device=host)
    owner = [b for b, _ in rows]
    for a in range(0, len(rows), ROW_BLOCK):
        sl = slice(a, a + ROW_BLOCK)
        p = p_all[bi[sl], ti[sl]].float()  # (n, V)
        q = q_all[bi[sl], ti[sl]].float()
        if draft_logit_noise > 0:
            noise = torch.randn(q.shape, generator=noise_generator, device=q.device)
            q = q + draft_logit_noise * noise
        ag = p.argmax(dim=-1) == q.argmax(dim=-1)
        agree[sl] = ag.cpu()
        nll[sl] = (-torch.log_softmax(p, dim=-1).gather(-1, tokens[sl, None])[:, 0]).cpu()
        beta[: len(settings), sl] = _betas(p, q, settings, ag).cpu()
        if unit_settings is not None:
            block_owner = owner[sl]
            own = torch.full((len(block_owner),), float("nan"), device=host)
            for params in {s for s in unit_settings if s is not None}:
                sel = torch.tensor([unit_settings[o] == params for o in block_owner], device=host)
                if bool(sel.any()):
                    sel_d = sel.to(device)
                    own[sel] = _betas(p[sel_d], q[sel_d], [params], ag[sel_d])[0].cpu()
            beta[-1, sl] = own
    out: list[SequenceScores] = []
    start = 0
    for u in units:
        n = len(u.response_ids)
        out.append(
            SequenceScores(
                u.request,
                u.offset,
                beta[:, start : start + n].numpy(),
                agree[start : start + n].numpy(),
                nll[start : start + n].numpy(),
            )
        )
        start += n
    return out


def score_sequences(
    target: Any,
    draft: Any,
    sequences: Sequence[ScoredSequence],
    settings: Sequence[SamplingParams],
    vocab_size: int,
    request_settings: Mapping[int, SamplingParams] | None = None,
    batch_tokens: int = 16384,
    max_batch: int = 64,
    chunk_tokens: int = 2048,
    pad_id: int = 0,
    draft_logit_noise: float = 0.0,
    seed: int = 0,
    on_progress: Callable[[int], None] | None = None,
) -> list[RequestScores]:
    """Score every unit in padded batches and merge the windows of each request.

    `request_settings` maps a request index to its own sampling parameters (an extra, last β
    row; NaN for requests without). `on_progress(n_positions)` is called after each batch.
    Returns one `RequestScores` per request that has units, in request order.
    """
    noise_gen = torch.Generator(device=next(target.parameters()).device).manual_seed(seed)
    parts: dict[int, list[SequenceScores]] = {}
    for batch in make_batches(sequences, batch_tokens, max_batch):
        units = [sequences[i] for i in batch]
        own = (
            [request_settings.get(u.request) for u in units]
            if request_settings is not None
            else None
        )
        scored = score_batch(
            target,
            draft,
            units,
            settings,
            vocab_size,
            own,
            chunk_tokens,
            pad_id,
            draft_logit_noise,
            noise_gen,
        )
        for s in scored:
            parts.setdefault(s.request, []).append(s)
        if on_progress is not None:
            on_progress(sum(len(u.response_ids) for u in units))
    merged = []
    for request in sorted(parts):
        pieces = sorted(parts[request], key=lambda s: s.offset)
        merged.append(
            RequestScores(
                request,
                np.concatenate([s.offset + np.arange(s.agree.shape[0]) for s in pieces]),
                np.concatenate([s.beta for s in pieces], axis=1),
                np.concatenate([s.agree for s in pieces]),
                np.concatenate([s.target_nll for s in pieces]),
            )
        )
    return merged
