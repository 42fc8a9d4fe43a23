"""Content checks on one generated answer: is the measurement about real text?

A model that loops ("the the the", a repeated line, a run of newlines) is trivially predicted by
any draft, so acceptance and speedup measured on such output say nothing about real traffic
(docs/theory.md §13). These checks are cheap and pure (no model, no torch): they read the
generated token ids and the decoded text of one answer (one turn), and `runner` stores their
result with each prompt's record. "Identical across prompts" needs every answer of a workload and
is computed by the analysis (`analysis.decide.validity`).

Checks (thresholds below, documented in docs/theory.md §13):
- repeated n-gram share: the share of the answer's tokens covered by an n-gram that occurs at
  least twice in the answer, n = length / 8 clamped to 4 … 16 tokens (a loop of any period covers
  nearly all of its span; prose and code rarely repeat 16 tokens verbatim, and short answers need
  a shorter n to show a loop at all);
- repeated line share: the share of the text's characters in non-blank lines that occur more
  than once (stripped);
- compression ratio: zlib-compressed bytes / raw bytes (low = repetitive), judged only on texts
  of at least COMPRESSION_MIN_BYTES (zlib's fixed overhead dominates shorter ones);
- stop: ended by EOS, by the length limit (`max_new_tokens`) or a stop string; early EOS = EOS
  within the first EARLY_EOS_TOKENS tokens; empty = no visible text.

An answer is **degenerate** when it is empty or repetitive (any of the three repetition checks over
its threshold); early EOS and the length limit are recorded and counted but are not degenerate on
their own (short answers and cut-off long answers are real text).

The target's mean log-probability of its own answer is measured by the decoding loops (they hold
the target's distribution at every emitted position; `spec.generate`) and passed in here; engine
backends (vllm / openai) do not report it, so their answers have None.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from specbench.record_line import RecordLine

NGRAM_MIN, NGRAM_MAX = 4, 16  # n-gram length (tokens) = answer length / 8, clamped to these
REPEATED_NGRAM_MAX = 0.5  # share of tokens covered by a repeated n-gram above which: repetition
REPEATED_LINE_MAX = 0.5  # share of characters in repeated non-blank lines above which: repetition
COMPRESSION_MIN = 0.2  # zlib ratio below which (on ≥ COMPRESSION_MIN_BYTES bytes): repetition
COMPRESSION_MIN_BYTES = 256
EARLY_EOS_TOKENS = 4  # EOS within this many tokens is "early EOS"
IDENTICAL_MIN_TOKENS = 8  # answers this long that are identical across prompts are degenerate


class AnswerCheck(BaseModel):
    """The content checks of one answer (one turn), as a record's `content` holds them. A
    record written before a check existed lacks its key: the default reads as "not flagged"."""

    model_config = ConfigDict(frozen=True)

    tokens: int
    stop_reason: str | None = None
    # an engine's answers end with OpenAI's finish_reason: "length" is the budget spent
    hit_length_limit: bool = False
    early_eos: bool = False
    empty: bool = False
    repeated_ngram_share: float | None = None
    repeated_line_share: float | None = None
    compression_ratio: float | None = None
    # mean log p_target(token) over the answer (docs/theory.md §13); informative, not a check
    target_mean_logprob: float | None = None
    degenerate: bool = False
    reason: str | None = None


def ngram_length(n_tokens: int) -> int:
    """The n of the repeated-n-gram check for an answer of `n_tokens` tokens."""
    return min(NGRAM_MAX, max(NGRAM_MIN, n_tokens // 8))


def repeated_ngram_share(tokens: Sequence[Any], n: int | None = None) -> float:
    """Share of positions covered by an n-gram that occurs at least twice (overlaps count);
    n defaults to `ngram_length(len(tokens))`."""
    length = len(tokens)
    n = ngram_length(length) if n is None else n
    if length < n + 1:
        return 0.0
    grams = [tuple(tokens[i : i + n]) for i in range(length - n + 1)]
    counts = Counter(grams)
    covered = [False] * length
    for start, gram in enumerate(grams):
        if counts[gram] > 1:
            for j in range(start, start + n):
                covered[j] = True
    return sum(covered) / length


def repeated_line_share(text: str) -> float:
    """Share of characters (newline included) in non-blank lines whose stripped text occurs more
    than once in the answer."""
    lines = text.splitlines(keepends=True)
    if not text:
        return 0.0
    counts = Counter(s for line in lines if (s := line.strip()))
    repeated = sum(len(line) for line in lines if line.strip() and counts[line.strip()] > 1)
    return repeated / len(text)


def compression_ratio(text: str) -> float | None:
    """zlib-compressed size / raw size of the UTF-8 text; None when empty."""
    raw = text.encode("utf-8")
    if not raw:
        return None
    return len(zlib.compress(raw, 9)) / len(raw)


def answer_checks(
    output_ids: Sequence[int] | None,
    text: str,
    stop_reason: str | None,
    target_mean_logprob: float | None = None,
) -> AnswerCheck:
    """The content checks of one answer (one turn). Without token ids (some engine records), the
    n-gram check runs over whitespace-separated words instead."""
    tokens: Sequence[Any] = output_ids if output_ids is not None else text.split()
    n_tokens = len(tokens)
    empty = not text.strip()
    ngram = repeated_ngram_share(tokens)
    line = repeated_line_share(text)
    ratio = compression_ratio(text)
    reasons = []
    if empty:
        reasons.append("empty")
    else:
        if ngram > REPEATED_NGRAM_MAX:
            n = ngram_length(n_tokens)
            reasons.append(f"repetition: {ngram:.0%} of tokens in a repeated {n}-gram")
        if line > REPEATED_LINE_MAX:
            reasons.append(f"repetition: {line:.0%} of the text in repeated lines")
        if (
            ratio is not None
            and len(text.encode("utf-8")) >= COMPRESSION_MIN_BYTES
            and ratio < COMPRESSION_MIN
        ):
            reasons.append(f"repetition: compresses to {ratio:.0%}")
    return AnswerCheck(
        tokens=n_tokens,
        stop_reason=stop_reason,
        hit_length_limit=stop_reason in ("max_new_tokens", "length"),
        early_eos=stop_reason == "eos" and n_tokens <= EARLY_EOS_TOKENS,
        empty=empty,
        repeated_ngram_share=round(ngram, 4),
        repeated_line_share=round(line, 4),
        compression_ratio=None if ratio is None else round(ratio, 4),
        target_mean_logprob=None if target_mean_logprob is None else round(target_mean_logprob, 4),
        degenerate=bool(reasons),
        reason="; ".join(reasons) or None,
    )


def record_checks(rec: RecordLine) -> list[AnswerCheck]:
    """The per-turn checks of a record: as stored by `run` (the record's JSON, read here), or
    computed from its answers and token ids (records written before the checks existed). []
    when the record holds no answers."""
    if isinstance(rec.get("content"), list):
        return [AnswerCheck.model_validate(c) for c in rec["content"]]
    answers = rec.get("answers")
    if not isinstance(answers, list):
        return []
    ids = rec.get("output_ids")
    stops = rec.get("stop_reason")
    out = []
    for i, text in enumerate(answers):
        tok = ids[i] if isinstance(ids, list) and i < len(ids) else None
        stop = stops[i] if isinstance(stops, list) and i < len(stops) else None
        out.append(answer_checks(tok, str(text), stop))
    return out


def degenerate_reason(checks: list[AnswerCheck]) -> str | None:
    """The first degenerate turn's reason (with its turn number when there are several)."""
    for i, c in enumerate(checks):
        if c.degenerate:
            reason = c.reason or "degenerate"
            return reason if len(checks) == 1 else f"turn {i + 1}: {reason}"
    return None
