"""Trace replay: what would each γ policy have done on the rounds a run recorded at γ_max?

The first γ draft tokens of a round and their accept decisions do not depend on what is drafted
after them (docs/theory.md §3), so a round recorded at γ_max with A accepted tokens would have accepted
min(A, γ) at any γ ≤ γ_max. Sampled traces are replayed round by round that way. Greedy traces
are replayed position by position (`replay_greedy_prompt`): the output is the same at any γ, so
the policy's own round boundaries are laid over the recorded match/mismatch of every position.
Both replays go turn by turn, and a turn that ran into max_new_tokens (or ended at EOS) is walked
down to its end with the policy's own cap — a round drafts at most max(1, min(γ, tokens left − 1))
— rather than with the caps the γ_max run met (docs/theory.md §3, "End of budget"). Replaying a
policy over a prompt's recorded rounds gives its γ per round and tokens per round; the run's
fitted timing model turns them into ITL and speedup:

    round time(γ) = draft forwards·T_d + (t0 + t1·γ) + (o0 + o1·γ)   (`analysis.arithmetic.timing_model`)

A sampled prompt replayed round by round yields ā_p(policy) = tokens / rounds over the trace's
rounds; a real run would spend L_p / ā_p rounds on that prompt's L_p tokens, so prompts are pooled
by tokens, not by rounds (docs/theory.md §3): tokens per round Σ L_p / Σ (L_p / ā_p) and pooled
throughput Σ L_p / Σ (L_p · time_p / tokens_p) — the quantities the run's measured rows hold.

(the confidence policy spends one more draft forward when it stops early; each prompt also pays
its measured draft prefill). The round-start contexts of a real run under the policy differ a
little from the trace's — the validation against real policy runs measures that error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.analysis.arithmetic.end_of_budget import TurnSpan, turn_spans
from specbench.analysis.arithmetic.timing_model import TimingModel, fit_from_records
from specbench.analysis.stats.resampling import Estimate, ratio_ci
from specbench.config import PolicySpec
from specbench.decoding.policies import Policy
from specbench.errors import SpecbenchError
from specbench.record_line import RecordLine

Timing = TimingModel  # the one timing model (round_ms(γ, draft_forwards))
PolicyOptions = dict[str, float]  # `--policy name:key=value,…`, as `config.PolicySpec` takes them


@dataclass(frozen=True)
class Trace:
    """One prompt's rounds recorded at γ_max, as the replay reads them (`records.Rounds`)."""

    accepted: list[int]
    drafted: list[int]
    draft_top_prob: list[list[float]]  # per round, the draft's top probability at each position
    gamma: list[int] | None = None  # γ asked per round (fewer than γ_max near the budget's end)

    @classmethod
    def of(cls, rounds: Mapping[str, Any]) -> Trace:
        """A record's `rounds` (checked against `records.Rounds` when the records were read)."""
        return cls(
            rounds["accepted"], rounds["drafted"], rounds["draft_top_prob"], rounds.get("gamma")
        )


@dataclass(frozen=True)
class Replay:
    tokens_per_round: Estimate
    speedup: Estimate
    mean_gamma: float


def _budget_capped(rounds: Trace, gamma_max: int | None) -> list[bool]:
    """Which recorded rounds the γ_max run capped near max_new_tokens (it asked for fewer than
    γ_max tokens): their acceptance is censored, so the replay draws from the others."""
    asked = rounds.gamma
    if gamma_max is None or asked is None:
        return [False] * len(rounds.accepted)
    return [int(g) < gamma_max for g in asked]


def _one_turn(rounds: Trace) -> list[TurnSpan]:
    return [TurnSpan(0, len(rounds.accepted), sum(a + 1 for a in rounds.accepted), "free")]


