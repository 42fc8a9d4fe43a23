"""Base and candidate measured in one job (`specbench compare --ab CONFIG …`), each side under its
own Python interpreter (two environments: a torch / transformers / vLLM upgrade), alternated in
randomized ABBA order over k process pairs so that drift of the machine cancels in the paired
difference, then compared as `BASE… vs NEW…`.

    specbench compare --ab configs/ci-gate.yaml --base-python .venv-main/bin/python \\
        --candidate-python .venv-pr/bin/python --pairs 4 --out reports/ab

Each side of a pair is one process (`PYTHON -m specbench --plain run CONFIG --out DIR/side-j`):
what varies per process (allocator, compilation, autotuning) is sampled k times a side. The order
is interleaved by process, not unit by unit inside a process (docs/ci.md says so): drift slower
than a run cancels, drift within one run does not. Each run's records are appended as produced
(`run`'s own guarantee); a failed side stops the job with one line naming its log.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

from specbench.errors import SpecbenchError

BASE, CANDIDATE = "base", "candidate"
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


def run_ab(
    config: Path,
    base_python: Path,
    candidate_python: Path,
    pairs: int,
    out: Path,
    run_args: list[str],
    seed: int = 0,
) -> tuple[list[Path], list[Path]]:
    """Run both sides, interleaved; (base run directories, candidate run directories)."""
    if not 1 <= pairs <= MAX_PAIRS:
        raise SpecbenchError(f"--pairs must be between 1 and {MAX_PAIRS} (got {pairs})")
    if not config.is_file():
        raise SpecbenchError(f"--ab: config not found: {config}")
    python = {
        BASE: _interpreter(base_python, "base"),
        CANDIDATE: _interpreter(candidate_python, "candidate"),
    }
    out.mkdir(parents=True, exist_ok=True)
    order = abba_order(pairs, seed)
    done: dict[str, list[Path]] = {BASE: [], CANDIDATE: []}
    log_entries = []
    for j, sides in enumerate(order):
        for side in sides:
            run_dir = out / f"{side}-{j}"
            log = out / f"{side}-{j}.log"
            cmd = [python[side], "-m", "specbench", "--plain", "run", str(config)]
            cmd += ["--out", str(run_dir), "--force", *run_args]
            with log.open("w") as fh:
                code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode
            if code != 0:
                raise SpecbenchError(f"the {side} side's run {j} exited {code}; see {log}")
            done[side].append(run_dir)
            log_entries.append(
                {"pair": j, "side": side, "python": python[side], "out": str(run_dir)}
            )
    (out / "ab.json").write_text(json.dumps({"seed": seed, "order": log_entries}, indent=2))
    return done[BASE], done[CANDIDATE]
