"""The adaptive plan of `specbench run` (`plan: adaptive` or `--adaptive`; docs/theory.md §14):
measure only what the verdict needs, and stop each cell when it is settled.

    specbench run configs/tiny.yaml --adaptive --budget-minutes 5

Per workload × temperature ("cell"), on the workload's prompts in a seeded order:
  pilot    the baseline and γ_max of each drafter on prompts until PILOT_PROMPTS of them are
           usable (a degenerate baseline sets its prompt aside, below);
  choose   from γ_max's truncation curve (`analysis.estimators.acceptance.truncation_curve`) and the timing
           fit (`analysis.arithmetic.timing_model`), the predicted best γ of the grid and its neighbours
           whose predictions are within NEIGHBOUR_TOL of it, with γ_max: at most
           `adaptive.max_candidates` settings per drafter;
  backfill those candidates on the pilot prompts (every candidate is paired on every prompt);
  measure  prompt by prompt the baseline and every candidate; after each prompt the cell's
           group-sequential verdict is updated (`analysis.decide.adaptive_summary.cell_decision`: a
           sign-flip test at looks fixed by the cell's prompt cap) and the cell stops when
           decided ON or OFF, at its last prompt, when the budget is spent, or
           (`adaptive.futility`) when even an optimistic projection cannot settle it within
           the prompts it has left ("futile", `analysis.stats.sequential.futile`).
A prompt whose baseline answer is degenerate (docs/theory.md §13: it loops, or is empty) is set
aside by the analysis whatever its speculative answers are, so its speculative units are not run.
Without a budget, cells take turns prompt by prompt. With one (`--budget-minutes`, or
`--budget-forwards`: target forwards, the same on any machine), every cell pilots first, then the
undecided cell nearest a verdict (fewest "more prompts needed") goes next, so the budget buys as
many verdicts as it can (shortest first finishes the most by a deadline); `nearest_first`.
Every record carries its `plan_step`; the plan is a function of the records, so `--resume`
continues it where it stopped. γ policies and repeats are not part of the adaptive plan.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from specbench.analysis.arithmetic.timing_model import fit_from_records
from specbench.analysis.decide.adaptive_summary import (
    candidate_records,
    cell_decision,
    prompts_left,
    sequence_settings,
)
from specbench.analysis.estimators.acceptance import truncation_curve
from specbench.analysis.estimators.content import degenerate_reason, record_checks
from specbench.analysis.simulate.replay import replay
from specbench.analysis.stats.sequential import SequentialDecision
from specbench.config import DraftSpec, RunConfig
from specbench.config.stored import StoredConfig
from specbench.data import Prompt
from specbench.decoding.policies import Policy
from specbench.harness.plan.plan import (
    RunEvents,
    RunOutcome,
    SilentEvents,
    Unit,
    unit_seed,
    workload_temperatures,
)
from specbench.harness.transformers.runner import Session, measure_unit, start_run
from specbench.record_line import RecordLine, UnitFinished
from specbench.records import (
    RECORDS_FILE,
    SCHEMA_VERSION,
    RecordWriter,
    iter_records,
    parse_record,
)
from specbench.setting import Setting

PILOT_PROMPTS = 2
NEIGHBOUR_TOL = 0.05  # a setting predicted within 5 % of the best is measured too
PREDICT_BOOT = 1  # a policy's replay is used for its point prediction only

Record = RecordLine


def _line(rec: dict[str, Any]) -> RecordLine:
    """A record just measured, checked by its kind's model as `specbench report` will read it
    back (records.parse_record), as the analysis takes it."""
    parse_record({"schema": SCHEMA_VERSION, **rec})
    return cast(RecordLine, rec)


@dataclass
class Cell:
    """One workload × temperature and what its plan has measured."""

    workload: str
    temp: float
    prompts: list[Prompt]  # seeded order, capped at adaptive.max_prompts
    # (γ, drafter, policy name, prompt id) → the unit's record
    records: dict[tuple[int, str, str, str], Record] = field(default_factory=dict)
    candidates: list[Setting] | None = None
    next_prompt: int = 0
    # measuring | on | off | futile | budget spent | prompts exhausted
    state: str = "measuring"
    decision: SequentialDecision | None = None

    def ok(self, setting: Setting) -> list[Record]:
        return [
            r
            for (g, d, pol, _), r in self.records.items()
            if (g, d, pol) == (setting.gamma, setting.drafter, setting.policy_name)
            and r.get("status") == "ok"
        ]


@dataclass
class AdaptiveOutcome(RunOutcome):
    cells: list[Cell] = field(default_factory=list)


def grid(cfg: RunConfig, drafter: str) -> list[Setting]:
    return [Setting(g, drafter) for g in cfg.gammas]


def predictions(cfg: RunConfig, cell: Cell, drafter: DraftSpec) -> dict[Setting, float]:
    """Predicted speedup of each of the drafter's settings from the pilot: fixed γ from γ_max's
    truncation curve and the timing fit, γ policies by replaying them on γ_max's rounds
    (`analysis.simulate.replay.replay`). Empty when the pilot gives nothing to predict from."""
    top = grid(cfg, drafter.label)[-1]
    base, spec = cell.ok(Setting(0)), cell.ok(top)
    if not spec or not base:
        return {}
    model = fit_from_records(base, spec).model
    if not model.finite:
        return {}
    curve = truncation_curve(spec, top.gamma)
    pred = {
        Setting(g, drafter.label): model.speedup(g, curve[g])
        for g in cfg.gammas
        if g in curve and math.isfinite(curve[g])
    }
    for pol in cfg.policies:
        policy = Policy(pol, cell.temp)
        if policy.max_gamma > top.gamma:  # the trace cannot replay it: not a candidate
            continue
        rep = replay(
            policy,
            spec,
            model,
            top.gamma,
            n_boot=PREDICT_BOOT,
            position_level=drafter.method == "model",
        )
        if math.isfinite(rep.speedup.value):
            pred[Setting(policy.max_gamma, drafter.label, pol)] = rep.speedup.value
    return pred


def choose_candidates(cfg: RunConfig, cell: Cell) -> list[Setting]:
    """Per drafter, the setting (fixed γ or γ policy) with the best predicted speedup and those
    predicted within NEIGHBOUR_TOL of it, best first, at most adaptive.max_candidates. γ_max is
    measured on from here only when it is among them: the pilot's job was to predict."""
    cap = cfg.adaptive.max_candidates
    out: list[Setting] = []
    for d in cfg.drafters:
        pred = predictions(cfg, cell, d)
        if not pred:  # nothing to predict from: the largest γs of the grid
            out += grid(cfg, d.label)[-cap:]
            continue
        ranked = sorted(pred, key=lambda st: -pred[st])
        best = pred[ranked[0]]
        out += [st for st in ranked if pred[st] >= best * (1 - NEIGHBOUR_TOL)][:cap]
    return out


