"""`specbench schedule RUN_DIR`: write an engine run's γ schedule by concurrency, for the pool of
workloads a server sees or for one workload, as the flags or file that start an engine with it
(docs/schedule.md).

    specbench schedule reports/tiny-vllm-load --format vllm             # the pool: vllm serve … line
    specbench schedule reports/tiny-vllm-load --format sglang --concurrency 4
    specbench schedule reports/tiny-vllm-load --format trtllm --out trtllm.yaml
    specbench schedule reports/tiny-vllm-load --workload tiny_code --out schedule.json

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

from specbench.errors import SpecbenchError

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
    results: Any, records: list[dict[str, Any]], config: dict[str, Any], workload: str | None,
    temperature: float | None,
) -> tuple[str, float | None, Any]:  # fmt: skip
    """(label, temperature, GammaSchedule): the named workload's, or the pool's when the run
    has several workloads and none is named. The pool's shares are the deployment profile's
    traffic mix when the config has one (its workload shares; with a temperature mix and no
    --temperature, every measured temperature in its share), else the workloads' `weight`."""
    from specbench.analysis.decide.pool_schedule import pool_members, pool_schedule, traffic_shares
    from specbench.analysis.documents.results_model_engine import GammaSchedule
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
    sched = GammaSchedule.model_validate(doc)
    _levels_check(label, sched)
    return label, temp, sched


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


def _provenance(run_dir: Path, env: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_dir": str(run_dir),
        "run": config.get("name"),
        "target": (config.get("target") or {}).get("model"),
        "draft": (config.get("draft") or {}).get("model"),
        "backend": env.get("backend"),
        "engine_version": env.get("vllm"),
        "device": env.get("gpu") or env.get("device"),
        "specbench": env.get("specbench"),
    }


def _deployment(env: dict[str, Any], config: dict[str, Any]) -> Any:
    """The target, method, draft and options the run served (env.json's speculative_config; an
    openai run's first speculative endpoint), for the engine flags."""
    from specbench.report.schedule.schedule_export import Deployment

    target = str(
        (env.get("engine_args") or {}).get("model")
        or (config.get("target") or {}).get("model")
        or "MODEL"
    )
    conf = env.get("speculative_config")
    if isinstance(conf, list):
        conf = conf[0] if conf else None
    draft = (config.get("draft") or {}).get("model")
    if isinstance(conf, dict) and conf:
        dep = Deployment.from_vllm(target, conf)
        return dep if dep.draft or dep.method != "draft_model" else replace(dep, draft=draft)
    endpoints = ((config.get("server") or {}).get("endpoints")) or []
    method = next((e.get("method") for e in endpoints if e.get("method")), None)
    return Deployment(target, str(method or "draft_model"), draft)


def _export(
    fmt: Format,
    ranges: list[list[int]],
    dep: Any,
    at: int | None,
    notes: list[str],
    engine_args: dict[str, Any] | None = None,
) -> str:
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
        return ex.vllm_command(dep.target, conf, engine_args)
    if fmt == "sglang":
        gamma = ex.one_gamma(ranges, at)
        if at is not None:
            notes.append(f"γ={gamma}: the schedule's k at concurrency {at}")
        return ex.sglang_command(dep, gamma)
    opts = ex.trtllm_options(ranges, dep)
    notes.append(f"start with: {ex.trtllm_command(dep.target, 'THIS_FILE.yaml')}")
    return yaml.safe_dump(opts, sort_keys=False)


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
    """Write the run's γ schedule as the vLLM, SGLang or TensorRT-LLM setting, or neutral JSON."""
    from specbench.analysis.pipeline.results import build_typed_results
    from specbench.harness.run.rundir import load_run
    from specbench.report.schedule import schedule_export as ex

    records, config, env, _ = load_run(run_dir)
    results = build_typed_results(records, config, env)
    label, temp, sched = _pick(results, records, config, workload, temperature)
    ranges = [list(r) for r in sched.ranges]
    notes = [
        f"{label}: measured up to concurrency {sched.measured_up_to}; the last range's k is "
        "carried beyond it (extrapolated)",
        *_unmeasured_note(results, workload, temp),
    ]
    if fmt == "json":
        name = label.rsplit(" T=", 1)[0] if temp is not None else label
        doc = ex.neutral_document(sched, name, temp, _provenance(run_dir, env, config))
        text = json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=False)
    else:
        # an in-process run's parallel layout goes on the vllm serve line (env.json)
        layout = env.get("engine_args") if env.get("backend") == "vllm" else None
        text = _export(fmt, ranges, _deployment(env, config), concurrency, notes, layout)
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
