"""Base and candidate measured in one job (`specbench compare --ab CONFIG …`), each side under its
own Python interpreter (two environments: a torch / transformers / vLLM upgrade), alternated in
randomized ABBA order over k process pairs so that drift of the machine cancels in the paired
difference, then compared as `BASE… vs NEW…`.

    specbench compare --ab configs/ci-gate.yaml --base-python .venv-main/bin/python \\
        --candidate-python .venv-pr/bin/python --pairs 4 --out reports/ab

Each side of a pair is one process (`PYTHON -m specbench --plain run CONFIG --out DIR/side-j`):
what varies per process (allocator, compilation, autotuning) is sampled k times a side. By default
(`--interleave unit`) the two processes of a pair run side by side and take turns unit by unit,
ABBA (harness/run/lockstep.py): drift within a run cancels in each paired unit too, and neither side
measures while the other does. `--interleave process` runs one process after the other (ABBA over
the pairs) for sides that cannot both be loaded at once. The candidate may run its own config
(`--candidate-config`: another model revision, another endpoint). Each run's records are appended
as produced (`run`'s own guarantee); a failed side stops the job with one line naming its log.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.harness.run.lockstep import run_in_lockstep

BASE, CANDIDATE = "base", "candidate"
UNIT, PROCESS = "unit", "process"
MAX_PAIRS = 1000


def abba_order(pairs: int, seed: int) -> list[tuple[str, str]]:
    """The order of the two sides in each process pair: ABBA blocks (AB then BA, so a linear
    drift cancels over every two pairs), the first block's order drawn at random (seeded)."""
    first = (BASE, CANDIDATE) if random.Random(seed).random() < 0.5 else (CANDIDATE, BASE)
    second = (first[1], first[0])
    return [first if j % 2 == 0 else second for j in range(pairs)]


def _interpreter(path: Path, role: str) -> str:
    if not path.is_file():
        raise SpecbenchError(f"--{role}-python: no interpreter at {path}")
    return str(path)


def _config(path: Path, role: str) -> str:
    if not path.is_file():
        raise SpecbenchError(f"--ab: the {role} config is not found: {path}")
    return str(path)


def run_ab(
    config: Path,
    base_python: Path,
    candidate_python: Path,
    pairs: int,
    out: Path,
    run_args: list[str],
    seed: int = 0,
    candidate_config: Path | None = None,
    interleave: str = UNIT,
) -> tuple[list[Path], list[Path]]:
    """Run both sides, interleaved; (base run directories, candidate run directories).

    `interleave`: UNIT (both processes of a pair alive, taking turns unit by unit in ABBA order:
    harness/run/lockstep.py) or PROCESS (one process after the other, ABBA over the pairs: for sides
    that cannot share a machine's memory at once)."""
    if not 1 <= pairs <= MAX_PAIRS:
        raise SpecbenchError(f"--pairs must be between 1 and {MAX_PAIRS} (got {pairs})")
    if interleave not in (UNIT, PROCESS):
        raise SpecbenchError(f"--interleave is {UNIT} or {PROCESS} (got {interleave!r})")
    configs = {
        BASE: _config(config, "base"),
        CANDIDATE: _config(candidate_config or config, "candidate"),
    }
    python = {
        BASE: _interpreter(base_python, "base"),
        CANDIDATE: _interpreter(candidate_python, "candidate"),
    }
    out.mkdir(parents=True, exist_ok=True)
    done: dict[str, list[Path]] = {BASE: [], CANDIDATE: []}
    log_entries: list[dict[str, object]] = []
    turns: list[dict[str, object]] = []

    def command(side: str, j: int) -> list[str]:
        run_dir = out / f"{side}-{j}"
        done[side].append(run_dir)
        log_entries.append(
            {"pair": j, "side": side, "python": python[side], "config": configs[side],
             "out": str(run_dir)}
        )  # fmt: skip
        cmd = [python[side], "-m", "specbench", "--plain", "run", configs[side]]
        return [*cmd, "--out", str(run_dir), "--force", *run_args]

    for j, sides in enumerate(abba_order(pairs, seed)):
        if interleave == UNIT:
            cmds = {side: command(side, j) for side in (BASE, CANDIDATE)}
            logs = {side: out / f"{side}-{j}.log" for side in (BASE, CANDIDATE)}
            turns += run_in_lockstep(cmds, logs, sides[0], j)
            continue
        for side in sides:
            log = out / f"{side}-{j}.log"
            with log.open("w") as fh:
                cmd = command(side, j)
                code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode
            if code != 0:
                raise SpecbenchError(f"the {side} side's run {j} exited {code}; see {log}")
    doc = {"seed": seed, "interleave": interleave, "order": log_entries, "turns": turns}
    (out / "ab.json").write_text(json.dumps(doc, indent=2))
    return done[BASE], done[CANDIDATE]
