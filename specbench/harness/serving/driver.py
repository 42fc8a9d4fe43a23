"""`specbench run` on a serving engine (`backend: vllm` or `openai`): the driver both share.

A *setting* is one engine configuration: the baseline (γ = 0, no speculation) or speculation at
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
  `e2e_ms`, `backend` and, at concurrency 1, `spec_counters`; a request that failed is a "failed"
  line with its error;
- then, last, one "engine_metrics" line for the batch: counter deltas (`spec_counters`, null with
  `acceptance_available: false` when the engine exports none), batch wall time, output tokens/s,
  `n_requests` run in it out of `n_planned`, `partial: true` when it ran only the rest of a batch.
A unit is (setting, workload, temperature, concurrency, repeat, prompt); it is done once it has a
successful line. `--resume` runs every unit not done — the ones a kill left unstarted or in flight
and the ones that failed — as the rest of their batch (a partial batch), so a killed run loses at
most the requests in flight and each unit ends with exactly one successful line.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from specbench.config import RunConfig, dump_config
from specbench.data import Prompt
from specbench.errors import SpecbenchError
from specbench.harness.runner import (
    RunEvents,
    RunOutcome,
    _SilentEvents,
    _unit_seed,
    load_prompts,
    prepare_run_dir,
)
from specbench.harness.serving.metrics import SpecCounters
from specbench.records import (
    MEASURED_KINDS,
    RECORDS_FILE,
    RecordWriter,
    iter_records,
    repair_truncated_tail,
)

ENGINE_METRICS_KIND = "engine_metrics"


@dataclass(frozen=True)
class Setting:
    """One engine configuration: γ (0 = no speculation) and the drafter label records carry."""

    gamma: int
    label: str
    endpoint: str = ""  # openai: the server URL measured for this setting


@dataclass(frozen=True)
class Conversation:
    prompt: Prompt
    seed: int


@dataclass
class TurnResult:
    prompt_tokens: int
    new_tokens: int
    ttft_ms: float
    e2e_ms: float
    text: str
    stop_reason: str
    output_ids: list[int] | None = None
    chunks: int = 0
    truncated: bool = False


@dataclass
class ConversationResult:
    turns: list[TurnResult] = field(default_factory=list)
    error: str | None = None
    counters: SpecCounters | None = None  # this conversation's deltas (concurrency 1 only)


@dataclass(frozen=True)
class Snapshot:
    """One read of the engine's metrics."""

    available: bool  # False: no metrics to read (a server without /metrics)
    counters: SpecCounters | None  # None: no spec-decode counters exported
    accept_length: float | None = None  # SGLang's gauge, where exported


OnResult = Callable[[int, ConversationResult], None]


class EngineSession(Protocol):
    """An open engine setting."""

    def snapshot(self) -> Snapshot: ...

    def run_batch(
        self,
        convs: list[Conversation],
        temperature: float,
        concurrency: int,
        on_result: OnResult | None = None,
    ) -> list[ConversationResult]:
        """Run the conversations; call `on_result(index, result)` in the calling thread as each
        one completes (so its record is on disk before the batch ends); return them all."""
        ...


