"""`specbench schedule RUN_DIR`: write an engine run's γ schedule by concurrency, for the pool of
workloads a server sees or for one workload, as the flags or file that start an engine with it
(docs/schedule.md).

    specbench schedule reports/tiny-vllm-load --format vllm             # the pool: vllm serve … line
    specbench schedule reports/tiny-vllm-load --format sglang --concurrency 4
    specbench schedule reports/tiny-vllm-load --format trtllm --out trtllm.yaml
    specbench schedule reports/tiny-vllm-load --workload tiny_code --out schedule.json

A run with a deployment profile exports the decision at the profile instead (the server's one
configuration at its mix, load and SLO: report/schedule/profile_export.py) unless `--workload` or
`--temperature` asks for a closed-loop schedule.

The schedule is recomputed from the run's records (`analysis.decide.gamma_schedule`, and for several
workloads `analysis.decide.pool_schedule`), so it always matches the records. Every key written is in
the engine's recorded config classes (`specbench/assets/engine-keys.json`); vLLM output is also
checked against the installed vLLM when it is installed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
import yaml

from specbench.analysis.documents.results_model import RunEnv
from specbench.config.stored import StoredConfig
from specbench.errors import SpecbenchError
from specbench.record_line import RecordLine

Format = Literal["vllm", "sglang", "trtllm", "json"]
MAX_CONCURRENCY = 1 << 20


def _engine_entries(results: Any) -> list[Any]:
    engine = [e for e in results.workloads if e.engine is not None]
    if not engine:
        raise SpecbenchError(
            "the run has no concurrency data: `schedule` needs an engine run (backend vllm or "
            "openai) measured at several concurrencies"
        )
    return engine


def _temperature(engine: list[Any], temperature: float | None) -> float:
    temps = sorted({e.temperature for e in engine})
    if temperature is not None and temperature not in temps:
        raise SpecbenchError(
            f"--temperature: {temperature:g} was not measured "
            f"({', '.join(f'{t:g}' for t in temps)})"
        )
    if temperature is None and len(temps) > 1:
        raise SpecbenchError(
            f"choose one with --temperature: the run measured {', '.join(f'{t:g}' for t in temps)}"
        )
    return temperature if temperature is not None else temps[0]


def _levels_check(label: str, sched: Any) -> None:
    levels = [r.concurrency for r in sched.concurrencies]
    if len(levels) < 2:
        raise SpecbenchError(
            f"{label} was measured at one concurrency only ({levels[0]}): a schedule needs at "
            "least two (config key `concurrency`)"
        )


def _pick(
    results: Any, records: list[RecordLine], config: StoredConfig, workload: str | None,
    temperature: float | None,
) -> tuple[str, float | None, Any]:  # fmt: skip
    """(label, temperature, GammaSchedule): the named workload's, or the pool's when the run
    has several workloads and none is named. The pool's shares are the deployment profile's
    traffic mix when the config has one (its workload shares; with a temperature mix and no
    --temperature, every measured temperature in its share), else the workloads' `weight`."""
    from specbench.analysis.decide.pool_schedule import pool_members, pool_schedule, traffic_shares
    from specbench.analysis.documents.settings import AnalysisSettings

    engine = _engine_entries(results)
    names = sorted({e.workload for e in engine})
    if workload is not None and workload not in names:
        raise SpecbenchError(f"--workload: '{workload}' is not in the run ({', '.join(names)})")
    if workload is not None:
        engine = [e for e in engine if e.workload == workload]
    w_shares, t_shares = traffic_shares(config)
    temps = sorted({e.temperature for e in engine})
    temp: float | None
    if workload is None and temperature is None and len(temps) > 1 and t_shares:
        temp = None  # the profile's temperature mix
    else:
        temp = _temperature(engine, temperature)
    pool = [e for e in engine if temp is None or e.temperature == temp]
    if len(pool) == 1:
        entry = pool[0]
        label = f"{entry.workload} T={entry.temperature:g}"
        if entry.engine.schedule is None:
            raise SpecbenchError(
                f"{label}: no schedule (no baseline or no γ measured at the same concurrencies)"
            )
        _levels_check(label, entry.engine.schedule)
        return label, entry.temperature, entry.engine.schedule
    s = AnalysisSettings.from_config(config)
    if w_shares:
        s = replace(s, weights={**s.weights, **w_shares})
    members = pool_members(records, s, temp, t_shares)
    doc = pool_schedule(members, s)
    mix = "" if temp is not None else " (the profile's temperature mix)"
    label = f"pool of {', '.join(m.workload for m in members)}" + (
        f" T={temp:g}" if temp is not None else mix
    )
    if doc is None:
        raise SpecbenchError(
            f"{label}: no concurrency and γ measured for every workload with the baseline; "
            "measure the same grid for each, or choose one with --workload"
        )
    _levels_check(label, doc)
    return label, temp, doc


