"""Report sections for engine runs (`backend: vllm` / `openai`): speedup against concurrency, the
engine's acceptance counters, and the conformance check against a transformers reference run.

`documents.py` calls `make_engine_plots` and appends `engine_blocks`; a transformers run has no
`engine` entries and no `conformance` section, so both return nothing for it.
"""

from __future__ import annotations

from pathlib import Path

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_engine import Conformance, EngineSection
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.report.render.blocks import Block, Bullets, Heading, Image, Para, TableBlock
from specbench.report.schedule.schedule_plot import plot_throughput_schedule
from specbench.report.sections import plots
from specbench.report.sections.engine_ranking import ranking_blocks
from specbench.report.sections.no_verdict import no_speedup_note, shows_speedup
from specbench.report.sections.schedule_sections import schedule_blocks
from specbench.report.sections.text import entry_slug, num_text, prompts_basis_note


def _v(est: EstimateJSON | None, fmt: str = "{:.3f}") -> str:
    """ "value [lo, hi]", or the value alone when either end is missing."""
    if est is None or est.value is None:
        return "–"
    lo, hi = est.ci95
    if lo is None or hi is None:
        return fmt.format(est.value)
    return f"{fmt.format(est.value)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _n(x: float | None, fmt: str = "{:.2f}") -> str:
    return num_text(x, fmt)


def make_engine_plots(plot_dir: Path, results: RunResults) -> dict[str, str]:
    made: dict[str, str] = {}
    for e in results.workloads:
        if e.engine is not None and shows_speedup(e):  # without a verdict: no speedup drawn
            name = f"concurrency_{entry_slug(e)}"
            plots.plot_speedup_vs_concurrency(plot_dir / f"{name}.png", e)
            made[name] = f"plots/{name}.png"
            if e.engine.schedule is not None:  # the γ schedule's throughput plot
                made |= {f"schedule_{entry_slug(e)}": f"plots/schedule_{entry_slug(e)}.png"}
                plot_throughput_schedule(plot_dir / f"schedule_{entry_slug(e)}.png", e)
    return made


def stops_paying_text(eng: EngineSection, gamma: int | None) -> str:
    """One sentence: the concurrency at which speculation at γ stops paying."""
    if not gamma:
        return "no γ to follow across concurrency"
    s = eng.stops_paying.get(str(gamma))
    levels = [r.concurrency for r in eng.concurrency]
    if s is None or not levels:
        return f"γ={gamma}: no speedup measured across concurrency"
    if s.never_pays:
        return f"γ={gamma} pays at no measured concurrency ({', '.join(map(str, levels))})"
    if s.stops_paying_at is None:
        return f"γ={gamma} pays at every measured concurrency (up to {max(levels)})"
    return (
        f"γ={gamma} stops paying at concurrency {s.stops_paying_at} "
        f"(pays at {', '.join(map(str, s.pays_at))})"
    )


def _concurrency_table(eng: EngineSection, speedups: bool = True) -> TableBlock:
    """Per concurrency: the baseline's TPOT and throughput, each γ's TPOT, speedup, throughput
    (without `speedups`, a cell without a verdict: each γ's TPOT and tokens/s alone)."""
    rows = eng.concurrency
    gammas = sorted({int(g) for r in rows for g in r.gammas})
    header = ["concurrency", "baseline TPOT ms", "baseline tok/s"]
    for g in gammas:
        header += (
            [f"γ={g} TPOT ms", f"γ={g} speedup [95% CI]", f"γ={g} throughput ×"]
            if speedups
            else [f"γ={g} TPOT ms", f"γ={g} tok/s"]
        )
    table = []
    for r in rows:
        b = r.baseline
        line = [
            str(r.concurrency),
            _v(b.tpot_ms, "{:.2f}"),
            _n(b.output_tokens_per_s, "{:.1f}"),
        ]
        for g in gammas:
            cell = r.gammas.get(str(g))
            tpot = _v(cell.tpot_ms if cell else None, "{:.2f}")
            if not speedups:
                line += [tpot, _n(cell.output_tokens_per_s if cell else None, "{:.1f}")]
                continue
            line += [
                tpot,
                _v(cell.speedup if cell else None, "{:.2f}×"),
                _n(cell.throughput_ratio if cell else None, "{:.2f}×"),
            ]
        table.append(line)
    return TableBlock(header, table)


SOURCE_TEXT = {
    "per_request_response": "the engine's own per-request figures (per_request_response)",
    "per_request_counters": "counter deltas per request (per_request_counters)",
    "batch_counters": "counter deltas per batch (batch_counters)",
    "polluted": "nothing: every counter delta was polluted by other traffic",
    "unavailable": "nothing: the engine reported no spec-decode figures",
}


def _engine_notes(e: WorkloadResult, eng: EngineSection) -> list[str]:
    # where speculation stops paying: a speedup's reading, none for a cell without a verdict
    notes = [stops_paying_text(eng, eng.chosen_gamma)] if shows_speedup(e) else []
    sources = eng.acceptance_source
    names = [sources] if isinstance(sources, str) else sources
    notes.append(
        f"acceptance from {', '.join(SOURCE_TEXT.get(n, n) for n in names)}; speedup and "
        f"verdict at concurrency {eng.reference_concurrency}"
    )
    if eng.counters_polluted_batches:
        notes.append(
            f"{eng.counters_polluted_batches} batch(es) of the server's spec-decode counters showed "
            "more work than specbench sent (other traffic on a shared /metrics): their counter "
            "acceptance is not used (docs/theory.md §17)"
        )
    if eng.accept_length_gauge is not None:
        notes.append(f"the server's own accept-length gauge: {eng.accept_length_gauge:.3f}")
    fit = e.timing.engine_round_fit
    if fit is not None and fit.points == 1:
        notes.append(
            f"round time (TPOT × τ) {fit.r0_ms:.3f} ms at the one measured γ; the "
            "predictions for other γ assume it does not grow with γ"
        )
    elif fit is not None and fit.r0_ms is not None:
        notes.append(
            f"round time (TPOT × τ) ≈ {fit.r0_ms:.3f} + {_n(fit.r1_ms_per_token, '{:.3f}')}·γ ms "
            f"from {fit.points} measured γ (used for the predictions)"
        )
    return notes


