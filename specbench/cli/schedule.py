"""`specbench schedule RUN_DIR`: write an engine run's γ schedule by concurrency in an engine's own
configuration (docs/schedule.md).

    specbench schedule reports/tiny-vllm --format vllm --workload tiny_code --temperature 0
    specbench schedule reports/tiny-vllm --format trtllm --workload tiny_code --out trtllm.yaml
    specbench schedule reports/tiny-vllm --format json --workload tiny_code --out schedule.json

The schedule is recomputed from the run's records (`analysis.gamma_schedule`), so it always
matches the records. vLLM output is checked against the installed vLLM when it is installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
import yaml

from specbench.errors import SpecbenchError

Format = Literal["vllm", "trtllm", "json"]


def _pick(results: Any, workload: str | None, temperature: float | None) -> Any:
    """The engine entry the options name (or the only one)."""
    engine = [e for e in results.workloads if e.engine is not None]
    if not engine:
        raise SpecbenchError(
            "the run has no concurrency data: `schedule` needs an engine run (backend vllm or "
            "openai) measured at several concurrencies"
        )
    names = sorted({e.workload for e in engine})
    if workload is not None and workload not in names:
        raise SpecbenchError(f"--workload: '{workload}' is not in the run ({', '.join(names)})")
    pool = [e for e in engine if workload is None or e.workload == workload]
    temps = sorted({e.temperature for e in pool})
    if temperature is not None and temperature not in temps:
        raise SpecbenchError(
            f"--temperature: {temperature:g} was not measured "
            f"({', '.join(f'{t:g}' for t in temps)})"
        )
    pool = [e for e in pool if temperature is None or e.temperature == temperature]
    if len(pool) > 1:
        cells = ", ".join(f"{e.workload} T={e.temperature:g}" for e in pool)
        raise SpecbenchError(f"choose one with --workload and --temperature: {cells}")
    entry = pool[0]
    if entry.engine.schedule is None:
        raise SpecbenchError(
            f"{entry.workload} T={entry.temperature:g}: no schedule (no baseline or no γ measured "
            "at the same concurrencies)"
        )
    levels = [r.concurrency for r in entry.engine.schedule.concurrencies]
    if len(levels) < 2:
        raise SpecbenchError(
            f"{entry.workload} T={entry.temperature:g} was measured at one concurrency only "
            f"({levels[0]}): a schedule needs at least two (config key `concurrency`)"
        )
    return entry


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


def schedule(
    run_dir: Annotated[Path, typer.Argument(help="An engine run directory (backend vllm/openai).")],
    fmt: Annotated[
        Format, typer.Option("--format", help="vllm (speculative_config JSON), trtllm, json.")
    ] = "json",
    workload: Annotated[
        str | None, typer.Option(help="The workload (needed when several).")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(min=0.0, max=100.0, help="The temperature (when several).")
    ] = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Write the run's γ schedule by concurrency as vLLM, TensorRT-LLM or neutral JSON config."""
    from specbench.analysis.results import build_results
    from specbench.analysis.results_model import as_results
    from specbench.harness.rundir import load_run
    from specbench.report import schedule_export as ex

    records, config, env, _ = load_run(run_dir)
    results = as_results(build_results(records, config, env))
    entry = _pick(results, workload, temperature)
    sched = entry.engine.schedule
    ranges = [list(r) for r in sched.ranges]
    notes = [
        f"{entry.workload} T={entry.temperature:g}: measured up to concurrency "
        f"{sched.measured_up_to}; the last range's k is carried beyond it (extrapolated)"
    ]
    if fmt == "vllm":
        from specbench.harness.serving.vllm_schedule import (
            check_with_installed_vllm,
            vllm_installed,
        )

        base = dict(env.get("speculative_config") or {})  # the run's method, draft, options
        text = json.dumps(ex.vllm_speculative_config(ranges, base), ensure_ascii=False)
        if not base:
            notes.append("the run stored no speculative_config: add your method and draft model")
        if vllm_installed():
            notes.append(f"accepted by the installed vLLM {check_with_installed_vllm(ranges)}")
        else:
            notes.append("not checked: vLLM is not installed here")
    elif fmt == "trtllm":
        text = yaml.safe_dump(ex.trtllm_options(ranges), sort_keys=False)
    else:
        doc = ex.neutral_document(
            sched, entry.workload, entry.temperature, _provenance(run_dir, env, config)
        )
        text = json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=False)
    if out_file is not None:
        out_file.write_text(text.rstrip("\n") + "\n")
        notes.append(f"wrote {out_file}")
    else:
        sys.stdout.write(text.rstrip("\n") + "\n")
    for n in notes:
        print(n, file=sys.stderr)