def set_aside(cell: Cell, prompt_id: str) -> bool:
    """The prompt's baseline answer is degenerate: the analysis sets the prompt aside whatever
    its speculative answers are (`analysis.decide.validity`), so they need not be measured."""
    rec = cell.records.get((0, "", "", prompt_id))
    return rec is not None and degenerate_reason(record_checks(rec)) is not None


def in_pilot(cell: Cell) -> bool:
    """Still piloting: fewer than PILOT_PROMPTS usable (not set aside) prompts measured so far."""
    usable = sum(not set_aside(cell, p.id) for p in cell.prompts[: cell.next_prompt])
    return (
        cell.candidates is None and cell.next_prompt < len(cell.prompts) and usable < PILOT_PROMPTS
    )


def next_units(cfg: RunConfig, cell: Cell) -> list[Unit]:
    """The next batch of the cell's plan (module docstring): one prompt's units, or a backfill."""
    wl, t = cell.workload, cell.temp

    def unit(st: Setting, p: Prompt, step: str) -> Unit:
        return Unit(st, st.unit_key(wl, t, p.id, 0), p, plan_step=step)

    base = Setting(0)
    if in_pilot(cell):
        p = cell.prompts[cell.next_prompt]
        tops = [grid(cfg, d.label)[-1] for d in cfg.drafters]
        return [unit(base, p, "pilot")] + [unit(st, p, "pilot") for st in tops]
    if cell.candidates is None:
        cell.candidates = choose_candidates(cfg, cell)
        pilot_settings = {grid(cfg, d.label)[-1] for d in cfg.drafters}
        extra = [st for st in cell.candidates if st not in pilot_settings]
        pilots = cell.prompts[: cell.next_prompt]
        return [unit(st, p, "backfill") for p in pilots for st in extra]
    p = cell.prompts[cell.next_prompt]
    return [unit(base, p, "measure")] + [unit(st, p, "measure") for st in cell.candidates]