def _unmeasured_note(results: Any, workload: str | None, temp: float | None) -> list[str]:
    """A schedule resting on cells without a verdict (degenerate answers, docs/theory.md §13)
    is exported — its throughput ratios are measured — but said not to be a result (the rule of
    report/sections/no_verdict.py)."""
    from specbench.report.sections.no_verdict import shows_speedup

    cells = [
        f"{e.workload} T={e.temperature:g}"
        for e in results.workloads
        if e.engine is not None
        and (workload is None or e.workload == workload)
        and (temp is None or e.temperature == temp)
        and not shows_speedup(e)
    ]
    if not cells:
        return []
    return [
        f"⚠ {', '.join(cells)}: not measured (no verdict: too few answers are real text, "
        "docs/theory.md §13); this schedule's throughput ratios rest on them and are not a "
        "result: measure on real traffic before pasting it"
    ]


def _provenance(run_dir: Path, env: dict[str, Any], config: StoredConfig) -> dict[str, Any]:
    return {
        "run_dir": str(run_dir),
        "run": config.name,
        "target": config.target.model if config.target else None,
        "draft": config.draft.model if config.draft else None,
        "backend": env.get("backend"),
        "engine_version": env.get("vllm"),
        "device": env.get("gpu") or env.get("device"),
        "specbench": env.get("specbench"),
    }


def _deployment(env: dict[str, Any], config: StoredConfig, drafter: str | None = None) -> Any:
    """The target, method, draft and options the run served (env.json's speculative_config: the
    one of `drafter` when named, else the first; an openai run's first speculative endpoint),
    for the engine flags."""
    from specbench.report.schedule.schedule_export import Deployment

    target = str(
        (env.get("engine_args") or {}).get("model")
        or (config.target.model if config.target else None)
        or "MODEL"
    )
    conf = env.get("speculative_config")
    if isinstance(conf, list):
        named = [c for c in conf if drafter and drafter in (c.get("method"), c.get("label"))]
        conf = (named or conf or [None])[0]
    draft = config.draft.model if config.draft else None
    if isinstance(conf, dict) and conf:
        dep = Deployment.from_vllm(target, conf)
        return dep if dep.draft or dep.method != "draft_model" else replace(dep, draft=draft)
    endpoints = (config.server.endpoints if config.server else None) or []
    method = next((e.method for e in endpoints if e.method), None)
    return Deployment(target, str(method or "draft_model"), draft)


