"""The rows of one workload × temperature both sides measured: which metrics, what to test
(per-prompt samples or stored summaries), which test, and the recommendation's verdict row. The
p-values here are unadjusted; `verdict` adjusts them over the whole comparison."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from specbench.analysis.compare.difference_tests import (
    DiffTest,
    exact_test,
    model_test,
    normal_difference,
    runs_test,
    t_test,
)
from specbench.analysis.compare.environment import Difference
from specbench.analysis.compare.metrics import (
    ACCEPTANCE,
    ENV,
    IMPROVED,
    INCONCLUSIVE,
    INFORMATIONAL,
    METRICS,
    NOT_COMPARABLE,
    NOT_SIGNIFICANT,
    REGRESSED,
    SPEEDUP,
    TIMING,
    UNCHANGED,
    VERDICT,
    Metric,
    Thresholds,
)
from specbench.analysis.compare.samples import (
    Samples,
    Summary,
    setting_key,
    setting_name,
    sum_by_key,
)
from specbench.analysis.compare.sides import Group, RecommendedSetting

MISSING = "missing on one side"


@dataclass(frozen=True)
class Row:
    workload: str
    temperature: float
    metric: str  # "alpha", "speedup@4", "speedup_recommended", "verdict", …
    label: str
    kind: str  # ACCEPTANCE, SPEEDUP, TIMING
    status: str
    base: float | str | None
    new: float | str | None
    change: float | None = None
    relative_change: float | None = None
    p_value: float | None = None  # Holm-adjusted over every tested row of the comparison
    ci: tuple[float, float] | None = None
    method: str = ""
    note: str = ""
    reason: str = ""  # why a row is not comparable or informational
    raw_p_value: float | None = None  # before the adjustment
    mde: float | None = None  # minimum detectable effect (power `Thresholds.power`, Holm level)
    needs: str = ""  # what the row's minimum effect needs (prompts / runs per side)
    gating: bool = False  # declared in advance (`Thresholds.gate`): counts for the exit code


Pair = tuple[Samples, Samples] | tuple[Summary, Summary]


def _values(
    key: str, b: Group, n: Group, shared: list[int], both_records: bool
) -> tuple[float, float, Pair] | None:
    """(base value, new value, what to test) of a metric, or None when a side lacks it."""
    if both_records:
        assert b.samples is not None and n.samples is not None
        if key == "alpha":  # pooled over the γ both runs measured
            parts = [f"alpha@{g}" for g in shared]
            if not parts:
                return None
            bs, ns = (
                sum_by_key([b.samples[k] for k in parts]),
                sum_by_key([n.samples[k] for k in parts]),
            )
        else:
            bs, ns = b.samples.get(key), n.samples.get(key)  # type: ignore[assignment]
        if bs is None or ns is None or not len(bs) or not len(ns):
            return None
        return bs.value, ns.value, (bs, ns)
    bsum, nsum = b.summaries.get(key), n.summaries.get(key)
    if bsum is None or nsum is None or bsum.value is None or nsum.value is None:
        return None
    return bsum.value, nsum.value, (bsum, nsum)


@dataclass
class RowContext:
    th: Thresholds
    ci_level: float
    both_records: bool
    subject: str
    env_diff: list[Difference]
    k_base: int
    k_new: int

    def deterministic(self, b: Group, n: Group) -> bool:
        """Whether T = 0 acceptance may be compared exactly: greedy decoding shown deterministic
        on both sides (a repeated prompt gave the same tokens, or several runs agreed), or by
        the runner's calibration (A/A runs identical at T = 0), and refuted on neither."""
        if b.deterministic is False or n.deterministic is False:
            return False
        if b.deterministic and n.deterministic:
            return True
        cal = self.th.calibration
        return bool(cal is not None and cal.greedy_deterministic)

    @property
    def several_runs(self) -> bool:
        return self.k_base >= 2 and self.k_new >= 2

    def informational(self, metric: Metric) -> str:
        """Why an absolute timing row is not gated ("" when it is)."""
        if metric.kind != TIMING or self.subject == ENV:
            return ""
        if self.env_diff:
            what = ", ".join(d.field for d in self.env_diff)
            return (
                f"absolute timing, environment differs ({what}): informational; pass "
                "--subject env when that change is what you test"
            )
        if self.several_runs:
            return ""
        return (
            "absolute timing moves with the machine run to run (≈"
            f"{100 * self.th.timing_run_to_run_cv:.0f} % here), which one run per side cannot "
            "measure: informational; give several runs per side (BASE… vs NEW…) or --subject env"
        )


