"""A config checked against the prompt sets it names, before anything is measured (`run` on an
engine backend, and `validate`):

- a workload asking for more prompts (`n`) than its set holds: a warning (`run` uses them all);
- a concurrency above every workload's prompt count: an error. A batch keeps at most as many
  requests in flight as its workload has prompts, so such a level would be measured at a lower
  load than its label says: lower it, or add prompts (`n`, `documents`, a larger set).
- a concurrency above some workloads' prompt counts (but reached by another): a warning naming
  them — their batches at that level run with fewer requests in flight.
"""

from __future__ import annotations

from specbench.config import RunConfig
from specbench.data import Prompt
from specbench.errors import SpecbenchError
from specbench.harness.serving.load.arrivals import effective_concurrency_notes


def prompt_warnings(cfg: RunConfig, prompts: dict[str, list[Prompt]]) -> list[str]:
    """The warnings (module docstring) for loaded `prompts` (workload → its prompts). (`run`
    says the first kind as it loads the prompts, `data.loader`, and adds the second.)"""
    out = []
    for wl in cfg.workloads:
        have = len(prompts[wl.name])
        if wl.n is not None and wl.n > have:
            out.append(
                f"workload '{wl.name}' asks for {wl.n} prompts, its dataset has {have}: run uses "
                f"all {have}"
            )
    return out + concurrency_warnings(cfg, prompts)


def concurrency_warnings(cfg: RunConfig, prompts: dict[str, list[Prompt]]) -> list[str]:
    """Concurrency levels above some workloads' prompt counts (engine backends): those batches
    run with fewer requests in flight (`arrivals.effective_concurrency_notes` words it; the run
    stores the same lines in env.json and the report states the effective concurrency)."""
    if cfg.backend not in ("vllm", "openai"):
        return []
    return effective_concurrency_notes(cfg, {w: len(p) for w, p in prompts.items()})


def check_concurrency(cfg: RunConfig, prompts: dict[str, list[Prompt]]) -> None:
    """One clear error when a concurrency level cannot be reached by any workload."""
    if cfg.backend not in ("vllm", "openai") or not prompts or cfg.load.steady:
        return  # a steady state's closed loop draws with replacement: any level is reached
    most = max(len(p) for p in prompts.values())
    over = [c for c in cfg.concurrency if c > most]
    if over:
        raise SpecbenchError(
            f"concurrency {', '.join(map(str, over))}: no workload has more than {most} prompts, "
            f"so at most {most} requests are ever in flight; lower it or add prompts (n)"
        )
