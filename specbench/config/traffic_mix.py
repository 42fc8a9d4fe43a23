"""The profile's traffic mix as a steady-state load draws it (docs/serving.md "The profile's mix").

The profile states each workload's share of *output tokens* (`profile.traffic.workloads`; None:
the workloads' `weight`) and each temperature's share of *requests* (`profile.traffic.
temperatures`; None: equal shares of `sampling.temperatures`). Arrivals are requests, so the
token shares are turned into request shares with each workload's mean output budget b_w (the
mean `max_tokens` its requests are sent with):

    request_share_w = (token_share_w / b_w) / Σ_v (token_share_v / b_v)

A request of w then brings b_w tokens on average when it runs to its budget, and the expected
token share of w is token_share_w. Outputs that stop early (EOS, a stop string) bring fewer: the
achieved token shares drift from the asked ones by how much each workload's answers fall short
of their budget, which is why the analysis reports the achieved shares beside the asked ones.

Pure functions of the config and numbers: the harness supplies the budgets
(`harness.serving.mix_draws`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from specbench.config.run import RunConfig


def token_shares(cfg: RunConfig) -> dict[str, float]:
    """Each workload's asked share of output tokens, summing to 1 (config order; a workload the
    profile does not name has share 0 and is left out)."""
    named = cfg.profile.traffic.workloads if cfg.profile is not None else None
    if named is not None:
        return {w.name: named[w.name] for w in cfg.workloads if named.get(w.name, 0.0) > 0}
    weights = {w.name: w.weight for w in cfg.workloads}
    total = sum(weights.values())
    if total <= 0:  # every weight 0: nothing says otherwise, so equal shares
        return {w: 1.0 / len(weights) for w in weights}
    return {w: x / total for w, x in weights.items() if x > 0}


def temperature_shares(cfg: RunConfig) -> dict[float, float]:
    """Each temperature's share of requests, summing to 1 (profile order, or the grid's)."""
    named = cfg.profile.traffic.temperatures if cfg.profile is not None else None
    if named is not None:
        return {float(t): x for t, x in named.items() if x > 0}
    temps = cfg.sampling.temperatures
    return {float(t): 1.0 / len(temps) for t in temps}


def request_shares(
    tokens: Mapping[str, float], mean_budget: Mapping[str, float]
) -> dict[str, float]:
    """Request shares from token shares and mean output budgets (module docstring):
    ∝ token_share / budget, normalised. Every budget must be a positive finite number."""
    for w in tokens:
        b = mean_budget[w]
        if not (math.isfinite(b) and b > 0):
            raise ValueError(f"workload '{w}': mean output budget must be > 0, got {b}")
    raw = {w: s / mean_budget[w] for w, s in tokens.items()}
    total = sum(raw.values())
    if total <= 0:
        raise ValueError("the traffic mix has no workload with a positive share")
    return {w: x / total for w, x in raw.items()}
