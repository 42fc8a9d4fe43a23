"""The plan of a `specbench run`, shared by the transformers runner and the serving driver: the
prompts of each workload, the temperatures each runs at, how each request is sampled, the
decoding settings and units, their seeds, the progress callbacks, and the run directory.

A *decoding setting* is the baseline (γ = 0) or one drafter under one γ policy (transformers
backend); a serving engine's configuration is a `serving.protocol.base.EngineSetting`. A *unit* is one
prompt (all its turns) through one decoding setting; its record is appended the moment it exists.
"""

from __future__ import annotations

import shutil
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from specbench.config import RunConfig, WorkloadSpec, dump_config
from specbench.data import Prompt, load_workload
from specbench.data.privacy import ID_SALT_ENV, private_prompts
from specbench.decoding.policies import Policy
from specbench.errors import SpecbenchError
from specbench.record_line import UnitFinished
from specbench.records import RECORDS_FILE, UnitKey, iter_records, repair_truncated_tail
from specbench.setting import Setting

DERIVED_FILES = (
    "results.json",
    "report.md",
    "report.html",
    "summary.csv",
    "load_summary.csv",
    "warmup.jsonl",
)
RUN_FILES = (*DERIVED_FILES, "batch_timing.jsonl")  # what --force removes besides the records


# ---------------------------------------------------------------------------------------------
# progress and outcome


class RunEvents(Protocol):
    """Progress callbacks: the core never prints (the CLI draws rich progress bars with them)."""

    def planned(self, total_units: int | None, already_done: int) -> None: ...
    def unit_started(
        self, workload: str, temperature: float, label: str, prompt_id: str
    ) -> None: ...
    def unit_finished(self, unit: UnitFinished) -> None: ...
    def cell_updated(
        self, workload: str, temperature: float, state: str, decision: Any, line: float
    ) -> None:
        """The adaptive plan (harness/transformers/adaptive.py): a cell's state and its sequential decision
        (`analysis.stats.sequential.SequentialDecision`, None before the first) against 1 + margin."""


class SilentEvents:
    """RunEvents that report nothing (a run without a progress display)."""

    def planned(self, total_units: int | None, already_done: int) -> None:
        pass

    def unit_started(self, workload: str, temperature: float, label: str, prompt_id: str) -> None:
        pass

    def unit_finished(self, unit: UnitFinished) -> None:
        pass

    def cell_updated(
        self, workload: str, temperature: float, state: str, decision: Any, line: float
    ) -> None:
        pass


@dataclass
class RunOutcome:
    out_dir: Path
    written: int = 0
    skipped: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def unit_seed(seed: int, *parts: object) -> int:
    """A unit's seed: the run's seed hashed with what identifies the unit, so a resumed or
    reordered run gives every unit the seed it had."""
    return zlib.crc32("|".join(map(str, (seed, *parts))).encode()) & 0x7FFFFFFF


# ---------------------------------------------------------------------------------------------
# prompts, temperatures, and how each request is sampled


def load_prompts(cfg: RunConfig, base_dir: Path | None) -> dict[str, list[Prompt]]:
    """Every workload's prompts; a private workload's (`cfg.keeps_text`) with hashed ids and
    their key, so nothing downstream sees a raw id or writes text (data/privacy.py)."""
    prompts = {wl.name: load_workload(wl, cfg.seed, base_dir) for wl in cfg.workloads}
    for wl in cfg.workloads:
        if not prompts[wl.name]:
            raise SpecbenchError(
                f"workload '{wl.name}' selects no prompts; check its dataset and n"
            )
        if not cfg.keeps_text(wl):
            prompts[wl.name] = private_prompts(prompts[wl.name])
    return prompts


@dataclass(frozen=True)
class RequestParams:
    """What one request is generated with."""

    temperature: float
    top_p: float
    max_tokens: int  # max new tokens per turn


def request_params(cfg: RunConfig, prompt: Prompt, temperature: float) -> RequestParams:
    """How a prompt is generated: with the config's settings (at the grid's `temperature`), or
    for a logged request (`dataset.sampling: logged`) with its own values, each missing one the
    config's (temperature: the grid's first). `max_new_tokens` stays the ceiling: it bounds the
    run's time and the context kept free for the answer."""
    req = prompt.request
    if req is None:
        return RequestParams(temperature, cfg.sampling.top_p, cfg.max_new_tokens)
    temp = cfg.sampling.temperatures[0] if req.temperature is None else req.temperature
    top_p = cfg.sampling.top_p if req.top_p is None else req.top_p
    max_new = (
        cfg.max_new_tokens if req.max_tokens is None else min(req.max_tokens, cfg.max_new_tokens)
    )
    return RequestParams(temp, top_p, max_new)


def logged_temperature(cfg: RunConfig, prompts: list[Prompt]) -> float:
    """The temperature a logged workload's records are filed under: the mean of its requests'
    temperatures (4 decimals). One label keeps the workload one group of paired prompts while
    every place that reads `temperature` as a number still works; it is 0 only when every
    request is greedy, so greedy-only checks never take a sampled request for a greedy one."""
    temps = [request_params(cfg, p, 0.0).temperature for p in prompts]
    mean = sum(temps) / len(temps)
    return round(mean, 4) if round(mean, 4) > 0 or mean == 0 else 1e-4


def workload_temperatures(cfg: RunConfig, wl: WorkloadSpec, prompts: list[Prompt]) -> list[float]:
    """The temperatures a workload runs at: the grid, or for a logged workload one label (it
    runs once, each request at its own settings)."""
    if wl.dataset.sampling == "logged":
        return [logged_temperature(cfg, prompts)]
    return list(cfg.sampling.temperatures)


