"""The word "goodput" has one meaning: SLO goodput (requests, and their output tokens, per second that met
every SLO set, as vLLM's benchmark_serving `--goodput` counts them). Closed-loop output tokens/s
is "throughput". Every occurrence of "goodput" in the package, docs/*.md and README.md must sit
within a few words of "SLO" or be one of SLO goodput's own identifiers listed below."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 8  # words either side of "goodput" in which "SLO" must appear

# SLO goodput's identifiers, wherever they appear (no other meaning is possible)
SLO_IDENTIFIERS = {
    "slo_goodput",  # profile.objective
    "--goodput",  # vLLM benchmark_serving's flag
    "goodput_requests_per_s",  # load_summary.csv columns
    "goodput_requests_per_s_lo",
    "goodput_requests_per_s_hi",
    "goodput_share",
}
# SLO goodput's identifiers whose name alone could be either meaning: allowed in these files only
SLO_FILES = {
    "specbench/analysis/stats/latency_tails.py": {"goodput"},  # the SLO goodput function
    "specbench/analysis/serving/load_cells.py": {"goodput", "Goodput"},  # a cell's SLO goodput
    "specbench/analysis/documents/results_model_load.py": {"goodput", "Goodput"},
    "specbench/report/sections/load_sections.py": {"goodput"},
    "specbench/report/run/load_csv.py": {"goodput", "goodput_tokens_per_s"},
}
# the schema-2 names that results.json readers still map (the history of the rename)
HISTORY = {"specbench/analysis/documents/results_history.py"}

TOKEN = re.compile(r"-{0,2}[\w]+")
SLO = re.compile(r"(?:^-*|_)slos?(?:$|_)", re.I)  # SLO, SLOs, slo_goodput, `-slo-` in an anchor


def scanned() -> list[Path]:
    return [
        *sorted((ROOT / "specbench").rglob("*.py")),
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "README.md",
    ]


def violations(text: str, rel: str = "") -> list[str]:
    """Each "goodput" of `text` that is neither near "SLO" nor an allowed identifier, as
    "line N: the words around it"."""
    if rel in HISTORY:
        return []
    allowed = SLO_IDENTIFIERS | SLO_FILES.get(rel, set())
    tokens = list(TOKEN.finditer(text))
    out = []
    for i, tok in enumerate(tokens):
        word = tok.group()
        if "goodput" not in word.lower() or word in allowed:
            continue
        around = tokens[max(0, i - WINDOW) : i + WINDOW + 1]
        if any(SLO.search(t.group()) for t in around):
            continue
        line = text.count("\n", 0, tok.start()) + 1
        out.append(f"line {line}: " + " ".join(t.group() for t in around))
    return out


def test_goodput_means_slo_goodput_only() -> None:
    found = []
    for path in scanned():
        rel = path.relative_to(ROOT).as_posix()
        found += [f"{rel} {v}" for v in violations(path.read_text(encoding="utf-8"), rel)]
    assert not found, "goodput means SLO goodput; say throughput for tokens/s:\n" + "\n".join(found)


def test_the_check_catches_the_other_meaning() -> None:
    """The uses the rename removed are caught; SLO goodput in prose and its identifiers pass."""
    caught = [
        'ax.set_ylabel("goodput (output tokens/s)")',
        "Goodput is output tokens/s of the closed loop: at concurrency c the goodput ratio of γ",
        '"goodput_tok_s": {},',
        "the load cell's goodput",  # the bare name outside the SLO goodput files
    ]
    for text in caught:
        assert violations(text), text
    assert len(violations(caught[1])) == 2
    passed = [
        "the requests per second that met every SLO set: **SLO goodput**",
        "| SLO goodput tok/s |",
        "objective: slo_goodput",
        "as vLLM's benchmark_serving `--goodput` counts them",
        'row["goodput_share"] = gp.share.value',
        "the slower engine's goodput",  # "slower" is not "SLO"
    ]
    assert [t for t in passed[:-1] if violations(t)] == []
    assert violations(passed[-1])
    assert violations("gp = c.goodput", "specbench/report/sections/load_sections.py") == []
    assert violations("gp = c.goodput", "specbench/report/sections/schedule_sections.py")
