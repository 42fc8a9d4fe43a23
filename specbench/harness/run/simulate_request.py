"""`specbench simulate` as one typed request: the run directory and the γ policies to replay
(each `--policy` parsed and checked as the config's `PolicySpec`), and the one function that
replays them over the run's recorded rounds and writes simulation.json.

    request = SimulateRequest(run_dir=..., policy=["adaptive", "confidence:threshold=0.5"])
    outcome = replay_run(request)   # SpecbenchError (exit 2): a bad policy, an unreadable run

simulation.json (and --json) is a document: schema, kind, `provenance` (the specbench that
replayed, the run replayed — its directory, pair, grid, the sha256 of its records.jsonl and the
specbench that measured it —, the policies asked for, the bootstrap and its seed) and
`simulations` (one entry per workload × temperature × drafter).

Schema history:
  1 — the document with provenance (before: a bare list of the simulations).

The fields are the command's options under the same names, without defaults (the command's
options state them once, and `--help` shows them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.config import POLICY_NAMES, PolicySpec
from specbench.config.stored import StoredConfig
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.analysis.documents.simulation_model import Simulation

SIMULATION_SCHEMA = 1
N_BOOT = 2000  # analysis.simulate.simulation.simulate_run's default


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


def provenance(
    run_dir: Path, config: StoredConfig, env: dict[str, Any], policies: list[str]
) -> dict[str, Any]:
    """What a simulation was computed from, as run and accept record theirs."""
    import hashlib

    import specbench
    from specbench.analysis.stats.resampling import DEFAULT_SEED
    from specbench.records import RECORDS_FILE

    draft = config.draft
    records = run_dir / RECORDS_FILE
    return {
        "specbench": specbench.__version__,
        "run_dir": str(run_dir),
        "run": {
            "name": config.name,
            "target": config.target.model if config.target else None,
            "draft": (draft.model or draft.method) if draft else None,
            "backend": config.backend or "transformers",
            "gammas": config.gammas,
            "sampling": config.sampling.model_dump(exclude_unset=True) if config.sampling else None,
            "seed": config.seed,
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


@dataclass(frozen=True, kw_only=True)
class SimulateRequest:
    """What `specbench simulate` was asked: a run directory and the policies (None: all five)."""

    run_dir: Path
    policy: list[str] | None
    # each --policy parsed (name, options), checked when the request is made
    specs: list[tuple[str, dict[str, Any]]] = field(init=False)

    def __post_init__(self) -> None:
        specs = (
            [parse_policy(p) for p in self.policy]
            if self.policy
            else [(n, {}) for n in POLICY_NAMES]
        )
        object.__setattr__(self, "specs", specs)


@dataclass(frozen=True)
class SimulateOutcome:
    """simulation.json as written (its keys in the order built), its simulations typed, and
    where it was written."""

    document: dict[str, Any]
    simulations: list[Simulation]
    path: Path


def replay_run(request: SimulateRequest) -> SimulateOutcome:
    """The policies replayed over the rounds the run recorded at its largest γ (analysis/simulate/
    replay.py), ranked per workload; simulation.json written into the run directory."""
    from specbench.analysis.simulate.simulation import simulate_run
    from specbench.harness.run.rundir import load_run

    run_dir = request.run_dir
    records, config, env, _notes = load_run(run_dir)
    ngram = frozenset(d.label for d in config.drafters if d.method == "ngram")
    results = simulate_run(
        records, request.specs, N_BOOT, ngram_drafters=ngram or frozenset({"ngram"})
    )
    if not results:
        raise SpecbenchError(f"{run_dir} has no baseline and fixed-γ records to replay")
    document = {
        "schema": SIMULATION_SCHEMA,
        "kind": "simulation",
        "provenance": provenance(run_dir, config, env, request.policy or list(POLICY_NAMES)),
        "simulations": [s.model_dump(mode="json", exclude_unset=True) for s in results],
    }
    path = run_dir / "simulation.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return SimulateOutcome(document, results, path)