def logged_fields(prompt: Prompt, params: RequestParams) -> dict[str, Any]:
    """What a record of a logged request adds: how it was sampled (the group's `temperature` is
    a label, see `logged_temperature`); {} for a request sampled with the config's settings."""
    if prompt.request is None:
        return {}
    return {
        "sampling": "logged",
        "top_p": params.top_p,
        "request": {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "logged": asdict(prompt.request),  # None where the config's value was used
        },
    }


# ---------------------------------------------------------------------------------------------
# decoding settings and units (transformers backend)


def decoding_settings(cfg: RunConfig, temperature: float) -> list[Setting]:
    """Baseline, then each drafter over the γ grid, then each drafter under each policy."""
    out = [Setting(0)]
    for d in cfg.drafters:
        out += [Setting(g, d.label) for g in cfg.gammas]
    for d in cfg.drafters:
        for pol in cfg.policies:
            out.append(Setting(Policy(pol, temperature).max_gamma, d.label, pol))
    return out


@dataclass(frozen=True)
class Unit:
    setting: Setting
    key: UnitKey
    prompt: Prompt
    warmup: bool = False
    plan_step: str | None = None  # the adaptive plan's step (transformers/adaptive.py); None = full


def plan_units(
    cfg: RunConfig, prompts: dict[str, list[Prompt]]
) -> list[tuple[str, float, list[Unit]]]:
    """Per workload × temperature: warm-up units, then for each prompt its baseline followed by
    every speculative setting."""
    plan = []
    for wl in cfg.workloads:
        for temp in workload_temperatures(cfg, wl, prompts[wl.name]):
            settings = decoding_settings(cfg, temp)
            units: list[Unit] = []
            for p in prompts[wl.name][: cfg.warmup]:
                for st in (settings[0], settings[1]):
                    units.append(Unit(st, st.unit_key(wl.name, temp, p.id, 0), p, True))
            # Prompt-major: each prompt's baseline, then its speculative settings, back to back,
            # so the paired per-prompt ratios compare runs made close in time (machines drift).
            for rep in range(cfg.repeats):
                for p in prompts[wl.name]:
                    for st in settings:
                        units.append(Unit(st, st.unit_key(wl.name, temp, p.id, rep), p))
            plan.append((wl.name, temp, units))
    return plan


# ---------------------------------------------------------------------------------------------
# the run directory


def same_run_config(stored_yaml: str, new_yaml: str) -> bool:
    """Two resolved configs describe the same run: equal but for `output_dir` (and the report's
    `economics`), so a run directory that was copied or moved can be resumed where it now is."""
    try:
        stored = yaml.safe_load(stored_yaml)
    except yaml.YAMLError:
        return False
    new = yaml.safe_load(new_yaml)
    if not isinstance(stored, dict) or not isinstance(new, dict):
        return False
    for key in ("output_dir", "economics"):  # economics only prices the report
        stored.pop(key, None)
        new.pop(key, None)
    # a run stored before the adaptive plan existed ran the full grid
    stored.setdefault("plan", "full")
    if "keep_text" not in stored:  # a run begun before keep_text existed: either value resumes
        new.pop("keep_text", None)  # it (its ids must still match: check_resumed_ids)
    if "adaptive" not in stored and new.get("plan") == "full":
        new.pop("adaptive", None)
    return bool(stored == new)


def prepare_run_dir(
    cfg: RunConfig,
    out_dir: Path,
    resume: bool,
    force: bool,
    prompts: dict[str, list[Prompt]] | None = None,
) -> set[UnitKey]:
    """Create or validate DIR; return the units already complete (for --resume).

    A directory holding a different run is refused unless `--force` (which clears it), and so is
    a resumed private run whose records hold prompt ids these `prompts` do not have.
    """
    records = out_dir / RECORDS_FILE
    stored_cfg = out_dir / "config.yaml"
    new_cfg = dump_config(cfg)
    if records.exists() and records.stat().st_size > 0:
        if force:
            for name in (RECORDS_FILE, "config.yaml", "env.json", *RUN_FILES):
                (out_dir / name).unlink(missing_ok=True)
            shutil.rmtree(out_dir / "plots", ignore_errors=True)
        elif not resume:
            raise SpecbenchError(
                f"{out_dir} already holds a run; pass --resume to finish it or --force to start over"
            )
        elif stored_cfg.is_file() and not same_run_config(stored_cfg.read_text(), new_cfg):
            raise SpecbenchError(
                f"{out_dir} holds a run with a different configuration; --resume needs the same "
                "config and flags (or pass --force to start over)"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    stored_cfg.write_text(new_cfg)
    done: set[UnitKey] = set()
    if records.exists():
        repair_truncated_tail(records)
        for rec in iter_records(records):
            if rec["kind"] in ("baseline", "spec"):
                done.add(UnitKey.of(rec))
    check_resumed_ids(prompts or {}, {(k.workload, k.prompt_id) for k in done})
    return done


def check_resumed_ids(prompts: dict[str, list[Prompt]], done: set[tuple[str, str]]) -> None:
    """A private workload's recorded (workload, prompt id) pairs must be ids these prompts hash
    to: a different salt (or changed prompts) would measure every prompt again under new ids
    beside the old ones (data/privacy.py)."""
    for wl, items in prompts.items():
        if not items or items[0].private_key is None:
            continue
        ids = {p.id for p in items}
        if any(w == wl and pid not in ids for w, pid in done):
            raise SpecbenchError(
                f"workload '{wl}': the records in the run directory hold prompt ids this run "
                f"does not produce: the prompts changed, {ID_SALT_ENV} differs from the run's "
                "first start (set it as it was), or the run began with raw ids, before "
                "specbench hashed them (resume it with --keep-text); or --force starts over"
            )