def _known_draw(
    i: int, asked: int, rows: range, rounds: Trace, capped: list[bool]
) -> tuple[int, bool]:
    """The recorded round whose acceptance a replayed round asking `asked` tokens uses, and
    whether that round was capped by γ_max's budget (not by its drafter). A capped round that
    accepted all it drafted is censored (A ≥ its length): when more is asked, the next uncapped
    round of the turn that accepted at least as many stands in for it (hot-deck), so the rounds
    near the end are neither dropped (which biases the rest high, docs/theory.md §3) nor cut."""
    acc, dra = rounds.accepted, rounds.drafted
    if not capped[i] or acc[i] < dra[i] or asked <= dra[i]:
        return i, capped[i]
    n = len(rows)
    for step in range(1, n):
        j = rows[(i - rows.start + step) % n]
        if not capped[j] and acc[j] >= acc[i]:
            return j, False
    return i, capped[i]


def replay_prompt(
    policy: Policy,
    rounds: Trace,
    timing: Timing,
    spans: Sequence[TurnSpan] | None = None,
    gamma_max: int | None = None,
) -> tuple[int, int, float, list[int]]:
    """(tokens, rounds, time_ms, γ per round) of one recorded prompt under `policy`, turn by turn
    (`spans`, from `end_of_budget.turn_spans`; default one turn that did not reach its budget).

    A turn that ran into max_new_tokens is walked down its budget as the decoding loop does —
    each round drafts at most max(1, min(γ, tokens left − 1)) — drawing the recorded rounds'
    acceptance in order (cycling when the policy needs more rounds than γ_max did): the rounds
    near the end are capped by the policy's own budget walk, not by γ_max's (docs/theory.md §3).
    A turn that ended at EOS is walked the same way, a round accepting at most the tokens left.
    Any other turn (a stop string; no per-turn fields) replays each recorded round once."""
    capped_rec = _budget_capped(rounds, gamma_max)
    accepted_all, drafted_all, top_all = rounds.accepted, rounds.drafted, rounds.draft_top_prob
    tokens, time_ms = 0, 0.0
    gammas: list[int] = []
    threshold = policy.min_confidence
    for span in spans if spans is not None else _one_turn(rounds):
        rows = range(span.start, span.stop)
        if not rows:
            continue
        accepted_sim: list[int] = []
        drafted_sim: list[int] = []
        gamma = policy.initial_gamma()  # the loop starts each turn's policy afresh
        t, j = 0, 0
        while (j < len(rows)) if span.end == "free" else (t < span.tokens):
            asked = max(1, min(gamma, span.tokens - t - 1)) if span.capped else gamma
            i, by_budget = _known_draw(rows[j % len(rows)], asked, rows, rounds, capped_rec)
            a_rec, k_rec, top = accepted_all[i], drafted_all[i], top_all[i]
            # a round the budget cut short says nothing of the drafter's length: only its own
            g = asked if by_budget else (min(asked, k_rec) if k_rec > 0 else 0)
            forwards = g
            if threshold > 0 and g > 1:
                # confidence stop: keep leading positions whose top probability reaches it
                keep = 1
                while keep < g and keep < len(top) and top[keep] >= threshold:
                    keep += 1
                forwards = keep + (1 if keep < g else 0)
                g = keep
            a = min(a_rec, g, span.tokens - t) if span.end == "eos" else min(a_rec, g)
            tokens += a + 1
            t += a + 1
            j += 1
            time_ms += timing.round_ms(g, forwards)
            accepted_sim.append(a)
            drafted_sim.append(g)
            gammas.append(g)
            gamma = policy.update(gamma, accepted_sim, drafted_sim)
    return tokens, len(gammas), time_ms, gammas


