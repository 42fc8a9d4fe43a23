"""Report section of an engine run's load cells (`engine.load`, `analysis.serving.load_cells`): per
setting × load point (closed loop at each concurrency, open-loop rates, trace replay) the p50 /
p99 of TTFT, TPOT and end-to-end latency with their order-statistic intervals, SLO goodput under the
SLO, the concurrency actually reached, and buffered streams; for a steady-state cell its
window's length, the warm-up left out, the achieved rate beside the offered one and whether the
server kept up (docs/theory.md §21)."""

from __future__ import annotations

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_load import LoadCell, QuantilesCI, SloJSON
from specbench.analysis.stats.steady_state import KEPT_UP_MIN_REQUESTS
from specbench.report.render.blocks import Block, Bullets, Heading, Para, TableBlock
from specbench.report.sections.text import num_text, prompts_basis_tag
from specbench.setting import Setting


def _q(est: EstimateJSON, fmt: str = "{:.1f}") -> str:
    """ "value [lo, hi]"; a missing value as "–", an end the sample cannot bound as "–"/"∞"."""
    lo, hi = est.ci95
    value = num_text(est.value, fmt) if est.value is not None else "–"
    if lo is None and hi is None:
        return value
    return f"{value} [{num_text(lo, fmt) if lo is not None else '–'}, {num_text(hi, fmt) if hi is not None else '∞'}]"


def _pair(q: QuantilesCI) -> list[str]:
    return [_q(q.p50), _q(q.p99)]


def load_text(c: LoadCell) -> str:
    if c.load == "closed":
        eff = c.effective_concurrency
        reached = (
            f" (effective {eff})"
            if eff is not None and c.concurrency and eff < c.concurrency
            else ""
        )
        return f"closed c={c.concurrency}{reached}"
    offered = f", offered {c.offered_rate:.2f}/s" if c.offered_rate is not None else ""
    if c.steady is not None and c.steady.achieved_rate is not None:
        offered += f", achieved {c.steady.achieved_rate:.2f}/s"
    return f"{c.load}{offered} (≤ {c.max_in_flight} in flight)"


def steady_text(c: LoadCell) -> str | None:
    """How long a steady-state cell's steady state lasted, what warm-up it left out, and whether
    the server kept up (None: not a steady-state cell)."""
    st = c.steady
    if st is None:
        return None
    n = st.queueing_growth.n if st.queueing_growth is not None else 0
    kept = {
        True: "kept up",
        False: "⚠ did NOT keep up",
        None: f"kept up: can't tell from {n} request(s) in the window (claimed from "
        f"{KEPT_UP_MIN_REQUESTS}; run longer)",
    }
    g = st.queueing_growth
    offered = f" of {c.offered_rate:.2f}/s offered" if c.offered_rate is not None else ""
    why = ""
    if st.kept_up is False:
        why = (
            f" (latency from arrival rose {g.rise_ms or 0:.0f} ms from {g.baseline_ms or 0:.0f} ms)"
            if g is not None and g.growing
            else " (the time bound passed)"
        )
    # a speculative setting as its label names it (a label that names its γ is not given it
    # twice); the setting without speculation by its endpoint's label, if it has one
    name = Setting(c.gamma, c.drafter).label if c.gamma else c.drafter or "baseline"
    return (
        f"{name} {c.load}: steady state {st.steady_duration_s or 0:.1f} s, "
        f"warm-up excluded {st.warmup_excluded.n} request(s) ({st.warmup_excluded.seconds or 0:.1f} s), "
        f"achieved {st.achieved_rate or 0:.2f}/s{offered} "
        f"(arrivals {st.arrival_rate or 0:.2f}/s, {st.n_drain} finished after the window); "
        f"{kept[st.kept_up]}{why}"
    )