def update(config: StoredConfig, cell: Cell) -> None:
    """The cell's sequential verdict over the candidates measured so far (none in the pilot,
    where only the usable-prompt supply can end the cell, as futile); `config`: the run's config
    as stored (`StoredConfig.of`), which the report reads too."""
    base = cell.ok(Setting(0))
    spec = [r for r in cell.records.values() if r.get("status") == "ok" and r["gamma"]]
    spec = candidate_records(spec)  # as the report will: what the plan measured past the pilot
    # the prompts left for the futility stop, from the records as the report counts them (so a
    # resumed run and `specbench report` reach the same state)
    left = prompts_left(list(cell.records.values()), config)
    cell.decision = cell_decision(base, spec, sequence_settings(config), left)
    if cell.decision.state in ("on", "off"):
        cell.state = cell.decision.state
    elif cell.candidates is not None and cell.next_prompt >= len(cell.prompts):
        cell.state = "prompts exhausted"  # (a pilot that used every prompt still backfills)
    elif cell.decision.futile:
        cell.state = "futile"


def make_cells(cfg: RunConfig, prompts: dict[str, list[Prompt]]) -> list[Cell]:
    cells = []
    for wl in cfg.workloads:
        items = prompts[wl.name]
        for temp in workload_temperatures(cfg, wl, items):
            order = np.random.default_rng(unit_seed(cfg.seed, wl.name, temp, "adaptive"))
            ordered = [items[i] for i in order.permutation(len(items))]
            cap = cfg.adaptive.max_prompts or len(ordered)
            cells.append(Cell(wl.name, temp, ordered[:cap]))
    return cells


