"""The end of the token budget: tokens per round when rounds near max_new_tokens are capped
(docs/theory.md §3, "End of budget").

The decoding loop (decoding/generate.py) never drafts more than it can emit: a round that starts with
r tokens left in the turn's budget drafts g(r) = max(1, min(γ, r − 1)). A γ run and a γ_max run
are capped at different rounds, so truncating each recorded round to γ on its own (a round that
accepted A accepts min(A, γ)) is right only far from the budget: the γ run spends more rounds
near the end, each capped lower, than the γ_max rounds it is predicted from. Instead the γ run is
walked down its budget. With P(A = a) the prompt's distribution of accepted tokens per γ_max
round and A_g = min(A, g):

    N(r)   = 1 + Σ_a P(A_g = a) N(r − a − 1)                  expected rounds, N(r ≤ 0) = 0
    Acc(r) = E[A_g] + Σ_a P(A_g = a) Acc(r − a − 1)          expected accepted tokens

so the turn's tokens per round is 1 + Acc(r₀) / N(r₀), r₀ = tokens after the prefill's first.
Far from the budget (r ≥ γ + 2, g = γ) the recursion is linear with constant coefficients, so
N and Acc at any r come from a matrix power of one (2γ + 3)-square transition: exact at every
length, cheap at 32k tokens. A turn that ended at EOS or a stop string is not capped (its budget
is not recorded and it ended before reaching it): there Wald's identity makes the walk's ratio
exactly 1 + E[A_γ], the per-round truncation.

P(A = a) is estimated from every round of the prompt, the capped ones censored at their length
(`censored_pmf`), not from its full rounds alone: which rounds start far enough from the budget
to be full depends on how much the earlier ones accepted (a first-passage sample), and their
mean acceptance is biased high when a prompt has few rounds (+1.2 % at γ = 1 on 16-token
outputs in `analysis.calibration.prediction_calibration`; +0.6 % with the censored estimate). The iid model
uses the same walk with P(A = a) = α^a (1 − α), α^γ_max at a = γ_max.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.record_line import RecordLine

BUDGET_STOP = "max_new_tokens"  # the stop reason of a turn that used its whole budget
EOS_STOP = "eos"


@dataclass(frozen=True)
class TurnSpan:
    """One turn of a record: its rounds [start, stop), the tokens they emitted (the turn's
    output after the prefill's first token) and how it ended: "budget" (max_new_tokens: every
    round drafts at most the tokens left − 1), "eos" (no round accepts past the EOS, where the
    drafter stops proposing) or "free" (a stop string, which cuts after the round, or unknown)."""

    start: int
    stop: int
    tokens: int
    end: str

    @property
    def capped(self) -> bool:
        return self.end == "budget"


def turn_spans(rec: Mapping[str, Any]) -> list[TurnSpan]:
    """Split a record's rounds (the turns' rounds are concatenated) into its turns by the tokens
    each turn kept. Records without per-turn fields (or inconsistent ones) read as one turn that
    did not run into its budget — the per-round truncation, as before budgets were modelled."""
    rounds = rec["rounds"]
    accepted = list(rounds["accepted"])
    whole = [TurnSpan(0, len(accepted), sum(a + 1 for a in accepted), "free")]
    per_turn, reasons = rec.get("new_tokens_per_turn"), rec.get("stop_reason")
    emitted = rounds.get("emitted")
    if not per_turn or not isinstance(reasons, list) or len(reasons) != len(per_turn):
        return whole
    if emitted is None or len(emitted) != len(accepted):
        return whole
    spans, i = [], 0
    for n_tokens, reason in zip(per_turn, reasons, strict=True):
        want, got, start = int(n_tokens) - 1, 0, i
        while got < want and i < len(emitted):
            got += int(emitted[i])
            i += 1
        if got != want:
            return whole
        end = {BUDGET_STOP: "budget", EOS_STOP: "eos"}.get(str(reason), "free")
        spans.append(TurnSpan(start, i, want, end))
    return spans if i == len(accepted) else whole


def iid_pmf(alpha: float, gamma_max: int) -> np.ndarray:
    """The iid model's P(A = a): α^a (1 − α) below γ_max, α^γ_max at γ_max (docs/theory.md §3)."""
    a = min(max(float(alpha), 0.0), 1.0)
    pmf = a ** np.arange(gamma_max + 1) * (1.0 - a)
    pmf[gamma_max] = a**gamma_max
    return pmf


def _truncate(pmf: np.ndarray, g: int) -> np.ndarray:
    """(U, G + 1) → (U, g + 1): the distribution of min(A, g)."""
    out = pmf[:, : g + 1].copy()
    out[:, g] = pmf[:, g:].sum(axis=1)
    return out


