"""Teacher forcing's planning without a model (decoding/teacher_forced.py): windows and truncation of
long requests, and batches within the token budget."""

from __future__ import annotations

from specbench.decoding.teacher_forced import (
    ScoredSequence,
    make_batches,
    plan_sequences,
)


def test_plan_sequences_fits_in_one_unit() -> None:
    planned = plan_sequences([1, 2, 3], [4, 5], max_len=5, request=7)
    assert planned.sequences == [ScoredSequence(7, [1, 2, 3], [4, 5], 0)]
    assert (planned.windowed, planned.prompt_cut, planned.response_cut) == (False, 0, 0)


def test_plan_sequences_windows_keep_bos_and_cover_every_response_token() -> None:
    prompt, response = [0, 11, 12, 13], list(range(100, 110))
    planned = plan_sequences(prompt, response, max_len=8, request=0, bos_id=0)
    assert planned.windowed
    # windows of 8 // 2 = 4 response tokens, each after the last 4 tokens before it (BOS kept)
    assert [s.offset for s in planned.sequences] == [0, 4, 8]
    assert [t for s in planned.sequences for t in s.response_ids] == response
    assert planned.sequences[0].context_ids == prompt
    assert planned.sequences[1].context_ids == [0, 101, 102, 103]
    assert planned.sequences[2].context_ids == [0, 103, 104, 105, 106, 107]
    assert all(s.length <= 8 for s in planned.sequences)
    assert planned.sequences[2].response_ids == [108, 109]


def test_plan_sequences_truncate_cuts_prompt_front_and_response_tail() -> None:
    planned = plan_sequences(
        [0, *range(1, 10)], list(range(50, 60)), max_len=8, request=0, overflow="truncate", bos_id=0
    )
    (seq,) = planned.sequences
    assert seq.context_ids == [0, 7, 8, 9]  # 8 // 2 tokens: BOS + the last three
    assert seq.response_ids == [50, 51, 52, 53]
    assert (planned.prompt_cut, planned.response_cut) == (6, 6)


def test_make_batches_respects_the_token_budget_longest_first() -> None:
    seqs = [ScoredSequence(i, [1] * n, [2]) for i, n in enumerate([3, 9, 5, 5, 1])]
    batches = make_batches(seqs, batch_tokens=12, max_batch=8)
    assert batches[0] == [1]  # 10 tokens: a second row would need 20
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3, 4]
    for b in batches:
        longest = max(seqs[i].length for i in b)
        assert len(b) == 1 or len(b) * longest <= 12