def _position_trace(
    rounds: Trace, span: TurnSpan | None = None
) -> tuple[list[int | None], list[float | None]]:
    """Greedy traces, position by position: whether the draft's greedy token matched the target's
    at each generated position, and the draft's top probability there.

    Under greedy decoding the output does not depend on γ, and an accepted draft token equals the
    target's, so the draft's context at every tested position is the true output: each round of a
    γ_max trace reveals the match (1) or mismatch (0) at the positions it tested. Only the
    positions of bonus tokens (after an all-accepted round) were never tested: None. With a
    `span`, one turn's positions, cut at the tokens it kept.
    """
    match: list[int | None] = []
    conf: list[float | None] = []
    lo, hi = (0, len(rounds.accepted)) if span is None else (span.start, span.stop)
    for a, k, top in zip(
        rounds.accepted[lo:hi], rounds.drafted[lo:hi], rounds.draft_top_prob[lo:hi],
        strict=True,
    ):  # fmt: skip
        match += [1] * a
        conf += list(top[:a])
        if a < k:
            match.append(0)
            conf.append(top[a])
        else:
            match.append(None)
            conf.append(None)
    if span is not None:
        del match[span.tokens :], conf[span.tokens :]
    return match, conf


def replay_greedy_prompt(
    policy: Policy,
    rounds: Trace,
    timing: Timing,
    spans: Sequence[TurnSpan] | None = None,
    gamma_max: int | None = None,
) -> tuple[int, int, float, list[int]]:
    """Exact replay of a greedy trace (up to untested bonus positions, taken as matches): the
    policy's rounds are laid over the same output sequence, whatever their boundaries, turn by
    turn; a turn that ran into max_new_tokens caps each round at the tokens left, as the loop
    does. Without `spans`, one turn capped at the trace's length (the former behaviour)."""
    tokens, n_rounds, time_ms = 0, 0, 0.0
    all_drafted: list[int] = []
    turns = [None] if spans is None else list(spans)
    threshold = policy.min_confidence
    for span in turns:
        match, conf = _position_trace(rounds, span)
        length = len(match)
        capped = span is None or span.capped
        accepted_sim: list[int] = []
        drafted_sim: list[int] = []
        t = 0
        gamma = policy.initial_gamma()
        while t < length:
            # the loop never drafts past the token budget
            g = max(1, min(gamma, length - t - 1)) if capped else gamma
            forwards = g
            if threshold > 0 and g > 1:
                keep = 1
                while keep < g and t + keep < length and (conf[t + keep] or 1.0) >= threshold:
                    keep += 1
                forwards = keep + (1 if keep < g else 0)
                g = keep
            a = 0
            while a < g and t + a < length and match[t + a] != 0:
                a += 1
            # a round's tokens count as measured τ counts them (1 + accepted, an accepted draft
            # cut by the budget included); the walk advances by what the loop keeps
            tokens += a + 1
            t += min(a + 1, length - t)
            time_ms += timing.round_ms(g, forwards)
            accepted_sim.append(a)
            drafted_sim.append(g)
            gamma = policy.update(gamma, accepted_sim, drafted_sim)
        n_rounds += len(drafted_sim)
        all_drafted += drafted_sim
    return tokens, n_rounds, time_ms, all_drafted