def steady_lines(results: RunResults) -> list[str]:
    """One line per steady-state cell, for the first screen."""
    return [
        f"{e.workload} T={e.temperature:g} {line}"
        for e in results.workloads
        if e.engine is not None
        for c in e.engine.load or []
        if (line := steady_text(c)) is not None
    ]


def slo_text(slo: SloJSON | None) -> str:
    if slo is None:
        return "no SLO set (`slo:` in the config)"
    parts = [
        f"{name} ≤ {v:g} ms"
        for name, v in (("TTFT", slo.ttft_ms), ("TPOT", slo.tpot_ms), ("e2e", slo.e2e_ms))
        if v is not None
    ]
    return "SLO: " + ", ".join(parts)


def load_row(c: LoadCell) -> list[str]:
    gp = c.goodput
    tpot = _pair(c.tpot_ms)
    if c.tpot_meaningless:
        tpot = [f"{t} (buffered)" for t in tpot]
    return [
        c.drafter or "baseline",
        str(c.gamma),
        load_text(c),
        str(c.n) + (f" (+{c.n_failed} failed)" if c.n_failed else ""),
        *_pair(c.ttft_ms),
        *tpot,
        *_pair(c.e2e_ms),
        num_text(c.requests_per_s, "{:.2f}"),
        _q(gp.requests_per_s, "{:.2f}") if gp else "–",
        _q(gp.output_tokens_per_s, "{:.1f}") if gp and gp.output_tokens_per_s else "–",
    ]


HEADER = [
    "setting",
    "γ",
    "load",
    "requests",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "TPOT p50 ms",
    "TPOT p99 ms",
    "e2e p50 ms",
    "e2e p99 ms",
    "req/s",
    "SLO goodput req/s",
    "SLO goodput tok/s",
]


def load_blocks(results: RunResults) -> list[Block]:
    entries = [(e, e.engine) for e in results.workloads if e.engine is not None and e.engine.load]
    if not entries:
        return []
    blocks: list[Block] = [
        Heading("Engine: latency tails and SLO goodput per load"),
        Para(
            "One row per setting and load point: a closed loop keeps `c` conversations in flight; "
            "an open-loop rate sends requests at Poisson arrivals whatever the server's progress "
            "(a trace at its logged timestamps), with their client-side wait counted in TTFT and "
            "e2e. Percentiles with distribution-free 95 % order-statistic intervals "
            "(docs/theory.md §16; p99 needs 100 requests for a value and about 370 for an upper "
            "bound, shown ∞ before). SLO goodput: requests (and their output tokens) per second that "
            "meet every SLO, as vLLM's benchmark_serving counts them; Clopper–Pearson interval "
            "on the share meeting it. A steady-state rate (`load.duration_s` / `load.requests`) "
            "leaves its warm-up out, counts its tails over the requests that arrived in the "
            "window, and its req/s are the completions inside the window per second of it "
            '(the achieved rate; docs/serving.md "Steady state").'
        ),
    ]
    for e, eng in entries:
        blocks.append(Heading(f"{e.workload} (T = {e.temperature:g}): load", 3))
        cells = eng.load or []
        blocks.append(TableBlock(HEADER, [load_row(c) for c in cells]))
        notes = [slo_text(eng.slo)]
        tag = prompts_basis_tag(e)
        if tag:
            notes.append("prompts: " + tag)
        for c in cells:
            if (line := steady_text(c)) is not None:
                notes.append(line)
            if c.tpot_meaningless:
                notes.append(
                    f"{c.drafter or 'baseline'} {load_text(c)}: {c.buffered_requests}/{c.n} "
                    "responses arrived buffered (TTFT ≈ e2e); TPOT there is meaningless"
                )
            if c.hit_bound:
                notes.append(
                    f"{c.drafter or 'baseline'} {load_text(c)}: the time bound passed with "
                    f"{c.not_sent} requests not sent — the server does not sustain this load"
                )
        blocks.append(Bullets(list(dict.fromkeys(notes))))
    return blocks