def run_adaptive(
    cfg: RunConfig,
    out_dir: Path,
    *,
    resume: bool = False,
    force: bool = False,
    base_dir: Path | None = None,
    events: RunEvents | None = None,
    session: Session | None = None,
    budget_minutes: float | None = None,
    budget_forwards: int | None = None,
) -> AdaptiveOutcome:
    """Run the adaptive plan (module docstring); records go to DIR/records.jsonl as they exist.
    Each record carries the target forwards its unit spent, so a resumed run counts the budget
    already spent."""
    prompts, session, done = start_run(cfg, out_dir, resume, force, base_dir, session)
    ev = events or SilentEvents()
    cells = make_cells(cfg, prompts)
    by_cell = {(c.workload, c.temp): c for c in cells}
    spent_ms, spent_forwards = 0.0, 0
    for rec in iter_records(out_dir / RECORDS_FILE) if (out_dir / RECORDS_FILE).exists() else []:
        cell = by_cell.get((str(rec.get("workload")), float(rec.get("temperature") or 0.0)))
        if cell is not None and rec.get("kind") in ("baseline", "spec", "failed"):
            g, d, pol = int(rec["gamma"]), rec.get("drafter") or "", rec.get("policy") or ""
            key = (g, d, pol, str(rec["prompt_id"]))
            cell.records[key] = rec
            spent_ms += float(rec.get("wall_ms") or 0.0)
            spent_forwards += int(rec.get("target_forwards") or 0)
    budget = cfg.adaptive.budget_minutes if budget_minutes is None else budget_minutes
    deadline = math.inf if budget is None else time.monotonic() + budget * 60 - spent_ms / 1000
    max_forwards = cfg.adaptive.budget_forwards if budget_forwards is None else budget_forwards
    budgeted = budget is not None or max_forwards is not None
    per_prompt = 1 + cfg.adaptive.max_candidates * len(cfg.drafters)
    ev.planned(sum(len(c.prompts) for c in cells) * per_prompt, len(done))
    outcome = AdaptiveOutcome(out_dir, cells=cells)
    warmed: set[float] = set()  # the temperatures warmed up in this invocation
    config = StoredConfig.of(cfg)  # as the report will read it back
    line = 1.0 + cfg.decision.margin
    for cell in cells:
        ev.cell_updated(cell.workload, cell.temp, cell.state, cell.decision, line)
    with (
        RecordWriter(out_dir / RECORDS_FILE) as writer,
        RecordWriter(out_dir / "warmup.jsonl") as warm_writer,
    ):
        while measuring(cells):
            for cell in nearest_first(cells) if budgeted else measuring(cells):
                if time.monotonic() > deadline or spent_forwards >= (max_forwards or math.inf):
                    cell.state = "budget spent"
                    ev.cell_updated(cell.workload, cell.temp, cell.state, cell.decision, line)
                    continue
                pilot_or_measure = cell.candidates is not None or in_pilot(cell)
                units = next_units(cfg, cell)
                for unit in units:
                    k = unit.key
                    if k in done:
                        outcome.skipped += 1
                        continue
                    if k.gamma and set_aside(cell, k.prompt_id):
                        continue
                    if cell.temp not in warmed:
                        warmed.add(cell.temp)
                        _warm_up(session, cfg, cell, warm_writer)
                    ev.unit_started(cell.workload, cell.temp, unit.setting.label, k.prompt_id)
                    before = session.target_forwards
                    record, notes = measure_unit(session, unit, cell.temp)
                    record["plan_prompts"] = len(cell.prompts)  # the futility stop's supply
                    record["target_forwards"] = session.target_forwards - before
                    spent_forwards += record["target_forwards"]
                    outcome.warnings.extend(notes)
                    if record["status"] == "failed":
                        outcome.failures.append(record)
                    writer.write(record)
                    cell.records[(k.gamma, k.drafter, k.policy, k.prompt_id)] = _line(record)
                    outcome.written += 1
                    ev.unit_finished(UnitFinished.of(record))
                if pilot_or_measure:
                    cell.next_prompt += 1
                update(config, cell)
                ev.cell_updated(cell.workload, cell.temp, cell.state, cell.decision, line)
    return outcome


def measuring(cells: list[Cell]) -> list[Cell]:
    return [c for c in cells if c.state == "measuring"]


def nearest_first(cells: list[Cell]) -> list[Cell]:
    """Under a budget, the cells to advance next: the cells still piloting, one step each (none
    has an estimate yet, and a tight budget must not starve the last ones), else the one
    undecided cell with the fewest "more prompts needed" (unknown first: it needs data to be
    estimated at all), ties in config order."""
    active = measuring(cells)
    piloting = [c for c in active if c.candidates is None or c.decision is None]
    if piloting or not active:
        return piloting

    def key(c: Cell) -> tuple[float, int]:
        more = c.decision.more_prompts if c.decision is not None else None
        return (-1.0 if more is None else float(more), cells.index(c))

    return [min(active, key=key)]


def _warm_up(session: Session, cfg: RunConfig, cell: Cell, writer: RecordWriter) -> None:
    """The config's warm-up prompts of `cell` (baseline and γ_max), to warmup.jsonl, before the
    first measured unit at the cell's temperature in this invocation. Once per temperature, not
    per cell as the full grid does: cells take turns prompt by prompt, so a cell's first unit
    follows the other cells' units on the same warm model, and a per-cell warm-up would not stand
    closer in time to it (docs/run.md, "The adaptive plan")."""
    top = grid(cfg, cfg.draft.label)[-1]
    for p in cell.prompts[: cfg.warmup]:
        for st in (Setting(0), top):
            unit = Unit(st, st.unit_key(cell.workload, cell.temp, p.id, 0), p, True)
            record, _ = measure_unit(session, unit, cell.temp)
            writer.write({**record, "kind": f"warmup_{unit.key.kind}"})