def capped_walk(
    pmf: np.ndarray, gamma: int, remaining: Sequence[int] | np.ndarray, eos: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Expected (rounds, accepted tokens) of a fixed-γ walk down each unit's budget: pmf is
    (U, γ_max + 1) with γ ≤ γ_max, `remaining` the tokens r₀ each unit has left after its first
    (module docstring). Units with r₀ ≤ 0 spend no round. `eos`: the turn ended at EOS, so a
    round accepts at most the r tokens left (g(r) = min(γ, r)) instead of the budget's cap."""
    r0 = np.asarray(remaining, int)
    units, k = len(r0), gamma + 1
    pmf = np.atleast_2d(np.asarray(pmf, float))
    pmf = np.broadcast_to(pmf, (units, pmf.shape[1]))  # one distribution may serve every unit
    # exact recursion for r = 1..γ + 1, where the cap g(r) = max(1, min(γ, r − 1)) still binds
    n_tab = np.zeros((k + 1, units))  # row r holds N(r); row 0 is N(0) = 0
    a_tab = np.zeros((k + 1, units))
    for r in range(1, k + 1):
        g = min(gamma, r) if eos else max(1, min(gamma, r - 1))
        p = _truncate(pmf, g)
        n_tab[r], a_tab[r] = 1.0, p @ np.arange(g + 1)
        for a in range(g + 1):
            if r - a - 1 > 0:
                n_tab[r] += p[:, a] * n_tab[r - a - 1]
                a_tab[r] += p[:, a] * a_tab[r - a - 1]
    n_out = n_tab[np.clip(r0, 0, k), np.arange(units)]
    a_out = a_tab[np.clip(r0, 0, k), np.arange(units)]
    far = r0 > k
    if far.any():
        n_far, a_far = _linear_tail(
            _truncate(pmf[far], gamma), n_tab[:, far], a_tab[:, far], r0[far]
        )
        n_out[far], a_out[far] = n_far, a_far
    return n_out, a_out


def _linear_tail(
    p: np.ndarray, n_tab: np.ndarray, a_tab: np.ndarray, r0: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """N(r₀), Acc(r₀) for r₀ > γ + 1 by powers of the uncapped recursion's transition.

    State x_r = [N(r) … N(r − γ), Acc(r) … Acc(r − γ), 1]; x_{r+1} = M x_r. Starting from
    x_{γ+1} (the capped table), x_{r₀} = M^(r₀ − γ − 1) x_{γ+1}, by binary powers per unit."""
    units, k = p.shape  # k = γ + 1
    size = 2 * k + 1
    m = np.zeros((units, size, size))
    mean = p @ np.arange(k)
    m[:, 0, :k] = p  # N(r+1) = 1 + Σ_a p_a N(r − a)
    m[:, 0, -1] = 1.0
    m[:, k, k : 2 * k] = p  # Acc(r+1) = E[A_γ] + Σ_a p_a Acc(r − a)
    m[:, k, -1] = mean
    for j in range(1, k):  # shifts
        m[:, j, j - 1] = 1.0
        m[:, k + j, k + j - 1] = 1.0
    m[:, -1, -1] = 1.0
    x = np.concatenate([n_tab[k::-1][:k].T, a_tab[k::-1][:k].T, np.ones((units, 1))], axis=1)
    steps = r0 - k
    power = m
    while steps.any():
        odd = (steps & 1).astype(bool)
        if odd.any():
            x[odd] = np.einsum("uij,uj->ui", power[odd], x[odd])
        steps = steps >> 1
        if steps.any():
            power = power @ power
    return x[:, 0], x[:, k]


def tokens_per_round_by_prompt(
    records: Sequence[RecordLine], pmfs: np.ndarray, gamma_max: int
) -> np.ndarray:
    """(P, γ_max): each prompt's ā_p(γ) = Σ_turns emitted / Σ_turns rounds of a γ run, turns
    that ended at the budget or at EOS walked down to it (`capped_walk`), the others at
    1 + E[min(A, γ)] (where the walk's ratio is exact by Wald's identity). pmfs is (P, γ_max + 1)."""
    pmfs = np.asarray(pmfs, float).reshape(len(records), gamma_max + 1)
    spans = [turn_spans(rec) for rec in records]
    walks = {
        end: (
            np.asarray([i for i, s in enumerate(spans) for t in s if t.end == end], int),
            np.asarray([t.tokens for s in spans for t in s if t.end == end], int),
        )
        for end in ("budget", "eos")
    }
    free = np.asarray([sum(t.tokens for t in s if t.end == "free") for s in spans], float)
    out = np.full((len(records), gamma_max), np.nan)
    for g in range(1, gamma_max + 1):
        uncapped = 1.0 + _truncate(pmfs, g) @ np.arange(g + 1)  # (P,)
        rounds = free / uncapped
        emitted = free.copy()
        for end, (owner, tokens) in walks.items():
            if owner.size:
                n, acc = capped_walk(pmfs[owner], g, tokens, eos=end == "eos")
                np.add.at(rounds, owner, n)
                np.add.at(emitted, owner, n + acc)
        with np.errstate(invalid="ignore", divide="ignore"):
            per = np.where(rounds > 0, emitted / rounds, uncapped)
        out[:, g - 1] = per
    return out


def censored_pmf(
    accepted: Sequence[int] | np.ndarray, limits: Sequence[int] | np.ndarray, gamma_max: int
) -> np.ndarray:
    """P(A = a), a = 0..γ_max, from every round of a γ_max run. `limits` holds, per round, the
    tokens the budget let it draft (γ_max when the budget did not cap it): a capped round that
    accepted all it drafted is censored (A ≥ its limit). Per-position rates over the rounds
    observed at each depth, h_i = #(A ≥ i) / #(A ≥ i − 1) (§2 (d)), chained as
    P(A ≥ i) = Π_{j ≤ i} h_j; a depth no round reached carries the last rate on. All NaN
    without any round. A round its drafter cut short (n-gram, EOS) is an exact observation:
    at a smaller γ it would be as short."""
    acc, lim = np.asarray(accepted, int), np.asarray(limits, int)
    if acc.size == 0:
        return np.full(gamma_max + 1, np.nan)
    censored = (lim < gamma_max) & (acc >= lim)
    surv = np.ones(gamma_max + 2)
    surv[gamma_max + 1] = 0.0
    rate = 1.0
    for i in range(1, gamma_max + 1):
        seen = ~censored | (lim >= i)
        reached = int((seen & (acc >= i - 1)).sum())
        if reached:
            rate = float((seen & (acc >= i)).sum()) / reached
        surv[i] = surv[i - 1] * rate
    return surv[:-1] - surv[1:]