def replay(
    policy: Policy,
    records: list[RecordLine],
    timing: Timing,
    gamma_max: int,
    n_boot: int = 2000,
    level: float = 0.95,
    position_level: bool = True,
) -> Replay:
    """A policy replayed over every prompt of a γ_max trace, with prompt-bootstrap intervals.

    `position_level` allows the exact position-by-position replay of greedy traces; it holds for
    a draft *model* (its proposal at a position depends only on the true prefix) but not for
    n-gram lookup, whose proposals are copied from a match found at the round's start.
    """
    if policy.max_gamma > gamma_max:
        raise SpecbenchError(
            f"policy '{policy.name}' may draft up to γ={policy.max_gamma}, beyond the trace's "
            f"γ_max={gamma_max}; rerun with a larger γ in the grid or "
            f"{bound_advice(policy.name, gamma_max)}"
        )
    toks, nrounds, times, lengths, ids, all_g = [], [], [], [], [], []
    for rec in records:
        if "rounds" not in rec or "draft_top_prob" not in rec["rounds"]:
            raise SpecbenchError(
                "the run has no per-position round records; rerun it with this specbench"
            )
        greedy = position_level and float(rec.get("temperature", 1.0)) == 0.0
        replay_one = replay_greedy_prompt if greedy else replay_prompt
        trace = Trace.of(rec["rounds"])
        t, n, ms, gs = replay_one(policy, trace, timing, turn_spans(rec), gamma_max)
        prefill = sum(rec.get("draft_prefill_ms") or [0.0])
        toks.append(t)
        nrounds.append(n)
        times.append(ms + prefill)
        lengths.append(sum(a + 1 for a in trace.accepted))
        ids.append(str(rec["prompt_id"]))
        all_g += gs
    # pooled by tokens: each prompt scaled to its real length L_p (module docstring)
    scale = np.asarray(lengths, float) / np.maximum(np.asarray(toks, float), 1.0)
    length = np.asarray(lengths, float)
    tpr = ratio_ci(length, scale * np.asarray(nrounds, float), n_boot, level, clusters=ids)
    rate = ratio_ci(length, scale * np.asarray(times, float), n_boot, level, clusters=ids)
    speed = Estimate(
        rate.value * timing.t_ar_ms, rate.lo * timing.t_ar_ms, rate.hi * timing.t_ar_ms
    )
    return Replay(tpr, speed, float(np.mean(all_g)) if all_g else 0.0)


def bound_advice(name: str, gamma_max: int) -> str:
    """What to pass so that policy `name` drafts at most `gamma_max` (the key that bounds it:
    `gamma` for fixed and temperature, whose γ derives from it, `max_gamma` for the others)."""
    if name == "fixed":
        return f"replay it at the trace's γ: --policy fixed:gamma={gamma_max}"
    if name == "temperature":
        return f"give a smaller base γ, e.g. --policy temperature:gamma={max(1, gamma_max - 2)}"
    key = f"max_gamma={gamma_max}" + (",min_gamma=1" if gamma_max < 2 else "")
    return f"bound it: --policy {name}:{key}"


def fitted_options(name: str, options: PolicyOptions, gamma_max: int) -> PolicyOptions:
    """The options with every γ bound the user did not give clamped to the trace's γ_max, so the
    default policy set (and `--policy adaptive`) replays on a run whose grid stops below 8; a
    bound the user gave is kept, and refused by `replay` when the trace cannot hold it."""
    fitted = dict(options)
    for key in ("gamma", "min_gamma", "max_gamma"):
        if key not in options:
            fitted[key] = min(int(PolicySpec.model_fields[key].default), gamma_max)
    if name == "temperature" and "gamma" not in options:  # at T < 0.3 it drafts gamma + 2
        fitted["gamma"] = max(1, min(fitted["gamma"], gamma_max - 2))
    return fitted


def policy_for(
    name: str, options: PolicyOptions, temperature: float, gamma_max: int | None = None
) -> Policy:
    """The policy `name` with `options`; given the trace's `gamma_max`, the bounds not given are
    fitted to it (`fitted_options`)."""
    if gamma_max is not None:
        options = fitted_options(name, options, gamma_max)
    try:
        return Policy(PolicySpec.model_validate({"name": name, **options}), temperature)
    except ValueError as exc:  # pydantic validation → one line
        first = str(exc).splitlines()
        msg = next(
            (line.strip() for line in first if line.strip().startswith("Value error")), first[-1]
        )
        raise SpecbenchError(f"policy '{name}': {msg.removeprefix('Value error, ')}") from None


def timing_from_records(base: list[RecordLine], trace: list[RecordLine]) -> Timing:
    """The timing model of one drafter's trace (`analysis.arithmetic.timing_model.fit_from_records`)."""
    if not any(r.get("step_ms") for r in base):
        raise SpecbenchError("the run has no baseline step timings to simulate against")
    return fit_from_records(base, trace).model
