"""The gate's verdict on hand-built comparisons: exit-code precedence (1 > 5 > 0),
--allow-inconclusive, gating vs reported rows, JUnit's skipped inconclusive rows, and every
printed MDE and change bounded to its quantity's range."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from specbench.analysis.compare.metrics import (
    INCONCLUSIVE,
    NOT_COMPARABLE,
    REGRESSED,
    UNCHANGED,
    Thresholds,
)
from specbench.analysis.compare.rows import Row
from specbench.analysis.compare.verdict import Comparison
from specbench.report.compare.compare import fmt_change, fmt_mde, headline, to_dict, to_markdown
from specbench.report.compare.compare_junit import to_junit


def _row(metric: str, status: str, gating: bool = True, **kw: object) -> Row:
    return Row("w", 1.0, metric, metric, "speedup", status, 1.0, 1.0, gating=gating, **kw)  # type: ignore[arg-type]


def _cmp(*rows: Row, allow: bool = False, strict: bool = False, failures: int = 0) -> Comparison:
    return Comparison(
        "a",
        "b",
        "per-prompt records",
        Thresholds(),
        list(rows),
        failures=["missing in new: x"] * failures,
        strict=strict,
        allow_inconclusive=allow,
    )


def test_exit_code_precedence_regression_over_inconclusive_over_pass() -> None:
    ok = _row("alpha", UNCHANGED)
    unsure = _row("speedup_recommended", INCONCLUSIVE)
    bad = _row("verdict", REGRESSED)
    assert _cmp(ok).exit_code == 0
    assert _cmp(ok, unsure).exit_code == 5
    assert _cmp(ok, unsure, allow=True).exit_code == 0
    assert _cmp(ok, unsure, bad).exit_code == 1
    assert _cmp(ok, unsure, allow=True, strict=True, failures=1).exit_code == 1
    # a non-gating row that regressed is reported, never gated
    assert _cmp(ok, _row("speedup@4", REGRESSED, gating=False)).exit_code == 0
    # a gating row missing on one side could not see anything; no gating row at all neither
    assert _cmp(ok, _row("speedup_recommended", NOT_COMPARABLE)).exit_code == 5
    assert _cmp(_row("speedup@4", UNCHANGED, gating=False)).exit_code == 5
    assert "no gating row was measured" in headline(_cmp(_row("tau", UNCHANGED, gating=False)))


def test_headline_markdown_and_json_say_inconclusive() -> None:
    c = _cmp(_row("alpha", UNCHANGED), _row("speedup_recommended", INCONCLUSIVE))
    assert headline(c).startswith("inconclusive: 1 of 2 gating rows cannot detect")
    md = to_markdown(c)
    assert md.startswith("## ⚠️ specbench compare: inconclusive") and "✅" not in md
    allowed = to_markdown(replace(c, allow_inconclusive=True))
    assert "✅" not in allowed and "(--allow-inconclusive: passes)" in allowed
    doc = to_dict(c)
    assert (doc["verdict"], doc["exit_code"], doc["inconclusive"]) == ("inconclusive", 5, 1)


def test_junit_skips_inconclusive_rows_and_fails_only_gating_regressions() -> None:
    c = _cmp(
        _row("alpha", REGRESSED),
        _row("speedup_recommended", INCONCLUSIVE),
        _row("speedup@4", REGRESSED, gating=False),
    )
    root = ET.fromstring(to_junit(c))
    cases = {tc.get("name"): tc for tc in root.iter("testcase")}
    assert cases["alpha"].find("failure") is not None
    assert cases["speedup_recommended"].find("skipped") is not None
    assert cases["speedup@4"].find("failure") is None  # reported, not gated
    assert root.get("failures") == "1"


@pytest.mark.parametrize(
    ("metric", "mde", "shown"),
    [
        ("alpha", 11.25, "unbounded"),  # α lives in [0, 1]: an MDE of 11 says nothing
        ("alpha", 0.031, "±0.031"),
        ("speedup@4", 0.9999, "unbounded"),  # a drop of ~100 % of a ratio
        ("speedup@4", 0.25, "−25.0 %"),
        ("itl_ms@4", 6.9e34, "unbounded"),  # a latency rise above 1000 %
        ("itl_ms@4", 0.5, "+50.0 %"),
    ],
)
def test_every_printed_mde_is_bounded_to_its_quantity(metric: str, mde: float, shown: str) -> None:
    assert fmt_mde(_row(metric, UNCHANGED, mde=mde)) == shown


def test_printed_changes_are_bounded() -> None:
    big = _row("speedup@4", UNCHANGED, change=1e30, relative_change=1e30)
    assert fmt_change(big) == "> +1000 %"
    assert fmt_change(_row("speedup@4", UNCHANGED, change=-0.5, relative_change=-0.5)) == "-50.0 %"


@pytest.mark.slow  # several results builds of 40 prompts: seconds
def test_t0_is_compared_exactly_only_where_determinism_is_shown() -> None:
    """Greedy acceptance compared exactly needs proof that greedy decoding is deterministic here:
    a repeated prompt giving the same tokens, or the runner's calibration; otherwise tested."""
    from specbench.analysis.compare.sides import repeat_determinism
    from specbench.analysis.compare.verdict import compare

    from .test_compare import make_records, side

    def at_t0(recs: list[dict[str, object]], repeats: int = 1) -> list[dict[str, object]]:
        out = []
        for rep in range(repeats):
            out += [{**r, "temperature": 0.0, "repeat": rep} for r in recs]
        return out

    spec = [r for r in at_t0(make_records(seed=1, n_prompts=4), 2) if r["kind"] == "spec"]
    assert repeat_determinism(spec) is True
    assert repeat_determinism(spec[:4]) is None  # no prompt repeated: not shown
    changed = [dict(r) for r in spec]
    changed[-1]["new_tokens"] = int(changed[-1]["new_tokens"]) + 1  # type: ignore[call-overload]
    assert repeat_determinism(changed) is False

    base, new = at_t0(make_records(seed=1)), at_t0(make_records(seed=2))
    once = compare(side(base, "a"), side(new, "b"), Thresholds())
    alpha = next(r for r in once.rows if r.metric == "alpha")
    assert "determinism not shown" in alpha.method and alpha.p_value is not None
    cal = Thresholds(calibration=_calibration(deterministic=True))
    shown = compare(side(base, "a"), side(new, "b"), cal)
    assert next(r for r in shown.rows if r.metric == "alpha").method.startswith("exact")
    twice = compare(
        side(at_t0(make_records(seed=1), 2), "a"),
        side(at_t0(make_records(seed=2), 2), "b"),
        Thresholds(),
    )
    assert next(r for r in twice.rows if r.metric == "alpha").method.startswith("exact")


def _calibration(deterministic: bool) -> object:
    from specbench.analysis.compare.metrics import Calibration

    return Calibration(
        runs=3, confidence=0.95, prompts=8, groups=1, sampled_groups=0, speedup_cv_estimate=0.0,
        speedup_prompt_sd=0.1, greedy_deterministic=deterministic, target_forwards_per_prompt=1.0,
        seconds_per_prompt=1.0,
    )  # fmt: skip
