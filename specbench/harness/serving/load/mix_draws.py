"""What each arrival of a steady-state *mix* batch sends (docs/serving.md "The profile's mix").

With a `profile` and a steady-state load (`load.duration_s` / `load.requests`), the open-loop
part of a run measures the profile's mix: per setting × load point × repeat one batch whose
arrivals each draw, independently,

- a workload with its *request* share (`config.traffic_mix.request_shares`: the profile's token
  shares over each workload's mean output budget, the mean `max_tokens` of its requests);
- a temperature with its share of requests (a workload with `dataset.sampling: logged` sends
  each request at its own logged settings and files it under its one temperature label, as its
  per-workload batches do: the drawn temperature is then not used);
- a prompt of that workload, uniformly with replacement,

and a sampling seed of its own. The draws are seeded per load point × repeat only, so every
setting is sent the same (workload, temperature, prompt, seed) in the same order at the same
times (common random numbers, as `arrivals.draw_prompts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.config import RunConfig
from specbench.config.profile import MIX_WORKLOAD, PROFILE_MIX
from specbench.config.traffic_mix import request_shares, temperature_shares, token_shares
from specbench.data import Prompt
from specbench.harness.plan.plan import RequestParams, logged_temperature, request_params, unit_seed
from specbench.harness.serving.load.arrivals import LoadPoint
from specbench.harness.serving.protocol.base import Conversation

MIX_TEMPERATURE = 0.0  # the mix batch's `engine_metrics` line: its requests carry their own


@dataclass(frozen=True)
class MixPlan:
    """The shares a mix batch draws with (each summing to 1) and the prompts it draws from."""

    tokens: dict[str, float]  # asked: each workload's share of output tokens
    requests: dict[str, float]  # drawn: each workload's share of requests
    temperatures: dict[float, float]  # drawn: each temperature's share of requests
    mean_budget: dict[str, float]  # each workload's mean max_tokens
    prompts: dict[str, list[Prompt]]
    logged: dict[str, float]  # a logged workload's temperature label

    def shares_record(self) -> dict[str, Any]:
        """What the batch's `engine_metrics` line says it drew with (the analysis reports it)."""
        return {
            "token_shares": {w: round(x, 6) for w, x in self.tokens.items()},
            "request_shares": {w: round(x, 6) for w, x in self.requests.items()},
            "temperature_shares": {f"{t:g}": round(x, 6) for t, x in self.temperatures.items()},
            "mean_max_tokens": {w: round(x, 3) for w, x in self.mean_budget.items()},
        }


def mix_mode(cfg: RunConfig) -> bool:
    """Does the open-loop part of this run measure the profile's mix?"""
    return cfg.profile is not None and cfg.load.steady


def plan_mix(cfg: RunConfig, prompts: dict[str, list[Prompt]]) -> MixPlan:
    tokens = token_shares(cfg)
    logged = {
        w.name: logged_temperature(cfg, prompts[w.name])
        for w in cfg.workloads
        if w.dataset.sampling == "logged" and w.name in tokens
    }
    budget = {
        w: float(np.mean([request_params(cfg, p, 0.0).max_tokens for p in prompts[w]]))
        for w in tokens
    }
    return MixPlan(
        tokens,
        request_shares(tokens, budget),
        temperature_shares(cfg),
        budget,
        {w: prompts[w] for w in tokens},
        logged,
    )


@dataclass(frozen=True)
class MixDraw:
    workload: str
    temperature: float  # the record's: the drawn one, or a logged workload's label
    conversation: Conversation


def mix_draws(
    cfg: RunConfig, plan: MixPlan, point: LoadPoint, repeat: int, k: int
) -> list[MixDraw]:
    """`k` draws (module docstring), the same at every setting."""
    rng = np.random.default_rng(unit_seed(cfg.seed, "mix draws", point.name, repeat))
    names = list(plan.requests)
    temps = list(plan.temperatures)
    w_idx = rng.choice(len(names), size=k, p=np.array([plan.requests[w] for w in names]))
    t_idx = rng.choice(len(temps), size=k, p=np.array([plan.temperatures[t] for t in temps]))
    u = rng.random(k)  # the prompt: uniform over the drawn workload's
    params: dict[
        tuple[str, int, float], RequestParams
    ] = {}  # a steady closed loop draws up to 100 000
    out = []
    for j, (wi, ti, uj) in enumerate(zip(w_idx.tolist(), t_idx.tolist(), u.tolist(), strict=True)):
        wl = names[wi]
        items = plan.prompts[wl]
        i = min(int(uj * len(items)), len(items) - 1)
        temp = plan.logged.get(wl, temps[ti])
        p = items[i]
        got = params.get((wl, i, temp))
        if got is None:
            got = params[(wl, i, temp)] = request_params(cfg, p, temp)
        seed = unit_seed(cfg.seed, MIX_WORKLOAD, wl, temp, p.id, repeat, "draw", j)
        out.append(MixDraw(wl, temp, Conversation(p, seed, got)))
    return out


def mix_head(head: dict[str, Any], plan: MixPlan | None) -> dict[str, Any]:
    """A mix batch's head (its `engine_metrics` line): workload `mix`, what it drew with."""
    if plan is None:
        return head
    return {
        **head,
        "workload": MIX_WORKLOAD,
        "temperature": MIX_TEMPERATURE,
        "mix": PROFILE_MIX,
        "mix_shares": plan.shares_record(),
    }


def draw_head(head: dict[str, Any], draw: MixDraw) -> dict[str, Any]:
    """One request's head in a mix batch: what it drew, not the batch's shares."""
    out = {k: v for k, v in head.items() if k != "mix_shares"}
    return {**out, "workload": draw.workload, "temperature": draw.temperature}
