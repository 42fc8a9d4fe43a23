"""The interleaved A/B mode's order and its refusals (no process started here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.harness.compare.ab import BASE, CANDIDATE, abba_order


def test_abba_order_alternates_and_balances_each_side_over_every_two_pairs() -> None:
    for seed in range(6):
        order = abba_order(6, seed)
        assert all(set(o) == {BASE, CANDIDATE} for o in order)
        assert order[1] == order[0][::-1] and order[2] == order[0]  # AB BA AB …
        # over each block of two pairs each side holds first place once: linear drift cancels
        firsts = [o[0] for o in order]
        assert firsts.count(BASE) == firsts.count(CANDIDATE) == 3
    assert {abba_order(2, s)[0] for s in range(20)} == {(BASE, CANDIDATE), (CANDIDATE, BASE)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base-python", "/nonexistent/python"], "no interpreter at /nonexistent/python"),
        (["--pairs", "0"], "--pairs"),
        (["--interleave", "sideways"], "--interleave is unit or process"),
        (["--candidate-config", "/nonexistent.yaml"], "candidate config is not found"),
    ],
)
def test_ab_refuses_bad_input_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})
    res = runner.invoke(
        app, ["compare", "--ab", "configs/tiny.yaml", "--out", str(tmp_path), *args]
    )
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output


def test_a_hand_typed_lockstep_option_gets_one_line() -> None:
    from specbench.errors import SpecbenchError
    from specbench.harness.run.lockstep import parse_fds

    assert parse_fds("7,9") == (7, 9)
    with pytest.raises(SpecbenchError, match="two file descriptors"):
        parse_fds("7")
