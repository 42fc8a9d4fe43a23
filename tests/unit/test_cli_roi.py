"""`specbench roi` end to end through typer's CliRunner (real code, pinned terminal width)."""

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli.app import app

runner = CliRunner(env={"COLUMNS": "140", "NO_COLOR": "1"})


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["roi", *args])


def test_roi_alpha_only_uses_default_cost_ratio() -> None:
    res = invoke("--alpha", "0.6")
    assert res.exit_code == 0, res.output
    assert "T_d / T_ar = 0.1" in res.output
    assert "c_be: break-even cost ratio T_d/T_ar" in res.output
    assert "speculation pays: γ = 3 gives 1.67×" in res.output


def test_roi_with_timings_table_and_verdict() -> None:
    res = invoke("--alpha", "0.6", "--t-target", "80", "--t-draft", "7")
    assert res.exit_code == 0, res.output
    assert "round, ITL in ms" in res.output
    assert "γ = 3 gives 1.72×, ITL 46.4 ms vs 80.0 ms" in res.output


def test_roi_turn_off_verdict() -> None:
    res = invoke("--alpha", "0.1", "--t-target", "10", "--t-draft", "3")
    assert res.exit_code == 0
    assert "turn speculation off: the best γ = 1 gives 0.85×" in res.output


def test_roi_json_shape() -> None:
    res = invoke("--alpha", "0.6", "--alpha", "0.9", "--t-target", "80", "--t-draft", "7", "--json")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert [s["alpha"] for s in doc["scenarios"]] == [0.6, 0.9]
    s = doc["scenarios"][0]
    assert s["t_target_ms"] == 80 and s["t_draft_ms"] == 7 and s["verify_slope_ms"] == 0
    assert s["accepted"] is None
    assert len(s["rows"]) == 16
    assert set(s["rows"][0]) >= {
        "gamma",
        "expected_tokens",
        "round_ms",
        "itl_ms",
        "speedup",
        "break_even_alpha",
    }
    assert s["best"]["gamma"] == 3 and s["verdict"] == "on"
    assert s["best"]["speedup"] == pytest.approx(80 / (101 / 2.176))


def test_roi_json_cost_ratio_relative_units() -> None:
    res = invoke("--alpha", "0.7", "--cost-ratio", "0.2", "--json", "--gamma", "4")
    doc = json.loads(res.stdout)
    s = doc["scenarios"][0]
    assert doc["units"] == "t_target" and s["t_target_ms"] == 1 and s["t_draft_ms"] == 0.2
    assert [r["gamma"] for r in s["rows"]] == [4]


def test_roi_accepted_solves_alpha() -> None:
    res = invoke(
        "--accepted", "3.5", "--gamma", "6", "--t-target", "80", "--t-draft", "7", "--json"
    )
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)["scenarios"][0]
    assert s["alpha"] is None and s["accepted"] == 3.5
    row6 = next(r for r in s["rows"] if r["gamma"] == 6)
    assert row6["expected_tokens"] == pytest.approx(3.5)
    assert row6["itl_ms"] == pytest.approx(122 / 3.5)


def test_roi_economics_lines() -> None:
    res = invoke(
        "--alpha", "0.8", "--t-target", "80", "--t-draft", "7", "--gpu-hour-usd", "2",
        "--draft-memory-gib", "4", "--gpu-memory-gib", "80",
    )  # fmt: skip
    assert res.exit_code == 0
    assert "cost per 10⁶ output tokens at batch 1: $44.44" in res.output
    assert "the draft takes 5.0 % of GPU memory" in res.output


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_roi_plot_and_csv_written(tmp_path: Path) -> None:
    png, table = tmp_path / "roi.png", tmp_path / "roi.csv"
    res = invoke("--alpha", "0.5", "--alpha", "0.8", "--plot", str(png), "--csv", str(table))
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 32
    assert sum(int(r["optimal"]) for r in rows) == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--alpha", "1.5"], "'--alpha': Input should be less than or equal to 1"),
        (["--alpha", "-0.1"], "'--alpha': Input should be greater than or equal to 0"),
        (["--alpha", "0.5", "--t-target", "0", "--t-draft", "1"], "--t-target must be a time > 0"),
        (["--alpha", "0.5", "--t-target", "10", "--t-draft", "-1"], "--t-draft must be a time > 0"),
        (["--alpha", "0.5", "--gamma-max", "0"], "'--gamma-max': Input should be greater than"),
        (
            ["--alpha", "0.5", "--gamma-max", "1025"],
            "'--gamma-max': Input should be less than or equal to 1024",
        ),
        (["--accepted", "7", "--gamma", "5"], "--accepted must be in [1, 6]"),
        (["--accepted", "0.5", "--gamma", "5"], "--accepted must be in [1, 6]"),
        (["--accepted", "2"], "--accepted needs --gamma"),
        (["--alpha", "0.5", "--t-target", "80"], "--t-target and --t-draft go together"),
        (["--alpha", "0.5", "--accepted", "2", "--gamma", "3"], "either --alpha or --accepted"),
        ([], "give --alpha"),
    ],
)
def test_roi_bad_input_one_line_exit_2(args: list[str], needle: str) -> None:
    res = invoke(*args)
    assert res.exit_code == 2
    assert needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.output
