"""The warnings of a results entry, each worded once and used by every backend's analysis.

Each function returns the warning's text, or None when the data give no reason for it (NaN or
a missing value never warns).
"""

from __future__ import annotations

import math

from specbench.analysis.stats.resampling import prompts_needed
from specbench.analysis.stats.signflip import min_prompts

CV_WARN = 0.25  # per-prompt latency spread above this is called unstable
LOW_ACCEPTED_PROPOSED = 0.4  # speculation often costs latency below this rate
FEW_TOKENS_PER_ROUND = 1.5


def unstable_timing(cv: float, what: str) -> str | None:
    """`what` varies by coefficient of variation `cv` across prompts."""
    if not (math.isfinite(cv) and cv > CV_WARN):
        return None
    return (
        f"unstable timing: {what} varies {cv:.0%} across prompts (CV); "
        "close other work on the machine or raise repeats"
    )


def low_acceptance(accepted_proposed: float | None, gamma: int) -> str | None:
    if accepted_proposed is None or not accepted_proposed < LOW_ACCEPTED_PROPOSED:
        return None
    return (
        f"accepted/proposed is {accepted_proposed:.2f} at γ={gamma} "
        f"(< {LOW_ACCEPTED_PROPOSED}): speculation often costs latency at such rates"
    )


def too_few_prompts(
    n_prompts: int, halfwidth: float | None, target: float, level: float = 0.95
) -> str | None:
    """α's interval is wider than the run was sized for (`decision.target_ci_halfwidth`). Below
    the sign-flip test's resolution the interval is α's whole range by construction, not a
    measured width, so no prompt count is extrapolated from it (docs/theory.md §7)."""
    if halfwidth is None or not halfwidth > target:
        return None
    fewest = min_prompts((1.0 - level) / 2.0)
    if n_prompts < fewest:
        return (
            f"too few prompts: α's interval is its whole range [0, 1] below {fewest} prompts "
            "(the test's resolution); measure at least that many to see its width"
        )
    need = prompts_needed(n_prompts, halfwidth, target)
    return (
        f"too few prompts: α CI half-width {halfwidth:.3f} > {target}; "
        f"about {need} prompts would reach it"
    )


def few_tokens_per_round(gamma: int, tokens_per_round: float | None) -> str | None:
    if tokens_per_round is None or not tokens_per_round < FEW_TOKENS_PER_ROUND:
        return None
    return f"γ={gamma}: mean tokens per round {tokens_per_round:.2f} < {FEW_TOKENS_PER_ROUND}"