def _export(
    fmt: Format,
    ranges: list[list[int]],
    dep: Any,
    at: int | None,
    notes: list[str],
    engine_args: dict[str, Any] | None = None,
) -> str:
    from specbench.report.schedule import parallel_layout as pl
    from specbench.report.schedule import schedule_export as ex

    if dep.method in ex.NEEDS_DRAFT and not dep.draft:
        notes.append("the run stored no draft model: replace DRAFT_MODEL with its path")
    if fmt == "vllm":
        from specbench.harness.serving.vllm.vllm_schedule import (
            check_with_installed_vllm,
            vllm_installed,
        )

        draft = dep.draft or ("DRAFT_MODEL" if dep.method in ex.NEEDS_DRAFT else None)
        base = {"method": dep.method, **({"model": draft} if draft else {}), **dep.options}
        conf = ex.vllm_speculative_config(ranges, base)
        for key in ex.unknown_keys("vllm", list(conf)):
            notes.append(f"'{key}' (from the run) is not in vLLM's SpeculativeConfig as recorded")
        if vllm_installed() and "num_speculative_tokens_per_batch_size" in conf:
            notes.append(f"accepted by the installed vLLM {check_with_installed_vllm(ranges)}")
        notes.extend(filter(None, [ex.vllm_other_nodes(engine_args)]))
        return ex.vllm_command(dep.target, conf, engine_args)
    if fmt == "sglang":
        gamma = ex.one_gamma(ranges, at)
        if at is not None and gamma == 0:  # off there is an answer: the plain launch line
            from specbench.report.schedule.schedule_off import plain_sglang

            notes.append(f"# serve without speculation: the schedule is off at concurrency {at}")
            return plain_sglang(dep.target, engine_args, notes)
        if at is not None:
            notes.append(f"γ={gamma}: the schedule's k at concurrency {at}")
        sg = pl.sglang_layout(engine_args)
        notes.extend([*sg.notes, *pl.draft_layout_notes("SGLang", dep.options)])
        return ex.sglang_command(dep, gamma, sg.flags)
    trt = pl.trtllm_layout(engine_args)
    opts = ex.trtllm_options(ranges, dep, trt.keys)
    notes.append(f"start with: {ex.trtllm_command(dep.target, 'THIS_FILE.yaml')}")
    notes.extend([*trt.notes, *pl.draft_layout_notes("TensorRT-LLM", dep.options)])
    return yaml.safe_dump(opts, sort_keys=False)


def _export_off(
    fmt: Format,
    outcome: str,
    dep: Any,
    notes: list[str],
    engine_args: dict[str, Any] | None,
) -> str:
    """Speculation off: the line that starts the engine without it, and the `# …` line saying
    which outcome that is (`outcome`: OFF, UNDECIDED, NOT MEASURED; report/schedule/schedule_off.py)."""
    from specbench.report.schedule import schedule_off as off
    from specbench.report.schedule.schedule_export import trtllm_command, vllm_other_nodes

    notes.insert(0, outcome)
    if fmt == "vllm":
        notes.extend(filter(None, [vllm_other_nodes(engine_args)]))
        return off.plain_vllm(dep.target, engine_args)
    if fmt == "sglang":
        return off.plain_sglang(dep.target, engine_args, notes)
    text = off.plain_trtllm_yaml(engine_args, notes)
    empty = (
        "with nothing else in it, the option can be left out"
        if text == "{}\n"
        else "it holds the measured layout and execution mode"
    )
    notes.insert(
        1,
        f"start with: {trtllm_command(dep.target, 'THIS_FILE.yaml')} (the file holds no "
        f"speculative_config; {empty})",
    )
    return text


def _engine_text(
    fmt: Format,
    sched: Any,
    env: dict[str, Any],
    config: StoredConfig,
    at: int | None,
    not_measured: bool,
    notes: list[str],
) -> str:
    """The engine's flags or file for the schedule; off everywhere: the server without it."""
    from specbench.report.schedule.schedule_export import is_off_everywhere
    from specbench.report.schedule.schedule_off import off_outcome

    # an in-process run's parallel layout goes on the vllm serve line (env.json)
    layout = env.get("engine_args") if env.get("backend") == "vllm" else None
    dep = _deployment(env, config)
    _target_note(dep, notes)
    ranges = [list(r) for r in sched.ranges]
    if is_off_everywhere(ranges):  # serve without speculation
        return _export_off(fmt, off_outcome(sched, not_measured)[1], dep, notes, layout)
    return _export(fmt, ranges, dep, at, notes, layout)