class Backend(Protocol):
    name: str

    def settings(self) -> list[Setting]: ...

    def open(self, setting: Setting) -> AbstractContextManager[EngineSession]: ...

    def environment(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class BatchKey:
    gamma: int
    drafter: str
    workload: str
    temperature: float
    concurrency: int
    repeat: int


# A unit: one prompt of one batch.
UnitId = tuple[BatchKey, str]


def _batch_key(rec: dict[str, Any]) -> BatchKey:
    return BatchKey(
        int(rec["gamma"]),
        rec.get("drafter", ""),
        rec["workload"],
        float(rec["temperature"]),
        int(rec["concurrency"]),
        int(rec.get("repeat", 0)),
    )


# ---------------------------------------------------------------------------------------------
# the run directory


def _without_server(cfg_yaml: str) -> str:
    import yaml

    data = yaml.safe_load(cfg_yaml) or {}
    data.pop("server", None)
    data.pop("gammas", None)  # openai: the γ the servers run
    return yaml.safe_dump(data, sort_keys=True)


def merged_server_config(cfg: RunConfig, stored_yaml: str) -> RunConfig:
    """`cfg` with the endpoints already measured in the stored run added (openai backend)."""
    import yaml

    from specbench.config import EndpointSpec, parse_config

    old = parse_config(yaml.safe_load(stored_yaml), "stored config")
    seen: dict[int, EndpointSpec] = {}
    for ep in [*endpoints_of(old), *endpoints_of(cfg)]:
        seen[ep.gamma] = ep  # one server per γ; the newer config's wins
    server = cfg.server.model_copy(update={"endpoints": list(seen.values())})
    grid = sorted({g for g in seen if g > 0}) or cfg.gammas
    return cfg.model_copy(update={"server": server, "gammas": grid})


def prepare_engine_dir(
    cfg: RunConfig, out_dir: Path, resume: bool, force: bool
) -> tuple[RunConfig, set[UnitId]]:
    """Create or validate DIR; return the config to store and the units already measured
    successfully (a failed unit is not done: `--resume` retries it).

    openai backend: `--resume` also accepts a config that differs only in `server` (the next
    server of a one-server-per-setting series); the stored config then lists every endpoint.
    """
    stored = out_dir / "config.yaml"
    records = out_dir / RECORDS_FILE
    if (
        cfg.backend == "openai"
        and resume
        and not force
        and records.is_file()
        and stored.is_file()
        and stored.read_text() != dump_config(cfg)
        and _without_server(stored.read_text()) == _without_server(dump_config(cfg))
    ):
        cfg = merged_server_config(cfg, stored.read_text())
        stored.write_text(dump_config(cfg))
    prepare_run_dir(cfg, out_dir, resume, force)
    done: set[UnitId] = set()
    if records.exists():
        repair_truncated_tail(records)
        for rec in iter_records(records):
            if rec.get("kind") in MEASURED_KINDS:
                done.add((_batch_key(rec), str(rec["prompt_id"])))
    return cfg, done


def endpoints_of(cfg: RunConfig) -> list[Any]:
    """The servers of an openai run: `server.endpoints`, else the single `server.url`."""
    from specbench.config import EndpointSpec

    s = cfg.server
    return list(s.endpoints) or [EndpointSpec(url=s.url, gamma=s.gamma, label=s.label)]


def endpoint_label(ep: Any) -> str:
    return str(ep.label) if ep.label else ("" if ep.gamma == 0 else f"server γ={ep.gamma}")


# ---------------------------------------------------------------------------------------------
# records


def _rounded(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


def request_record(head: dict[str, Any], res: ConversationResult, keep_ids: bool) -> dict[str, Any]:
    """One prompt's record, the transformers backend's fields plus the engine's."""
    if res.error is not None or not res.turns:
        return {**head, "kind": "failed", "status": "failed", "error": (res.error or "")[:300]}
    turns = res.turns
    new_tokens = sum(t.new_tokens for t in turns)
    e2e = [t.e2e_ms for t in turns]
    ttft = [t.ttft_ms for t in turns]
    wall_ms = sum(e2e)
    decode_ms = wall_ms - sum(ttft)
    # TPOT (docs/theory.md §6): (e2e − TTFT) / (n_out − 1) per turn, pooled over the turns.
    after_first = sum(max(t.new_tokens - 1, 0) for t in turns)
    body: dict[str, Any] = {
        "status": "ok",
        "turns": len(turns),
        "prompt_tokens": [t.prompt_tokens for t in turns],
        "new_tokens": new_tokens,
        "new_tokens_per_turn": [t.new_tokens for t in turns],
        "stop_reason": [t.stop_reason for t in turns],
        "ttft_ms": [_rounded(x) for x in ttft],
        "e2e_ms": [_rounded(x) for x in e2e],
        "wall_ms": _rounded(wall_ms),
        "decode_ms": _rounded(decode_ms),
        "tokens_per_s": new_tokens / (wall_ms / 1000.0) if wall_ms > 0 else None,
        "tpot_ms": decode_ms / after_first if after_first > 0 else None,
        "chunks": [t.chunks for t in turns],
        "peak_memory_mb": None,
        "answers": [t.text for t in turns],
    }
    if keep_ids and all(t.output_ids is not None for t in turns):
        body["output_ids"] = [t.output_ids for t in turns]
    if res.counters is not None:
        body["spec_counters"] = res.counters.to_dict()
    return {**head, **body}


def metrics_record(
    head: dict[str, Any],
    before: Snapshot,
    after: Snapshot,
    wall_ms: float,
    results: list[ConversationResult],
    n_planned: int,
) -> dict[str, Any]:
    counters = (
        after.counters.minus(before.counters)
        if after.counters is not None and before.counters is not None
        else None
    )
    tokens = sum(t.new_tokens for r in results for t in r.turns)
    if head.get("concurrency") == 1:  # sequential: leave out the gaps spent reading counters
        wall_ms = sum(t.e2e_ms for r in results for t in r.turns) or wall_ms
    return {
        **head,
        "kind": ENGINE_METRICS_KIND,
        "metrics_available": after.available,
        "acceptance_available": counters is not None,
        "spec_counters": counters.to_dict() if counters is not None else None,
        "accept_length_gauge": after.accept_length,
        "n_requests": len(results),
        "n_planned": n_planned,  # the workload's prompts; fewer ran in a resumed (partial) batch
        "partial": len(results) < n_planned,
        "n_failed": sum(1 for r in results if r.error is not None),
        "output_tokens": tokens,
        "batch_wall_ms": _rounded(wall_ms),
        "output_tokens_per_s": tokens / (wall_ms / 1000.0) if wall_ms > 0 else None,
    }


def label_checks(setting: Setting, counters: SpecCounters | None, available: bool) -> list[str]:
    """Warnings when what the engine reports contradicts the setting it is labelled with."""
    notes = []
    where = setting.endpoint or setting.label or "the engine"
    if not available:
        notes.append(f"{where}: no /metrics endpoint; latency measured, acceptance unavailable")
    elif setting.gamma > 0 and counters is None:
        notes.append(
            f"{where}: exports no spec-decode counters; acceptance unavailable (is speculation on?)"
        )
    elif setting.gamma == 0 and counters is not None and counters.drafts > 0:
        notes.append(f"{where} is labelled γ=0 (baseline) but reports speculative drafts")
    elif setting.gamma > 0 and counters is not None and counters.drafts > 0:
        per_draft = counters.draft_tokens / counters.drafts
        if len(counters.per_pos) not in (0, setting.gamma) or per_draft > setting.gamma + 1e-9:
            notes.append(
                f"{where} is labelled γ={setting.gamma} but drafts up to "
                f"{max(len(counters.per_pos), round(per_draft))} tokens; fix its gamma"
            )
    return notes


# ---------------------------------------------------------------------------------------------
# the driver


def plan_batches(cfg: RunConfig) -> Iterator[tuple[str, float, int, int]]:
    for wl in cfg.workloads:
        for temp in cfg.sampling.temperatures:
            for conc in cfg.concurrency:
                for rep in range(cfg.repeats):
                    yield wl.name, temp, conc, rep


def make_backend(cfg: RunConfig, out_dir: Path) -> Backend:
    """The backend a config names (imported lazily: vLLM is an optional extra)."""
    if cfg.backend == "vllm":
        from specbench.harness.serving.vllm_backend import VllmBackend

        return VllmBackend(cfg, out_dir)
    if cfg.backend == "openai":
        from specbench.harness.serving.openai_backend import OpenAIBackend

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
    ev = events or _SilentEvents()
    prompts = load_prompts(cfg, base_dir)
    cfg, done = prepare_engine_dir(cfg, out_dir, resume, force)
    backend = backend or make_backend(cfg, out_dir)
    outcome = RunOutcome(out_dir)
    settings = backend.settings()
    plan = list(plan_batches(cfg))
    total = sum(len(prompts[w]) for s in settings for w, *_ in plan)
    already = sum(
        1
        for s in settings
        for w, t, c, r in plan
        for p in prompts[w]
        if (BatchKey(s.gamma, s.label, w, t, c, r), p.id) in done
    )
    ev.planned(total, already)
    _write_env(out_dir, cfg, backend)
    try:
        _measure(cfg, out_dir, backend, settings, plan, done, prompts, ev, outcome)
    finally:
        _write_env(out_dir, cfg, backend)  # now with what the engines reported about themselves
    return outcome


def _write_env(out_dir: Path, cfg: RunConfig, backend: Backend) -> None:
    env = {**base_environment(cfg), **backend.environment()}
    (out_dir / "env.json").write_text(json.dumps(env, indent=2, default=str) + "\n")


def _measure(
    cfg: RunConfig,
    out_dir: Path,
    backend: Backend,
    settings: list[Setting],
    plan: list[tuple[str, float, int, int]],
    done: set[UnitId],
    prompts: dict[str, list[Prompt]],
    ev: RunEvents,
    outcome: RunOutcome,
) -> None:
    with (
        RecordWriter(out_dir / RECORDS_FILE) as writer,
        RecordWriter(out_dir / "warmup.jsonl") as warm_writer,
    ):
        for setting in settings:
            todo: list[tuple[tuple[str, float, int, int], list[Prompt]]] = []
            for batch in plan:
                key = BatchKey(setting.gamma, setting.label, *batch)
                rest = [p for p in prompts[batch[0]] if (key, p.id) not in done]
                outcome.skipped += len(prompts[batch[0]]) - len(rest)
                if rest:
                    todo.append((batch, rest))
            if not todo:
                continue
            with backend.open(setting) as session:
                try:
                    _warm_up(cfg, setting, session, prompts, warm_writer, ev)
                    for (workload, temp, conc, rep), rest in todo:
                        _run_batch(
                            cfg, setting, session, rest, len(prompts[workload]), workload, temp,
                            conc, rep, writer, ev, outcome,
                        )  # fmt: skip
                except (KeyboardInterrupt, SpecbenchError):
                    raise
                except Exception as exc:  # the engine died mid-run: one line, records kept
                    what = f"γ={setting.gamma}" if setting.gamma else "baseline"
                    first = (str(exc).strip().splitlines() or [""])[0][:300]
                    raise SpecbenchError(
                        f"the {what} engine failed while measuring ({type(exc).__name__}: "
                        f"{first}); the records written so far are kept in {out_dir}"
                        + backend_hint(backend)
                    ) from None


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
        "drafter": setting.label,
        "policy": "fixed" if setting.gamma else "",
        "repeat": rep,
        "concurrency": conc,
        "backend": cfg.backend,
        "endpoint": setting.endpoint or None,
    }


def _conversations(
    cfg: RunConfig, items: list[Prompt], workload: str, temp: float, setting: Setting, rep: int
) -> list[Conversation]:
    # The same seed per prompt at every γ and concurrency (as the transformers backend per unit).
    return [
        Conversation(p, _unit_seed(cfg.seed, workload, temp, setting.gamma, p.id, rep))
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
    """Warm-up prompts (the first `warmup` of each workload) once per setting, written apart."""
    if cfg.warmup == 0:
        return
    for wl in cfg.workloads:
        items = prompts[wl.name][: cfg.warmup]
        temp = cfg.sampling.temperatures[0]
        ev.unit_started(wl.name, temp, f"warm-up {setting.label or 'baseline'}", items[0].id)
        convs = _conversations(cfg, items, wl.name, temp, setting, 0)
        for conv, res in zip(convs, session.run_batch(convs, temp, 1), strict=True):
            head = _head(cfg, setting, wl.name, temp, 1, 0)
            rec = request_record(
                {**head, "prompt_id": conv.prompt.id, "seed": conv.seed}, res, False
            )
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
    label = f"{'γ=' + str(setting.gamma) if setting.gamma else 'baseline'} c={conc}"
    ev.unit_started(workload, temp, label, f"{len(items)} prompts")
    convs = _conversations(cfg, items, workload, temp, setting, rep)
    head = _head(cfg, setting, workload, temp, conc, rep)

    def write(i: int, res: ConversationResult) -> None:
        conv = convs[i]
        rec = request_record({**head, "prompt_id": conv.prompt.id, "seed": conv.seed}, res, True)
        if rec["kind"] == "failed":
            outcome.failures.append(rec)
        if any(t.truncated for t in res.turns):
            outcome.warnings.append(f"prompt {conv.prompt.id} truncated to fit the context")
        writer.write(rec)
        outcome.written += 1
        ev.unit_finished(rec)

    before = session.snapshot()
    t0 = time.perf_counter()
    results = session.run_batch(convs, temp, conc, write)
    wall_ms = (time.perf_counter() - t0) * 1000.0
    after = session.snapshot()
    mrec = metrics_record(head, before, after, wall_ms, results, n_planned)
    writer.write(mrec)
    counters = SpecCounters.from_dict(mrec["spec_counters"]) if mrec["spec_counters"] else None
    outcome.warnings.extend(label_checks(setting, counters, after.available))


def base_environment(cfg: RunConfig) -> dict[str, Any]:
    """Versions and machine, as the transformers backend records them (without torch devices)."""
    import specbench

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "specbench": specbench.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu,
        "backend": cfg.backend,
        "concurrency": cfg.concurrency,
    }


def require(condition: bool, message: str) -> None:
    if not condition:
        raise SpecbenchError(message)
