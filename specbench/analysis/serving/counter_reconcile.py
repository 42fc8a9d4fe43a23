"""Counter reconciliation: do a batch's spec-decode counter deltas describe only the requests
specbench sent? (docs/theory.md §17)

A `/metrics` endpoint shared with other traffic (a gateway's replica serving other users, a
second benchmark) counts that traffic's drafts too, and the acceptance computed from the deltas
is then someone else's. specbench knows what it sent and what it received, so the deltas can be
checked against it.

The identity. A speculative engine emits a request's first token at prefill; every later step
drafts, verifies, and emits the accepted draft tokens plus one (the bonus or correction token).
For one request of n output tokens, over its S steps with a draft and its U steps without one
(an n-gram drafter with no match):

    n − 1 = Σ_s (accepted_s + 1) + U − overflow,   0 ≤ overflow ≤ γ

where `overflow` is what the last step accepted past `max_tokens` or a stop (counted by the
engine, not returned). Summed over the turns of a batch, with W = accepted + drafts from the
counter deltas and E = Σ (n − 1) over the turns specbench received:

    W − E = Σ overflow − Σ U   ≤   γ · turns

Three more sources of honest excess are allowed for: a request that failed or was retried
generated up to max_tokens (+ γ) that specbench did not receive; and the counters of the last
step of each request still in flight when the previous batch (or warm-up) ended may land after
that batch's closing scrape, each at most γ + 1: at most C of them, C the largest concurrency
of the run. The rule:

    polluted  ⇔  W − E > slack,   slack = γ·turns + (max_tokens + γ)·extra_attempts + (γ + 1)·C

Its false-alarm rate is 0 whenever the engine counts as described (the bound is not
statistical: the slack covers the worst case, not a quantile); `tests/unit/test_counter_reconcile.py`
checks it on seeded simulated batches (overflow, drafts without a match, stragglers, retries).
What it cannot see: foreign work smaller than the slack, or hidden by steps without a draft
(Σ U); its detection is measured in the same test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specbench.analysis.serving.spec_counters import SpecCounters


@dataclass(frozen=True)
class Reconciliation:
    work: float  # W = accepted + drafts, from the counter deltas
    expected: float  # E = Σ (completion tokens − 1) over the turns received
    slack: float  # the honest excess allowed
    polluted: bool

    @property
    def excess(self) -> float:
        return self.work - self.expected

    def to_dict(self) -> dict[str, float | bool]:
        """The check as a batch's record stores it (records.jsonl `reconciliation`)."""
        return {
            "work": self.work,
            "expected": self.expected,
            "excess": self.excess,
            "slack": self.slack,
            "polluted": self.polluted,
        }


def reconcile(
    counters: SpecCounters,
    *,
    tokens_after_first: int,
    turns: int,
    extra_attempts: int,
    max_tokens: int,
    gamma: int,
    max_in_flight: int,
) -> Reconciliation:
    """Check counter deltas against what specbench received: `tokens_after_first` = Σ (n − 1)
    over the `turns` completed, `extra_attempts` = requests sent that returned nothing counted
    (failed or retried), `max_tokens` their bound, `gamma` the draft length the setting runs,
    `max_in_flight` the largest concurrency of the run (C)."""
    g = max(gamma, 0)
    work = counters.accepted + counters.drafts
    slack = g * turns + (max_tokens + g) * max(extra_attempts, 0) + (g + 1) * max(max_in_flight, 1)
    return Reconciliation(
        float(work), float(tokens_after_first), float(slack), work - tokens_after_first > slack
    )


def polluted_message(where: str, r: Mapping[str, Any]) -> str:
    """The run's warning line for a polluted batch (`r`: a `Reconciliation.to_dict()`)."""
    return (
        f"{where}: the spec-decode counters show more work than specbench sent (accepted + drafts "
        f"= {r['work']:.0f}, tokens received allow at most {r['expected'] + r['slack']:.0f}); another "
        "client shares this /metrics endpoint, so this batch's counter acceptance is not used "
        "(set metrics_url to the replica specbench talks to, or start the server with "
        "--per-request-spec-decode-metrics)"
    )