def _target_note(dep: Any, notes: list[str]) -> None:
    if Path(dep.target).is_absolute() and not Path(dep.target).exists():
        notes.append(
            f"the run's target {dep.target} is not on this machine: replace it with the "
            "model's path or name where the server runs"
        )


def _profile_text(
    fmt: Format,
    results: Any,
    run_dir: Path,
    env: dict[str, Any],
    config: StoredConfig,
    at: int | None,
    notes: list[str],
) -> str:
    """A run with a deployment profile: the decision there is the pool's one configuration
    (report/schedule/profile_export.py). vLLM's line is the first screen's paste line itself."""
    from specbench.report.schedule import profile_export as pe
    from specbench.report.sections.paste import setting_paste_line

    p = results.profile_decision
    ranges = pe.profile_ranges(p)
    if fmt == "json" or ranges:
        notes.append(pe.profile_note(p))  # off: _export_off puts it first
    if fmt == "json":
        doc = pe.profile_document(p, _provenance(run_dir, env, config))
        return json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=False)
    layout = env.get("engine_args") if env.get("backend") == "vllm" else None
    dep = _deployment(env, config, p.drafter)
    _target_note(dep, notes)
    if not ranges:
        return _export_off(fmt, pe.profile_note(p), dep, notes, layout)
    line = setting_paste_line(results, p.drafter, p.gamma, p.schedule) if fmt == "vllm" else None
    return line or _export(fmt, ranges, dep, at, notes, layout)


def schedule(
    run_dir: Annotated[Path, typer.Argument(help="An engine run directory (backend vllm/openai).")],
    fmt: Annotated[
        Format,
        typer.Option(
            "--format",
            help="vllm (the `vllm serve` line), sglang (the launch_server line), trtllm "
            "(speculative_config YAML), json (the decisions).",
        ),
    ] = "json",
    workload: Annotated[
        str | None, typer.Option(help="One workload's schedule (default: the pool's).")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(min=0.0, max=100.0, help="The temperature (when several).")
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_CONCURRENCY,
            help="sglang: the server's operating concurrency (one γ per server).",
        ),
    ] = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Write the run's γ schedule as the vLLM, SGLang or TensorRT-LLM setting, or neutral JSON
    (a run with a deployment profile: the decision there, docs/schedule.md)."""
    from specbench.analysis.pipeline.results import build_results
    from specbench.harness.run.rundir import load_run
    from specbench.report.schedule import schedule_export as ex

    records, config, env, _ = load_run(run_dir)
    results = build_results(records, config, RunEnv.model_validate(env))
    if results.profile_decision is not None and workload is None and temperature is None:
        notes: list[str] = []
        _write(
            _profile_text(fmt, results, run_dir, env, config, concurrency, notes), out_file, notes
        )
        return
    label, temp, sched = _pick(results, records, config, workload, temperature)
    unmeasured = _unmeasured_note(results, workload, temp)
    notes = [
        f"{label}: measured up to concurrency {sched.measured_up_to}; the last range's k is "
        "carried beyond it (extrapolated)",
        *unmeasured,
    ]
    if fmt == "json":
        name = label.rsplit(" T=", 1)[0] if temp is not None else label
        doc = ex.neutral_document(sched, name, temp, _provenance(run_dir, env, config))
        text = json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=False)
    else:
        text = _engine_text(fmt, sched, env, config, concurrency, bool(unmeasured), notes)
    _write(text, out_file, notes)


def _write(text: str, out_file: Path | None, notes: list[str]) -> None:
    if out_file is not None:
        try:
            out_file.write_text(text.rstrip("\n") + "\n")
        except OSError as exc:
            raise SpecbenchError(f"--out {out_file}: cannot write: {exc.strerror}") from None
        notes.append(f"wrote {out_file}")
    else:
        sys.stdout.write(text.rstrip("\n") + "\n")
    for n in notes:
        print(n, file=sys.stderr)
