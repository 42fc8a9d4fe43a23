"""`specbench run` as one typed request: its options checked together, the run config they make
(flags > file > defaults), and the one function that measures it.

    request = RunRequest(config=..., out=..., ...)   # SpecbenchError (exit 2) on a refused combination
    cfg = request.run_config()                        # the config file under the flags, checked
    outcome = measure_run(request, cfg, events)       # adaptive plan, transformers or an engine

The fields are the command's options under the same names, without defaults (the command's
options state them once, and `--help` shows them).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.config import RunConfig
    from specbench.harness.plan.plan import RunEvents
    from specbench.harness.transformers.runner import RunOutcome


def csv_ints(value: str, option: str) -> list[int]:
    """'1,2,4,8' → [1, 2, 4, 8]; anything else is one line naming the option."""
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise SpecbenchError(
            f"{option} takes comma-separated integers, e.g. 1,2,4,8; got '{value}'"
        ) from None


def economics_options(gpu_hour_usd: float | None, gpus: int | None) -> dict[str, Any]:
    """--gpu-hour-usd / --gpus as the config's `economics` keys (given ones only), checked."""
    if gpu_hour_usd is not None and not 0 < gpu_hour_usd <= 1e6:
        raise SpecbenchError(f"--gpu-hour-usd must be in (0, 1000000], got {gpu_hour_usd:g}")
    return {k: v for k, v in (("gpu_hour_usd", gpu_hour_usd), ("gpus", gpus)) if v is not None}


def run_overrides(
    cfg_data: dict[str, Any],
    out: Path | None,
    gammas: str | None,
    workloads: str | None,
    max_prompts: int | None,
    temperature: list[float] | None,
    device: str | None,
    seed: int | None,
) -> dict[str, Any]:
    """CLI flags as config overrides (flags > file > defaults)."""
    over: dict[str, Any] = {}
    if out is not None:
        over["output_dir"] = str(out)
    if gammas is not None:
        over["gammas"] = csv_ints(gammas, "--gammas")
        if isinstance(cfg_data.get("speculative"), dict):  # engine backends: the γ grid lives here
            over["speculative"] = {"num_speculative_tokens": over["gammas"]}
    if temperature:
        over["sampling"] = {"temperatures": list(temperature)}
    if device is not None:
        over["target"] = {"device": device}
        over["draft"] = {"device": device}
    if seed is not None:
        over["seed"] = seed
    wl_list = list(cfg_data.get("workloads") or [])
    if workloads is not None:
        wanted = [w.strip() for w in workloads.split(",") if w.strip()]
        known = [w.get("name") for w in wl_list if isinstance(w, dict)]
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise SpecbenchError(
                f"--workloads: unknown workload '{unknown[0]}'; the config has: {', '.join(map(str, known))}"
            )
        wl_list = [w for w in wl_list if w.get("name") in wanted]
    if max_prompts is not None:
        wl_list = [{**w, "n": min(int(w.get("n") or max_prompts), max_prompts)} for w in wl_list]
    if workloads is not None or max_prompts is not None:
        over["workloads"] = wl_list
    return over


def writable_dir(out_dir: Path) -> None:
    """Create the run directory and write a probe file in it; an OSError here (permission, read-
    only file system, disk full) is the environment's, one line through cli/faults.py."""
    existed = out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=out_dir) as probe:
        probe.write(b"specbench")
        probe.flush()
    if not existed:  # a run refused later (a config check) must not leave its directory behind
        out_dir.rmdir()


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """What `specbench run` was asked: the config and the flags over it, how to treat a run
    directory already there, and the adaptive plan's budgets."""

    config: Path
    out: Path | None
    gammas: str | None
    workloads: str | None
    max_prompts: int | None
    temperature: list[float] | None
    device: str | None
    seed: int | None
    resume: bool
    force: bool
    gpu_hour_usd: float | None
    gpus: int | None
    adaptive: bool
    budget_minutes: float | None
    budget_forwards: int | None
    keep_text: bool | None
    max_failure_rate: float | None
    lockstep: str | None

    def __post_init__(self) -> None:
        if self.resume and self.force:
            raise SpecbenchError(
                "--resume and --force contradict each other: --resume finishes the run in the "
                "directory, --force discards it; give one"
            )

    def run_config(self) -> RunConfig:
        """The config file under the flags, checked; the run directory made sure writable (a
        read-only or full place: exit 2 before the pair loads)."""
        from specbench.config import deep_merge, parse_config, read_yaml

        data = read_yaml(self.config)
        over = run_overrides(
            data,
            self.out,
            self.gammas,
            self.workloads,
            self.max_prompts,
            self.temperature,
            self.device,
            self.seed,
        )
        if self.adaptive:
            over["plan"] = "adaptive"
        if self.keep_text is not None:
            over["keep_text"] = self.keep_text
        econ = economics_options(self.gpu_hour_usd, self.gpus)
        if econ:
            over["economics"] = econ
        cfg = parse_config(deep_merge(data, over), str(self.config))
        for flag, value in (
            ("--budget-minutes", self.budget_minutes),
            ("--budget-forwards", self.budget_forwards),
        ):
            if value is not None and cfg.plan != "adaptive":
                raise SpecbenchError(f"{flag} bounds the adaptive plan: add --adaptive")
        if self.budget_minutes is not None and self.budget_minutes <= 0:
            raise SpecbenchError(
                "--budget-minutes must be > 0 (a budget of no time measures nothing), "
                f"got {self.budget_minutes:g}"
            )
        out_dir = Path(cfg.output_dir)
        if out_dir.exists() and not out_dir.is_dir():
            raise SpecbenchError(f"the run directory {out_dir} is a file; give a directory (--out)")
        writable_dir(out_dir)
        return cfg

    def failure_rate(self, cfg: RunConfig) -> float:
        """The share of failed prompts above which the run is incomplete (exit 4)."""
        return cfg.max_failure_rate if self.max_failure_rate is None else self.max_failure_rate


def measure_run(request: RunRequest, cfg: RunConfig, events: RunEvents) -> RunOutcome:
    """Measure the run: the adaptive plan (harness/transformers/adaptive.py), the transformers runner
    (harness/transformers/runner.py) or a serving engine (harness/serving/drive/driver.py)."""
    out_dir = Path(cfg.output_dir)
    base_dir = request.config.parent
    opts: dict[str, Any] = {"resume": request.resume, "force": request.force, "events": events}
    if cfg.plan == "adaptive":
        from specbench.harness.transformers.adaptive import run_adaptive

        return run_adaptive(
            cfg,
            out_dir,
            base_dir=base_dir,
            budget_minutes=request.budget_minutes,
            budget_forwards=request.budget_forwards,
            **opts,
        )
    if cfg.backend == "transformers":
        from specbench.harness.transformers import runner

        return runner.run(cfg, out_dir, base_dir=base_dir, **opts)
    from specbench.harness.serving.drive.driver import run_engine  # vllm / openai: a serving engine

    return run_engine(cfg, out_dir, base_dir=base_dir, **opts)
