"""Per-answer content checks (specbench/analysis/estimators/content.py): hand-computed shares and the degenerate flag."""

from __future__ import annotations

import random

import pytest

from specbench.analysis.estimators.content import (
    COMPRESSION_MIN,
    answer_checks,
    ngram_length,
    record_checks,
    repeated_line_share,
    repeated_ngram_share,
)

PROSE = (
    "Speculative decoding lets a small draft model propose several tokens, which the large "
    "target model then checks in a single forward pass; accepted tokens are kept and the "
    "first rejected one is replaced by a sample from the corrected distribution."
)


def test_ngram_length_scales_with_the_answer() -> None:
    assert [ngram_length(n) for n in (10, 40, 64, 128, 4000)] == [4, 5, 8, 16, 16]


def test_repeated_ngram_share_hand_computed() -> None:
    assert repeated_ngram_share(list(range(40))) == 0.0
    assert repeated_ngram_share([1, 2] * 20) == 1.0
    # 12 distinct tokens, then the block 100..103 twice: with n = 4 the two copies (8 of 20
    # positions) are covered, nothing else
    seq = list(range(12)) + [100, 101, 102, 103] * 2
    assert repeated_ngram_share(seq, 4) == pytest.approx(8 / 20)
    assert repeated_ngram_share([1, 2, 3], 4) == 0.0  # shorter than n + 1


def test_repeated_line_share_hand_computed() -> None:
    assert repeated_line_share("a\nb\na\n") == pytest.approx(4 / 6)  # "a\n" twice of 6 chars
    assert repeated_line_share("x = 1\n\n\ny = 2\n") == 0.0  # blank lines are not repeats
    assert repeated_line_share("") == 0.0


def test_loops_are_degenerate_and_text_is_not() -> None:
    loop = answer_checks([7, 8] * 20, "\n#" * 20, "max_new_tokens")
    assert loop.degenerate and loop.reason.startswith("repetition")
    assert loop.hit_length_limit and not loop.early_eos
    words = PROSE.split()
    text = answer_checks(list(range(len(words))), PROSE, "eos")
    assert not text.degenerate and text.reason is None
    assert text.repeated_ngram_share == 0.0 and text.compression_ratio > 0.5


def test_long_loop_compresses_below_the_threshold() -> None:
    rng = random.Random(0)
    ids = [rng.randrange(50_000) for _ in range(300)]  # token ids say nothing: judged by text
    loop = answer_checks(ids, "the cat sat. " * 40, "max_new_tokens")
    assert loop.compression_ratio < COMPRESSION_MIN
    assert "compresses to" in loop.reason
    assert loop.repeated_line_share == 0.0  # one long line


def test_empty_and_early_eos() -> None:
    empty = answer_checks([2], "", "eos")
    assert empty.empty and empty.degenerate and empty.reason == "empty"
    short = answer_checks([5, 6, 2], "Paris.", "eos")  # a short answer is a real answer
    assert short.early_eos and not short.degenerate


def test_record_checks_from_older_records_and_multi_turn() -> None:
    rec = {
        "answers": [PROSE, "\n#" * 20],
        "output_ids": [list(range(40)), [7, 8] * 20],
        "stop_reason": ["eos", "max_new_tokens"],
    }
    checks = record_checks(rec)
    assert [c.degenerate for c in checks] == [False, True]
    # a stored check of a record written before a check existed: what it lacks is not flagged
    (old,) = record_checks({"content": [{"tokens": 12, "degenerate": True, "reason": "empty"}]})
    assert (old.tokens, old.degenerate, old.reason, old.empty) == (12, True, "empty", False)
    assert old.target_mean_logprob is None
    assert record_checks({}) == []


def test_target_logprob_is_recorded_not_judged() -> None:
    """The target's mean log-probability is stored (rounded) and does not make an answer
    degenerate on its own; engine answers have none."""
    text = answer_checks([5, 6, 2], "Paris.", "eos", -0.123456)
    assert text.target_mean_logprob == -0.1235 and not text.degenerate
    assert answer_checks([5, 6, 2], "Paris.", "eos", -0.0).degenerate is False
    assert answer_checks(None, "Paris.", "stop").target_mean_logprob is None


@pytest.mark.parametrize(
    ("stop_reason", "hit"),
    [("max_new_tokens", True), ("length", True), ("eos", False), ("stop", False)],
)
def test_an_engine_answer_that_spent_its_budget_hit_the_length_limit(
    stop_reason: str, hit: bool
) -> None:
    """The transformers loop says "max_new_tokens"; an OpenAI-compatible engine's finish_reason
    says "length" (the engine example run read "answers hitting max_new_tokens 0%" while every
    answer had used its whole budget)."""
    assert answer_checks(None, PROSE, stop_reason).hit_length_limit is hit
