"""`specbench simulate RUN_DIR`: replay γ policies over a run's recorded rounds (trace replay).

specbench simulate reports/tiny --policy adaptive --policy heuristic
specbench simulate reports/tiny --policy confidence:threshold=0.5,max_gamma=6 --json

simulation.json (and --json) is a document: schema, kind, `provenance` (the specbench that
replayed, the run replayed — its directory, pair, grid, the sha256 of its records.jsonl and the
specbench that measured it —, the policies asked for, the bootstrap and its seed) and
`simulations` (one entry per workload × temperature × drafter).

Schema history:
  1 — the document with provenance (before: a bare list of the simulations).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from specbench.cli.options import JsonOption
from specbench.config import POLICY_NAMES, PolicySpec
from specbench.errors import SpecbenchError
from specbench.report.render.terminal import make_console


def parse_policy(text: str) -> tuple[str, dict[str, Any]]:
    """'name' or 'name:key=value,key=value' → (name, options)."""
    name, _, rest = text.partition(":")
    name = name.strip()
    if name not in POLICY_NAMES:
        raise SpecbenchError(
            f"--policy: unknown policy '{name}'; valid policies: {', '.join(POLICY_NAMES)}"
        )
    options: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise SpecbenchError(f"--policy {text}: options are key=value, got '{item}'")
        try:
            options[key.strip()] = float(value) if "." in value else int(value)
        except ValueError:
            raise SpecbenchError(
                f"--policy {text}: '{key}' needs a number, got '{value}'"
            ) from None
    check_policy(text, name, options)
    return name, options


def check_policy(text: str, name: str, options: dict[str, Any]) -> None:
    """Validate the options as the config's PolicySpec does, as one line naming the option (not
    pydantic's multi-line dump)."""
    from pydantic import ValidationError

    try:
        PolicySpec(name=name, **options)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            valid = ", ".join(k for k in PolicySpec.model_fields if k != "name")
            raise SpecbenchError(
                f"--policy {text}: unknown option '{key}'; options: {valid}"
            ) from None
        where = f"'{key}': " if key else ""
        raise SpecbenchError(f"--policy {text}: {where}{msg}") from None


SIMULATION_SCHEMA = 1
N_BOOT = 2000  # analysis.simulate.replay.simulate_run's default


def provenance(
    run_dir: Path, config: dict[str, Any], env: dict[str, Any], policies: list[str]
) -> dict[str, Any]:
    """What a simulation was computed from, as run and accept record theirs."""
    import hashlib

    import specbench
    from specbench.analysis.stats.resampling import DEFAULT_SEED
    from specbench.records import RECORDS_FILE

    draft = config.get("draft") or {}
    records = run_dir / RECORDS_FILE
    return {
        "specbench": specbench.__version__,
        "run_dir": str(run_dir),
        "run": {
            "name": config.get("name"),
            "target": (config.get("target") or {}).get("model"),
            "draft": draft.get("model") or draft.get("method"),
            "backend": config.get("backend", "transformers"),
            "gammas": config.get("gammas"),
            "sampling": config.get("sampling"),
            "seed": config.get("seed"),
            "specbench": env.get("specbench"),
            "specbench_git_commit": env.get("specbench_git_commit"),
            "tokenizers": env.get("tokenizers"),
        },
        "records": {
            "file": RECORDS_FILE,
            "sha256": hashlib.sha256(records.read_bytes()).hexdigest(),
        },
        "policies": policies,
        "bootstrap": N_BOOT,
        "bootstrap_seed": DEFAULT_SEED,
    }


def simulate(
    run_dir: Annotated[Path, typer.Argument(help="A run directory with per-round records.")],
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            help="Policy to replay, e.g. adaptive or confidence:threshold=0.5 (repeatable; default: all five).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Replay γ policies over the rounds a run recorded at its largest γ; rank them per workload."""
    from specbench.analysis.documents.simulation_model import Simulation
    from specbench.analysis.simulate.replay import simulate_run
    from specbench.harness.run.rundir import load_run
    from specbench.report.simulate.simulate import render_simulation

    specs = [parse_policy(p) for p in policy] if policy else [(n, {}) for n in POLICY_NAMES]
    records, config, env, _notes = load_run(run_dir)
    drafters = [config.get("draft") or {}, *(config.get("extra_drafters") or [])]
    ngram = frozenset(
        d.get("name") or d.get("method", "model") for d in drafters if d.get("method") == "ngram"
    )
    results = simulate_run(records, specs, N_BOOT, ngram_drafters=ngram or frozenset({"ngram"}))
    if not results:
        raise SpecbenchError(f"{run_dir} has no baseline and fixed-γ records to replay")
    # validated once, here; simulation.json keeps the built dicts' key order
    typed = [Simulation.model_validate(r) for r in results]
    document = {
        "schema": SIMULATION_SCHEMA,
        "kind": "simulation",
        "provenance": provenance(run_dir, config, env, policy or list(POLICY_NAMES)),
        "simulations": results,
    }
    (run_dir / "simulation.json").write_text(json.dumps(document, indent=2) + "\n")
    if as_json:
        typer.echo(json.dumps(document, indent=2))
        return
    render_simulation(make_console(), typed)
    make_console().print(f"written: {run_dir}/simulation.json")
