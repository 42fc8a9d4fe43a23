"""The comparison's verdict: the gating rows' p-values Holm-adjusted over the gating rows
(family-wise; the other rows are reported at their own level, never gated), each row judged on
significance AND the minimum effect, its power, "inconclusive" for a gating row that could not
have seen its minimum effect, and the exit code (0 pass, 1 regression, 5 inconclusive).
`compare` is the entry point (`specbench compare`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from specbench.analysis.compare.difference_tests import DiffTest
from specbench.analysis.compare.environment import (
    Difference,
    env_differences,
    matched_settings,
)
from specbench.analysis.compare.metrics import (
    CODE,
    ENV,
    IMPROVED,
    INCONCLUSIVE,
    INFORMATIONAL,
    NOT_COMPARABLE,
    NOT_SIGNIFICANT,
    REGRESSED,
    STATUSES,
    UNCHANGED,
    Metric,
    Thresholds,
)
from specbench.analysis.compare.prompt_sets import paired
from specbench.analysis.compare.rows import PendingRow, Row, RowContext, group_rows, verdict_row
from specbench.analysis.compare.samples import setting_name
from specbench.analysis.compare.sides import Group, Side
from specbench.analysis.stats.multiple_testing import holm, min_detectable_effect

FEW_PROMPTS = 10
EXIT_PASS, EXIT_REGRESSION, EXIT_INCONCLUSIVE = 0, 1, 5  # cli/exit_codes.py names them too


def judge(
    metric: Metric, base_value: float, test: DiffTest, th: Thresholds, p: float | None = None
) -> tuple[str, float | None]:
    """(status, relative change) from the change, its (adjusted) p-value and the thresholds.

    A tested row regressed (or improved) when its p-value is below `significance`, whatever the
    size of the change: the minimum effect is what the gate is *sized* to see at 80 % power
    (`power_advice`; a gating row that cannot see it is inconclusive), not a second hurdle on the
    point estimate — a second hurdle at the minimum effect would catch a change of exactly that
    size only about half the time, whatever the plan (measured: a planted 10 % slowdown against
    a 10 % minimum effect, caught 0.525 at the plan's size; docs/ci.md). Not significant: within
    the minimum effect it is "unchanged", beyond it "not significant". An exact comparison
    (T = 0, determinism shown: method "exact …") is certain, so the minimum effect is its only
    criterion: a deterministic difference smaller than that is "unchanged"."""
    p = test.p_value if p is None else p
    rel = test.change / base_value if base_value else None
    effect = abs(rel) if metric.relative and rel is not None else abs(test.change)
    if metric.relative and rel is None:
        effect = math.inf if test.change else 0.0
    minimum = float(getattr(th, metric.threshold))
    worse = test.change < 0 if metric.higher_is_better else test.change > 0
    changed = (REGRESSED if worse else IMPROVED), rel
    if test.method.startswith("exact"):
        return changed if effect > minimum else (UNCHANGED, rel)
    if p is not None and p < th.significance and effect > 0:
        return changed
    return (UNCHANGED if not effect > minimum else NOT_SIGNIFICANT), rel


def _effect_scale(metric: Metric, th: Thresholds) -> float:
    """The minimum effect on the test scale (log for relative metrics)."""
    m = float(getattr(th, metric.threshold))
    if not metric.relative:
        return m
    return -math.log1p(-min(m, 0.99)) if metric.higher_is_better else math.log1p(m)


def harmful_mde(metric: Metric, mde: float) -> float:
    """The minimum detectable effect on the test scale (log for relative metrics) as a change in
    the harmful direction, in the row's units: a relative drop in [0, 1) for higher-is-better
    ratios, a relative rise (unbounded) for latency, an absolute change for α."""
    if not metric.relative:
        return mde
    return -math.expm1(-mde) if metric.higher_is_better else math.expm1(mde)


ENOUGH = "enough for the minimum effect"


def power_advice(
    metric: Metric, test: DiffTest, th: Thresholds, level: float, n_prompts: int, k_runs: int
) -> tuple[float | None, str]:
    """(minimum detectable effect at `th.power` in the harmful direction, in the row's units —
    relative for relative metrics — and what the row's minimum effect needs: prompts or runs per
    side; "enough for the minimum effect" when the row can see it).

    Model: se² = se²_p·n/n′ + se²_r·k/k′ (prompt part shrinks with prompts, run part with runs).
    """
    if test.se is None:
        return None, ""
    z = min_detectable_effect(1.0, level, th.power, test.df)
    mde = z * test.se
    mde_out = harmful_mde(metric, mde)
    c = (_effect_scale(metric, th) / z) ** 2  # the largest se that still detects the minimum
    se_p2, se_r2 = (test.se_prompts or 0.0) ** 2, (test.se_runs or 0.0) ** 2
    if c <= 0:  # no minimum effect set: nothing to size for
        return mde_out, ENOUGH
    if test.se**2 <= c:
        return mde_out, ENOUGH
    if se_p2 == 0:  # runs only (Welch over runs)
        return mde_out, f"≈{math.ceil(k_runs * test.se**2 / c)} runs per side"
    if se_r2 < c / 2:
        return mde_out, f"≈{math.ceil(n_prompts * se_p2 / (c - se_r2))} prompts"
    if se_p2 < c / 2:
        return mde_out, f"≈{math.ceil(k_runs * se_r2 / (c - se_p2))} runs per side"
    n2 = math.ceil(n_prompts * se_p2 / (c / 2))
    k2 = math.ceil(k_runs * se_r2 / (c / 2))
    return mde_out, f"≈{n2} prompts + ≈{k2} runs/side"


@dataclass
class Comparison:
    base_label: str
    new_label: str
    mode: str  # "per-prompt records" | "stored CIs (normal approximation)"
    thresholds: Thresholds
    rows: list[Row]
    env_differences: list[Difference] = field(default_factory=list)
    forced_differences: list[Difference] = field(default_factory=list)
    only_in_base: list[tuple[str, float]] = field(default_factory=list)
    only_in_new: list[tuple[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # failed records, settings missing in new
    strict: bool = False
    subject: str = CODE
    runs: tuple[int, int] = (1, 1)
    tested: int = 0  # the size of the Holm family (the tested gating rows)
    allow_inconclusive: bool = False

    @property
    def regressions(self) -> list[Row]:
        """The gating rows that regressed (a non-gating row is reported, never gated)."""
        return [r for r in self.rows if r.status == REGRESSED and r.gating]

    @property
    def inconclusive(self) -> list[Row]:
        """The gating rows that could not have seen their minimum effect (a gating row missing
        on one side could not see anything)."""
        return [
            r
            for r in self.rows
            if r.status == INCONCLUSIVE or (r.gating and r.status == NOT_COMPARABLE)
        ]

    @property
    def gating_rows(self) -> list[Row]:
        return [r for r in self.rows if r.gating]

    @property
    def is_inconclusive(self) -> bool:
        """No regression was found, but the gate could not have found one: a gating row is
        underpowered or untested, or no gating row was measured at all."""
        return bool(self.inconclusive) or not self.gating_rows

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.rows) for s in STATUSES}

    @property
    def exit_code(self) -> int:
        """1 a regression (or, under strict, a failed or missing row) > 5 inconclusive (unless
        allowed) > 0 pass; 2 (bad input) and 3 (internal error) are raised before."""
        if self.regressions or (self.strict and self.failures):
            return EXIT_REGRESSION
        if self.is_inconclusive and not self.allow_inconclusive:
            return EXIT_INCONCLUSIVE
        return EXIT_PASS


def _settings(g: Group) -> set[str]:
    """The speculative settings a group measured, as named in runs ("model γ=2", "ngram γ=4")."""
    keys = set(g.samples or {}) | set(g.summaries)
    return {setting_name(k) for k in keys if k.startswith("speedup[")}


def _missing(base: Side, new: Side) -> list[str]:
    """Failed records on either side, and what the base measured that the new run did not."""
    out = [f"failed in base: {f}" for f in base.failed]
    out += [f"failed in new: {f}" for f in new.failed]
    for key, b in base.groups.items():
        n = new.groups.get(key)
        if n is None:
            out.append(f"missing in new: {key[0]} T={key[1]:g} (measured in base)")
            continue
        lost = sorted(_settings(b) - _settings(n))
        if lost:
            out.append(f"missing in new: {key[0]} T={key[1]:g} settings {', '.join(lost)}")
    return out


def compare(
    base: Side,
    new: Side,
    th: Thresholds,
    forced: list[Difference] | None = None,
    gate_unstable_timing: bool = False,
    strict: bool = False,
    subject: str = CODE,
    allow_inconclusive: bool = False,
) -> Comparison:
    """Compare every workload × temperature both sides measured; Holm over the tested gating
    rows.

    `gate_unstable_timing` is kept for old callers: a run's "unstable timing" flag no longer
    blocks rows (the run-to-run term is in the test), it is listed in the notes."""
    del gate_unstable_timing
    env_diff = env_differences(base, new)
    both_records = base.has_records and new.has_records
    mode = "per-prompt records" if both_records else "stored CIs (normal approximation)"
    notes: list[str] = []
    if not both_records:
        notes.append(
            "only results.json on at least one side: p-values use the stored confidence intervals "
            "under a normal approximation (no per-prompt values); pass run directories for the "
            "bootstrap test"
        )
    if matched := matched_settings(base, new):
        notes.append(matched)
    if env_diff:
        what = ", ".join(f"{d.field}: {d.base} vs {d.new}" for d in env_diff)
        notes.append(
            f"environment differs ({what}): acceptance and speedup (within-run ratios) are still "
            + (
                "gated, and so is absolute timing (--subject env)"
                if subject == ENV
                else "gated; absolute timing is informational unless --subject env"
            )
        )
    ctx = RowContext(
        th,
        min(base.ci_level, new.ci_level),
        both_records,
        subject,
        env_diff,
        base.n_runs,
        new.n_runs,
    )
    pending: list[PendingRow] = []
    groups: list[tuple[Group, Group, int, int]] = []
    few, unstable, bases = [], [], []
    for key in [k for k in base.groups if k in new.groups]:
        # one prompt set per cell: the verdicts' non-degenerate prompts, the same on both sides
        b, n, basis = paired(base.groups[key], new.groups[key])
        start = len(pending)
        pending += [_noted(p, basis) for p in group_rows(b, n, ctx)]
        if basis:
            bases.append(f"{key[0]} T={key[1]:g} {basis}")
        rec_i = len(pending) - 1 if pending[-1].row.metric == "speedup_recommended" else -1
        groups.append((b, n, start, rec_i))
        if b.timing_warnings or n.timing_warnings:
            unstable.append(f"{key[0]} T={key[1]:g}")
        if min(b.n_prompts, n.n_prompts) < FEW_PROMPTS:
            few.append(f"{key[0]} T={key[1]:g}")
    rows = _adjust(pending, th)
    out: list[Row] = []
    for i, (b, n, start, rec_i) in enumerate(groups):
        end = groups[i + 1][2] if i + 1 < len(groups) else len(rows)
        out += rows[start:end]
        if rec_i >= 0:
            out.append(verdict_row(b, n, rows[rec_i], th))
    if bases:
        notes.append(
            "degenerate prompts set aside as each run's verdict sets them aside, on both sides "
            f"alike (docs/theory.md §13): {'; '.join(bases)}"
        )
    if unstable:
        notes.append(
            f"a run flagged unstable timing in {', '.join(unstable)}: speedup is still gated with "
            "the run-to-run term; rerun on a quiet machine or raise repeats for a sharper test"
        )
    if few and both_records:
        notes.append(
            f"few prompts (< {FEW_PROMPTS}) in {', '.join(few)}: the power is low at this size; "
            "see each row's minimum detectable effect"
        )
    return Comparison(
        base.label,
        new.label,
        mode,
        th,
        out,
        env_diff,
        list(forced or []),
        [k for k in base.groups if k not in new.groups],
        [k for k in new.groups if k not in base.groups],
        notes,
        _missing(base, new),
        strict,
        subject,
        (base.n_runs, new.n_runs),
        sum(_in_family(p) for p in pending),
        allow_inconclusive,
    )


def _noted(p: PendingRow, note: str) -> PendingRow:
    """The row with `note` added to its own."""
    if not note:
        return p
    return replace(p, row=replace(p.row, note="; ".join(x for x in (p.row.note, note) if x)))


def _in_family(p: PendingRow) -> bool:
    """A tested gating row: one of Holm's family."""
    return p.row.gating and p.test is not None and p.test.p_value is not None


def _detects(p: PendingRow, th: Thresholds, needs: str) -> bool:
    """Whether a judged gating row could have seen its minimum effect: an exact comparison
    always, a test when its MDE is within the minimum effect, an untested row never."""
    assert p.test is not None
    if p.test.method.startswith("exact"):
        return True
    return p.test.p_value is not None and needs == ENOUGH


def _adjust(pending: list[PendingRow], th: Thresholds) -> list[Row]:
    """Holm over the tested gating rows (the other rows keep their own p-value: reported, not
    gated), then each row judged on its p-value, with its power; a gating row that cannot see
    its minimum effect, and did not regress or improve, is inconclusive."""
    tested = [i for i, p in enumerate(pending) if _in_family(p)]
    raw = [float(pending[i].test.p_value) for i in tested]  # type: ignore[union-attr,arg-type]
    adjusted = dict(zip(tested, holm(raw), strict=True))
    level = th.significance / max(1, len(tested))  # Holm's first (strictest) step
    out = []
    for i, p in enumerate(pending):
        if p.test is None or p.metric is None:
            row = p.row
            if row.gating and row.status == INFORMATIONAL:  # a gating row nobody could test
                row = replace(row, status=INCONCLUSIVE)
            out.append(row)
            continue
        adj = adjusted.get(i, p.test.p_value)
        base_v = float(p.row.base) if isinstance(p.row.base, float | int) else 0.0
        status, rel = judge(p.metric, base_v, p.test, th, adj)
        row_level = level if p.row.gating else th.significance
        mde, needs = power_advice(p.metric, p.test, th, row_level, p.n_prompts, p.k_runs)
        if p.row.gating and status in (UNCHANGED, NOT_SIGNIFICANT) and not _detects(p, th, needs):
            status = INCONCLUSIVE
        out.append(
            replace(p.row, status=status, relative_change=rel, p_value=adj, mde=mde, needs=needs)
        )
    return out
