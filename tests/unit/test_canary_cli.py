"""`specbench canary` end to end on request logs through typer's CliRunner: the exit codes, the
guard named on a planted regression, --once resuming from the state file, the report files and
bad input (docs/canary.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli.app import app
from tests.unit.canary_logs import write_logs

runner = CliRunner(env={"COLUMNS": "140", "NO_COLOR": "1"})

CONFIG = """name: test
traffic: {canary_share: 0.05, control_share: 0.05}
guards:
  tpot: {slo_ms: 50}
  e2e: {slo_ms: 20000}
  acceptance: {buckets: [chat, code]}
sources:
  logs: {canary: c.jsonl, control: k.jsonl, fields: {bucket: bucket}}
state: state.jsonl
"""


def setup(tmp_path: Path, windows: int = 60, **canary: object) -> Path:
    write_logs(tmp_path / "c.jsonl", 11, windows, canary=True, **canary)  # type: ignore[arg-type]
    write_logs(tmp_path / "k.jsonl", 12, windows, canary=False)
    cfg = tmp_path / "canary.yaml"
    cfg.write_text(CONFIG, encoding="utf-8")
    return cfg


def once(cfg: Path, *extra: str) -> tuple[int, dict[str, object]]:
    r = runner.invoke(app, ["canary", str(cfg), "--once", "--json", *extra])
    assert r.exit_code in (0, 10, 11), r.output
    return r.exit_code, json.loads(r.stdout)


@pytest.mark.slow  # seconds: a few thousand logged requests and a look
def test_a_slower_canary_rolls_back_naming_tpot(tmp_path: Path) -> None:
    code, doc = once(setup(tmp_path, tpot_factor=1.3))
    assert code == 11
    assert doc["decision"] == "rollback" and "tpot" in doc["crossed"]  # type: ignore[operator]


@pytest.mark.slow  # seconds: a few thousand logged requests and a look
def test_an_acceptance_drop_in_one_bucket_rolls_back_that_bucket(tmp_path: Path) -> None:
    code, doc = once(setup(tmp_path, windows=90, acceptance={"chat": 0.7, "code": 0.2}))
    assert code == 11
    assert doc["crossed"] == ["acceptance[code]"]


@pytest.mark.slow  # seconds: a few thousand logged requests and a look
def test_an_aa_canary_promotes_or_keeps_watching(tmp_path: Path) -> None:
    code, doc = once(setup(tmp_path))
    assert code in (0, 10)
    assert doc["crossed"] == []
    if code == 10:
        assert doc["more_windows"] is None or doc["more_windows"] >= 1


@pytest.mark.slow  # seconds: a few thousand logged requests and a look
def test_once_resumes_from_the_state_file(tmp_path: Path) -> None:
    cfg = setup(tmp_path, windows=40)
    full = (tmp_path / "c.jsonl").read_text().splitlines()
    control = (tmp_path / "k.jsonl").read_text().splitlines()
    # first look: only the first half of both logs has been written
    cut = 1_700_000_040.0 + 20 * 60.0
    (tmp_path / "c.jsonl").write_text(
        "\n".join(r for r in full if json.loads(r)["timestamp"] < cut) + "\n"
    )
    (tmp_path / "k.jsonl").write_text(
        "\n".join(r for r in control if json.loads(r)["timestamp"] < cut) + "\n"
    )
    _, first = once(cfg)
    saved = (tmp_path / "state.jsonl").read_text().splitlines()
    assert first["windows"] == len(saved) == 19  # window 20 has not closed in both logs yet
    # the logs grow; a restarted canary reads only the windows after the last one saved
    (tmp_path / "c.jsonl").write_text("\n".join(full) + "\n")
    (tmp_path / "k.jsonl").write_text("\n".join(control) + "\n")
    _, second = once(cfg)
    lines = (tmp_path / "state.jsonl").read_text().splitlines()
    assert lines[:19] == saved  # never rewritten
    seqs = [json.loads(x)["seq"] for x in lines]
    assert seqs == sorted(set(seqs)) and second["windows"] == len(lines) == 40
    # and decides exactly as one look over the whole log would
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    for f in ("c.jsonl", "k.jsonl", "canary.yaml"):
        (fresh / f).write_text((tmp_path / f).read_text())
    _, whole = once(fresh / "canary.yaml")
    assert whole["guards"] == second["guards"]


@pytest.mark.slow  # seconds: a few thousand logged requests and a look
def test_report_files_and_exported_rules(tmp_path: Path) -> None:
    cfg = setup(tmp_path, windows=20)
    r = runner.invoke(
        app,
        [
            "canary",
            str(cfg),
            "--once",
            "--report",
            str(tmp_path / "rep"),
            "--export-rules",
            str(tmp_path / "rules.yaml"),
        ],
    )
    assert r.exit_code in (0, 10), r.output
    md = (tmp_path / "rep" / "canary.md").read_text()
    assert "always-valid interval" in md and "acceptance[code]" in md
    assert json.loads((tmp_path / "rep" / "canary.json").read_text())["kind"] == "canary"
    assert (tmp_path / "rep" / "canary-curves.png").stat().st_size > 1000
    rules = (tmp_path / "rules.yaml").read_text()
    assert "SpeculativeAcceptanceBelowFloor" in rules and "< 0.4" in rules


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("alpha: 2\nsources: {logs: {canary: a, control: b}}\n", "alpha"),
        ("sources: {}\n", "sources"),
        ("sources: {logs: {canary: a.jsonl, control: b.jsonl}}\n", "not found"),
        ("window_s: 0\nsources: {logs: {canary: a, control: b}}\n", "window_s"),
        ("state: a-dir\nsources: {logs: {canary: a, control: b}}\n", "directory"),
        (
            "sources: {logs: {canary: a, control: b}, metrics: {canary: [x], control: [y]}}\n",
            "one source",
        ),
        (
            "sources: {prometheus: {url: 'http://127.0.0.1:9', canary: 'a=\"1\"', control: 'a=\"2\"'}}\n",
            "start",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "a-dir").mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["canary", str(cfg), "--once"])
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert err.startswith("error:") and "\n" not in err and needle in err


@pytest.mark.slow
def test_watch_looks_until_settled_or_max_looks(tmp_path: Path) -> None:
    cfg = setup(tmp_path, windows=30)
    r = runner.invoke(app, ["canary", str(cfg), "--watch", "--interval", "1", "--max-looks", "2"])
    assert r.exit_code in (0, 10), r.output
    looks = r.stdout.count("always-valid")  # the table header, once per look
    assert looks == (1 if r.exit_code == 0 else 2)
    seqs = [json.loads(x)["seq"] for x in (tmp_path / "state.jsonl").read_text().splitlines()]
    assert len(seqs) == len(set(seqs)) == 30  # the second look added nothing: no new window
    assert runner.invoke(app, ["canary", str(cfg), "--once", "--watch"]).exit_code == 2


def test_unreachable_prometheus_and_a_directory_for_the_rules_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "start: 2020-01-01T00:00:00Z\nsources: {prometheus: {url: 'http://127.0.0.1:9', "
        "canary: 'job=\"c\"', control: 'job=\"k\"', timeout_s: 2}}\nstate: s.jsonl\n",
        encoding="utf-8",
    )
    r = runner.invoke(app, ["canary", str(cfg), "--once"])
    assert r.exit_code == 2 and "cannot reach Prometheus" in r.stderr, r.output
    assert not (tmp_path / "s.jsonl").exists()  # nothing half-written
    r = runner.invoke(app, ["canary", str(cfg), "--export-rules", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.stderr, r.output
