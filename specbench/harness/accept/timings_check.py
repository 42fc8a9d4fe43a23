"""`accept --timings RUN`: the run's timings are used only when it measured the same pair.

T_d and T_t(γ) are properties of the two models (their sizes, and the tokenizer the target and
the draft share, which the pair fixes): a run of another pair gives another cost ratio, and can
flip the plan (issue 32: T_d 9.61 ms instead of 1.11 ms turned ON into OFF). So the target and
the draft the run's results.json names are compared with accept's, as model directories or hub
ids after resolution (`tiny-target` is the shipped folder); a run of another pair is refused in
one line, or with `--force` used and said in the report. The schema version and fields are
checked by the one results reader (`analysis.documents.results_read`).
"""

from __future__ import annotations

from pathlib import Path

from specbench.analysis.documents.results_read import read_timing_source
from specbench.config import ModelSpec
from specbench.errors import SpecbenchError
from specbench.models.resolve import resolve_model_path


def _canonical(name: str) -> str:
    try:
        resolved = resolve_model_path(name)
    except SpecbenchError:
        return name
    path = Path(resolved).expanduser()
    return str(path.resolve()) if path.exists() else resolved


def pair_differences(path: Path, target: ModelSpec, draft: ModelSpec) -> list[str]:
    """What differs between the pair the results.json at `path` measured and this one."""
    # accept reads only the run's pair and timing fields: the version and the pair are checked
    # here, the timing fields where they are read (`analysis.rollout.timing`)
    typed = read_timing_source(path)
    diffs = []
    for role, here, there in (
        ("target", target.model, typed.run.target),
        ("draft", draft.model, typed.run.draft),
    ):
        if there is None:
            diffs.append(f"the run does not name its {role} (this pair: {here})")
        elif _canonical(here) != _canonical(there):
            diffs.append(f"{role} {there} there, {here} here")
    return diffs


def tokenizer_differences(path: Path, here: dict[str, str | None]) -> list[str]:
    """Which of the target's and draft's tokenizer fingerprints (models/fingerprint.py) differ
    between the run at `path` and this pair; a side that recorded none is not compared (runs
    written before fingerprints were)."""
    typed = read_timing_source(path)
    there = typed.env.tokenizers or {}
    return [
        f"{role} tokenizer {_short(there[role])} there, {_short(here[role])} here"
        for role in ("target", "draft")
        if there.get(role) and here.get(role) and there[role] != here[role]
    ]


def _short(fingerprint: str | None) -> str:
    return (fingerprint or "none")[:19]  # "sha256:" + 12 hex digits


def check_timings_tokenizers(timings: Path, here: dict[str, str | None], force: bool) -> str | None:
    """As `check_timings_pair`, for the tokenizers: per-token timings of another vocabulary are
    not this pair's (a token is another amount of text)."""
    path = timings / "results.json" if timings.is_dir() else timings
    diffs = tokenizer_differences(path, here)
    if not diffs:
        return None
    what = "; ".join(diffs)
    if not force:
        raise SpecbenchError(
            f"--timings: {path} measured with another tokenizer ({what}); its per-token "
            "timings are not this pair's — give a run of this pair, or --force to use them anyway"
        )
    return f"timings measured with another tokenizer used (--force): {path} ({what})"


def check_timings_pair(
    timings: Path, target: ModelSpec, draft: ModelSpec, force: bool
) -> str | None:
    """None when the run measured this pair; with `force`, the note the report carries; else
    a SpecbenchError saying what differs."""
    path = timings / "results.json" if timings.is_dir() else timings
    diffs = pair_differences(path, target, draft)
    if not diffs:
        return None
    what = "; ".join(diffs)
    if not force:
        raise SpecbenchError(
            f"--timings: {path} measured another pair ({what}); its T_ar, T_d and T_t(γ) are "
            "not this pair's — give a run of this pair, or --force to use them anyway"
        )
    return f"timings of another pair used (--force): {path} ({what}); the plan rests on them"