def _per_run(key: str, b: Group, n: Group) -> tuple[list[float], list[float]] | None:
    def vals(g: Group) -> list[float] | None:
        out = []
        for r in g.per_run:
            s = (r.samples or {}).get(key)
            if s is None or not len(s) or not s.value > 0:
                return None
            out.append(s.value)
        return out

    bv, nv = vals(b), vals(n)
    return (bv, nv) if bv and nv else None


def _test(metric: Metric, key: str, b: Group, n: Group, pair: Pair, ctx: RowContext) -> DiffTest:
    th, level = ctx.th, 1 - ctx.th.significance
    if isinstance(pair[0], Summary) and isinstance(pair[1], Summary):
        test = normal_difference(pair[0], pair[1], ctx.ci_level, level)
        if metric.kind == SPEEDUP and test.se is not None and pair[0].value:
            # stored CIs are on the natural scale: the run-to-run term scaled to it
            se_r = th.run_to_run_cv * pair[0].value * math.sqrt(2)
            se = math.hypot(test.se, se_r)
            return t_test(
                test.change,
                test.change,
                se,
                pair[0].value,
                False,
                level,
                test.method + f" + run-to-run CV {100 * th.run_to_run_cv:.1f} %",
                test.se,
                se_r,
            )
        return test
    assert isinstance(pair[0], Samples) and isinstance(pair[1], Samples)
    if metric.kind == ACCEPTANCE:
        same = set(pair[0].keys) == set(pair[1].keys)
        if b.temperature == 0 and same and ctx.deterministic(b, n):
            return exact_test(pair[0], pair[1])
        test = model_test(pair[0], pair[1], metric.relative, th, 0.0, 1, 1)
        if b.temperature == 0:  # greedy, but determinism not shown: tested like T > 0
            return replace(test, method=test.method + "; T=0 determinism not shown")
        return test
    runs = _per_run(key, b, n) if ctx.several_runs else None
    if metric.kind == TIMING and runs is not None:
        return runs_test(runs[0], runs[1], level)
    cv = th.run_to_run_cv if metric.kind == SPEEDUP else th.timing_run_to_run_cv
    if runs is not None:
        # several runs: the stated run-to-run CV, or the one these runs show if it is larger
        lb, ln = np.log(runs[0]), np.log(runs[1])
        dof = len(lb) + len(ln) - 2
        seen = math.sqrt((((lb - lb.mean()) ** 2).sum() + ((ln - ln.mean()) ** 2).sum()) / dof)
        cv = max(cv, seen)
    return model_test(pair[0], pair[1], True, th, cv, ctx.k_base, ctx.k_new)


@dataclass
class PendingRow:
    """A row before the Holm adjustment: its metric and test."""

    row: Row
    metric: Metric | None = None
    test: DiffTest | None = None
    n_prompts: int = 0
    k_runs: int = 1


def _row(
    b: Group,
    n: Group,
    key: str,
    metric: Metric,
    label: str,
    note: str,
    ctx: RowContext,
    shared: list[int],
    row_id: str | None = None,
) -> PendingRow:
    head = (b.workload, b.temperature, row_id or key, label, metric.kind)
    gating = ctx.th.gates(row_id or key)
    values = _values(key, b, n, shared, ctx.both_records)
    if values is None:
        row = Row(*head, NOT_COMPARABLE, None, None, note=note, reason=MISSING, gating=gating)
        return PendingRow(row)
    base_v, new_v, pair = values
    rel = (new_v - base_v) / base_v if base_v else None
    if why := ctx.informational(metric):
        row = Row(
            *head,
            INFORMATIONAL,
            base_v,
            new_v,
            new_v - base_v,
            rel,
            note=note,
            reason=why,
            gating=gating,
        )
        return PendingRow(row)
    test = _test(metric, key, b, n, pair, ctx)
    row = Row(
        *head,
        UNCHANGED,
        base_v,
        new_v,
        test.change,
        rel,
        None,
        test.ci,
        test.method,
        note,
        raw_p_value=test.p_value,
        gating=gating,
    )
    n_prompts = min(b.n_prompts, n.n_prompts)
    if not n_prompts and isinstance(pair[0], Samples):
        n_prompts = len(pair[0])
    return PendingRow(row, metric, test, n_prompts, min(ctx.k_base, ctx.k_new))


