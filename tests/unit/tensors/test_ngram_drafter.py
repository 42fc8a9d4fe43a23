"""The n-gram prompt-lookup drafter by hand: it proposes the continuation of the latest match of the
longest suffix (no model; a CPU clock)."""

from __future__ import annotations

import torch

from specbench.decoding.drafters import NgramDrafter, Proposal
from specbench.decoding.timing import Clock

CLOCK = Clock(torch.device("cpu"))


def test_ngram_lookup_proposes_the_continuation_of_the_latest_match() -> None:
    d = NgramDrafter(1, 3, CLOCK)
    #        0  1  2  3  4  5  6  7  8  9
    prompt = [5, 6, 7, 8, 9, 5, 6, 7, 1, 2]
    d.start(prompt, 5)  # ... 1 2 5: suffix "2 5" unseen, "5" last seen at 5 → propose 6 7 1
    p = d.propose(3)
    assert p.tokens == [6, 7, 1] and p.q_draft is None
    d.commit(p, 2, 3)  # accepted 6 7, then 3
    assert d.seq[-3:] == [6, 7, 3]
    assert d.propose(4).tokens == []  # "3" never seen before, nor "7 3", "6 7 3"
    d.commit(Proposal([], None, []), 0, 8)
    assert d.propose(2).tokens == [9, 5]  # "3 8"? no; "8" at 3 → 9 5