def _counters_table(eng: EngineSection) -> TableBlock:
    """Per γ: specbench's estimators from the engine's counters."""
    return TableBlock(
        [
            "γ",
            "rounds",
            "τ [95% CI]",
            "accepted/proposed",
            "accepted/tested",
            "α from τ",
            "a_i per position",
        ],
        [
            [
                g,
                _n(p.rounds, "{:.0f}"),
                _v(p.mean_accepted_length),
                _v(p.accepted_proposed),
                _v(p.accepted_tested),
                _v(p.from_accepted_length),
                ", ".join(_n(a.value if a else None) for a in p.per_position),
            ]
            for g, p in sorted(eng.per_gamma.items(), key=lambda kv: int(kv[0]))
        ],
    )


def engine_blocks(results: RunResults, images: dict[str, str]) -> list[Block]:
    blocks: list[Block] = []
    entries = [(e, e.engine) for e in results.workloads if e.engine is not None]
    if entries:
        blocks.append(Heading("Engine: speedup against concurrency"))
        blocks.append(
            Para(
                "Each concurrency keeps that many requests in flight (closed loop). Speedup = decode "
                "tokens/s (1 / TPOT, TPOT = (e2e − TTFT) / (tokens − 1)) of speculation ÷ baseline "
                "at the same concurrency; throughput = output tokens/s of the whole batch. "
                "Speculation stops paying where the speedup's CI low end falls to 1 + margin."
            )
        )
    for e, eng in entries:
        slug = entry_slug(e)
        blocks.append(Heading(f"{e.workload} (T = {e.temperature:g}), {eng.backend}", 3))
        speedups = shows_speedup(e)  # a cell without a verdict: raw measurements only
        blocks += ranking_blocks(eng, speedups)  # every method × γ, when there are several
        basis = prompts_basis_note(e, "concurrency table")
        if basis:
            blocks.append(Para(basis))
        if (note := no_speedup_note(e, "concurrency table")) is not None:
            blocks.append(Para(note))
        blocks.append(_concurrency_table(eng, speedups))
        blocks.append(Bullets(_engine_notes(e, eng)))
        if eng.per_gamma:
            blocks.append(_counters_table(eng))
        if images.get(f"concurrency_{slug}"):
            blocks.append(
                Image(images[f"concurrency_{slug}"], f"speedup against concurrency, {slug}")
            )
        if speedups:
            blocks += schedule_blocks(e, eng, images)
        elif eng.schedule is not None:
            blocks.append(
                Para(
                    "No γ schedule by concurrency for this cell: it chooses γ by throughput ratio, "
                    "and a cell without a verdict shows none."
                )
            )
    blocks += conformance_blocks(results.conformance)
    return blocks


def conformance_blocks(conf: Conformance | None) -> list[Block]:
    if conf is None:
        return []
    blocks: list[Block] = [Heading("Engine conformance")]
    if conf.status == "unavailable":
        blocks.append(Para(f"Not checked against `{conf.reference_run}`: {conf.reason}."))
        return blocks
    verdict = (
        "**SHORTFALL**: the engine accepts significantly less than the reference"
        if conf.status == "shortfall"
        else "**OK**: no significant shortfall against the reference"
    )
    alpha = conf.family_wise_alpha if conf.family_wise_alpha is not None else 0.05
    blocks.append(
        Para(
            f"{verdict} (`{conf.reference_run}`, transformers backend, same prompts paired; "
            "flagged when a one-sided paired permutation test, max-T over τ and every a_i of the "
            f"run, gives a family-wise adjusted p ≤ {alpha:g} and the "
            "shortfall exceeds the minimum effect; the 95 % CI is the paired bootstrap's)."
        )
    )
    rows = []
    for c in conf.comparisons:
        tau = c.mean_accepted_length
        worst = min((p for p in c.per_position or [] if p), key=lambda p: p.diff, default=None)
        greedy = c.greedy_outputs
        rows.append(
            [
                c.workload,
                f"{c.temperature:g}",
                str(c.gamma),
                str(c.n_prompts),
                _n(tau.engine if tau else None, "{:.3f}"),
                _n(tau.reference if tau else None, "{:.3f}"),
                _v(EstimateJSON(value=tau.diff, ci95=tau.ci95), "{:+.3f}") if tau else "–",
                f"i={worst.position}: {worst.engine:.3f} vs {worst.reference:.3f}"
                if worst
                else "–",
                f"{greedy.identical}/{greedy.n}" if greedy else "–",
                str(c.verdict).upper(),
            ]
        )
    blocks.append(
        TableBlock(
            [
                "workload",
                "T",
                "γ",
                "prompts",
                "τ engine",
                "τ reference",
                "diff [95% CI]",
                "lowest a_i (engine vs ref)",
                "greedy outputs identical",
                "verdict",
            ],
            rows,
        )
    )
    if conf.setting_differences:
        blocks.append(Bullets([f"setting differs: {d}" for d in conf.setting_differences]))
    if conf.causes:
        blocks.append(Para("Usual causes to check, those the settings point at first:"))
        blocks.append(Bullets(list(conf.causes)))
    return blocks