def group_rows(b: Group, n: Group, ctx: RowContext) -> list[PendingRow]:
    """Every row of one workload × temperature both sides measured."""
    shared = sorted(set(b.gammas) & set(n.gammas))
    names = [
        "alpha",
        *[f"accepted_length@{g}" for g in shared],
        "baseline_itl_ms",
        "baseline_tokens_per_s",
    ]
    names += [f"{m}@{g}" for g in shared for m in ("itl_ms", "tokens_per_s", "speedup")]
    out = []
    for name in names:
        metric = METRICS[name.split("@")[0]]
        gamma = name.partition("@")[2]
        label = f"{metric.label} @γ={gamma}" if gamma else metric.label
        note = ""
        if name == "alpha" and ctx.both_records and shared != sorted(set(b.gammas) | set(n.gammas)):
            note = f"pooled over the shared γ {shared}"
        out.append(_row(b, n, name, metric, label, note, ctx, shared))
    for key in sorted(set(b.methods) & set(n.methods)):  # every engine setting, matched by label
        if key in {f"speedup@{g}" for g in shared} or key.split("@")[0] == f"speedup[{b.primary}]":
            continue  # the primary drafter's speedup rows above
        label = f"speedup ({setting_name(key)})"
        out.append(_row(b, n, key, METRICS["speedup"], label, "", ctx, shared))
    rec = _recommended_row(b, n, ctx, shared)
    if rec is not None:
        out.append(rec)
    return out


def _recommended_row(b: Group, n: Group, ctx: RowContext, shared: list[int]) -> PendingRow | None:
    """The speedup at the base's recommended setting (the new one's when the base was OFF),
    measured in both runs; None when both recommend OFF."""
    rb, rn = b.recommendation, n.recommendation
    if rb is None or rn is None:
        return None
    chosen = rb if rb.verdict == "on" else rn if rn.verdict == "on" else None
    if chosen is None:
        # both OFF: the base's best measured γ still gates the speedup (a slower speculative
        # path must not pass unseen because speculation was already off)
        if rb.best_gamma is None:
            return None
        chosen = RecommendedSetting("off", rb.best_gamma, b.primary, rb.best_gamma)
    label = f"speedup at recommended γ={chosen.gamma}"
    if chosen.verdict == "off":
        label = f"speedup at best measured γ={chosen.gamma} (both OFF)"
    if chosen.setting != b.primary:
        label += f" ({chosen.setting})"
    note = (
        ""
        if rb == rn
        else f"recommendation {rb.text()} → {rn.text()}; measured at γ={chosen.gamma} in both runs"
    )
    key = setting_key(chosen.setting, chosen.gamma)
    metric = METRICS["speedup_recommended"]
    return _row(b, n, key, metric, label, note, ctx, shared, "speedup_recommended")


def verdict_row(b: Group, n: Group, rec_row: Row, th: Thresholds) -> Row:
    """The recommendation (optimal γ and verdict). A flip is always listed; ON → OFF is a
    regression when the speedup behind it regressed (after the adjustment)."""
    rb, rn = b.recommendation, n.recommendation
    assert rb is not None and rn is not None
    flip = {("on", "off"): "ON → OFF", ("off", "on"): "OFF → ON"}.get((rb.verdict, rn.verdict))
    if flip is None:
        status = UNCHANGED
        note = f"recommended γ moved {rb.gamma} → {rn.gamma}" if rb.gamma != rn.gamma else ""
        if rb.setting != rn.setting and rb.verdict == "on":
            note = f"recommended setting {rb.setting} → {rn.setting}" + (
                f"; {note}" if note else ""
            )
    else:
        good = IMPROVED if flip == "OFF → ON" else REGRESSED
        if rec_row.status == NOT_COMPARABLE:
            status = NOT_COMPARABLE
        elif rec_row.status == INCONCLUSIVE and flip == "ON → OFF":
            status = INCONCLUSIVE  # the speedup behind it could not have seen its minimum
        else:
            status = good if rec_row.status == good else NOT_SIGNIFICANT
        rel = rec_row.relative_change
        moved = f"{100 * rel:+.1f} %" if rel is not None else "–"
        if status == good:
            why = f"the speedup at the recommended γ {status} ({moved})"
        elif status == INCONCLUSIVE:
            why = (
                f"the speedup behind it moved {moved} but cannot detect its minimum effect "
                f"({rec_row.needs or 'underpowered'})"
            )
        elif status == NOT_COMPARABLE:
            why = f"the speedup behind it is {rec_row.reason or 'not comparable'}"
        else:
            why = (
                f"the speedup behind it moved {moved}, not beyond noise and the minimum effect: "
                "the verdict sits near its threshold"
            )
        note = f"verdict flip {flip} (always reported); {why}"
    label = "recommendation (optimal γ, verdict)"
    head = (b.workload, b.temperature, VERDICT, label, SPEEDUP, status, rb.text(), rn.text())
    return Row(*head, note=note, method="verdict", gating=th.gates(VERDICT))
