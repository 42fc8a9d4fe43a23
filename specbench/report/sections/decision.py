"""The report's first screen: the title and the machine, the deployable decision per temperature
regime, each workload's own optimum, and the cost and latency tails at each workload's setting."""

from __future__ import annotations

from specbench.analysis.documents.results_model import (
    CostAtLoad,
    PoolDecision,
    RunResults,
)
from specbench.analysis.documents.results_model_base import EstimateJSON, LatencyTails, Percentiles
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.config.backends import ENGINE_BACKENDS
from specbench.report.render.blocks import Block, Box, Bullets, Heading, Para, TableBlock
from specbench.report.sections.paste import paste_line
from specbench.report.sections.profile_box import profile_box
from specbench.report.sections.text import (
    BATCH_ONE_TITLE,
    ci_text,
    cost_change,
    counts_line,
    decision_warnings,
    engine_header,
    num_text,
    pool_decision,
    prompts_basis_tag,
    routing_note,
    setting_label,
    short_rule,
    shown_setting,
    stays_off,
)


def header_blocks(results: RunResults) -> list[Block]:
    """Title, the pair and the machine, and for engine runs the engine, its version and flags."""
    run, env = results.run, results.env
    blocks: list[Block] = [
        Heading(f"specbench report: {run.name}", 1),
        Para(
            f"Target `{run.target}`, draft `{run.draft}` ({run.drafter}); "
            f"backend {run.backend}; γ grid {run.gammas}, "
            f"max_new_tokens {run.max_new_tokens}; device {env.device} "
            f"({env.gpu or env.cpu}), dtype {env.dtype}, "
            f"torch {env.torch}, transformers {env.transformers}, "
            f"specbench {env.specbench}."
        ),
    ]
    engine = engine_header(results)
    if engine:
        blocks.append(Para(engine))
    return blocks


def _at_setting(e: WorkloadResult, g: PoolDecision) -> EstimateJSON | None:
    """This workload's measured speedup at setting g (the pool's), or None."""
    key = (g.drafter, g.policy, g.gamma)
    for m in e.methods or []:
        if (m.drafter, m.policy, m.gamma) == (g.drafter, g.policy, g.gamma):
            return m.measured_speedup
    if e.engine is not None:
        own = next(
            (r for r in e.engine.ranking if (r.drafter, r.policy, r.gamma) == key),
            None,
        )  # every method × γ of the run, by its own label
        if own is not None:
            return own.speedup
        row = next((r for r in e.gammas if r.gamma == g.gamma), None)
        return row.measured_speedup if row else None
    return None


def _own_row(e: WorkloadResult, pool: PoolDecision | None) -> list[str]:
    """A workload's row of the "own pool" table: its own best setting against the pool's."""
    rec = e.recommendation
    itl = rec.itl_ms
    on = rec.verdict == "on"
    best, speed = shown_setting(rec)
    # a cell without a verdict shows no speedup anywhere: not at the pool's setting either
    pool_on = pool is not None and pool.verdict == "on" and rec.verdict != "not_measured"
    at_pool = _at_setting(e, pool) if pool is not None and pool_on else None
    bound = rec.decision_lower_bound if on else (best.decision_lower_bound if best else None)
    return [
        e.workload,
        f"{e.temperature:g}",
        num_text(e.weight, "{:.2f}"),
        setting_label(rec)
        if on
        else f"off (best {setting_label(best)})"
        if best
        else "–"
        if rec.verdict == "not_measured"
        else "off",
        ci_text(speed) if on or speed is None else f"({ci_text(speed)})",
        num_text(bound, "{:.2f}"),
        f"{ci_text(at_pool)} at {setting_label(pool)}" if at_pool and pool else "–",
        f"{num_text(itl.baseline if itl else None, '{:.2f}')} → "
        f"{num_text(itl.speculative if itl else None, '{:.2f}')}",
        rec.verdict.upper().replace("_", " "),
    ]


def decision_blocks(results: RunResults) -> list[Block]:
    """The first screen: the deployable decision per temperature regime, then each workload's own
    optimum ("if you route it to its own pool"), with counts of what was not measured or failed."""
    run = results.run
    pools = results.global_.by_temperature
    items = []
    for g in pools:
        items.append(
            pool_decision(g, run.margin)
            + ("." if g.verdict == "not_measured" else f"; {routing_note(g)}.")
        )
        paste = paste_line(results, g)
        if paste:
            items.append(f"paste (T={g.temperature:g}): `{paste}`")
    items.append(counts_line(results) + ".")
    items += decision_warnings(results)
    profile = profile_box(results)
    blocks: list[Block] = [] if profile is None else [profile]
    blocks.append(
        Box(
            BATCH_ONE_TITLE,
            items,
            short_rule(run),
        )
    )
    pool_of = {g.temperature: g for g in pools}
    rows = [_own_row(e, pool_of.get(e.temperature)) for e in results.workloads]
    blocks.append(Heading("If you route a workload to its own pool"))
    blocks.append(
        TableBlock(
            [
                "workload",
                "T",
                "share",
                "own best setting",
                "speedup [95% CI]",
                "lower bound",
                "at the pool's setting",
                "ITL ms (baseline → spec)",
                "verdict",
            ],
            rows,
        )
    )
    blocks.append(
        Para(
            "A cell that is not ON stays off: its speedup, in parentheses, is the best measured "
            "setting's over the verdict's prompts — not shown to clear 1 + margin, not a result "
            "to deploy; a cell not measured shows none."
        )
    )
    blocks += cost_and_tail_blocks(results)
    return blocks


def _percentiles(d: Percentiles) -> dict[str, float | None]:
    return {"p50": d.p50, "p90": d.p90, "p99": d.p99}


def _pcts(d: Percentiles | None, shown: list[str]) -> str:
    values = _percentiles(d) if d is not None else {}
    return " / ".join(num_text(values.get(p), "{:.1f}") for p in shown)


def _shown_percentiles(results: RunResults) -> list[str]:
    """The percentiles any setting of the run has enough requests for (p50 always)."""
    tails = [e.baseline_tails for e in results.workloads]
    tails += [g.tails for e in results.workloads for g in e.gammas]
    have = {
        p
        for t in tails
        if t is not None
        for d in (t.tpot_ms, t.e2e_ms)
        for p, v in _percentiles(d).items()
        if v is not None
    }
    return [p for p in ("p50", "p90", "p99") if p == "p50" or p in have]


def _tails_line(
    base: LatencyTails | None, spec: LatencyTails | None, shown: list[str]
) -> list[str]:
    """TPOT and e2e percentiles, baseline → speculation."""
    return [
        f"{_pcts(base.tpot_ms if base else None, shown)} → "
        f"{_pcts(spec.tpot_ms if spec else None, shown)}",
        f"{_pcts(base.e2e_ms if base else None, shown)} → "
        f"{_pcts(spec.e2e_ms if spec else None, shown)}",
    ]


def _cost_rows(results: RunResults, shown: list[str]) -> list[list[str]]:
    by = {(r.workload, r.temperature): r for r in results.economics.by_workload}
    rows = []
    for e in results.workloads:
        r = by.get((e.workload, e.temperature))
        on = e.recommendation.verdict == "on"
        # the cost follows the verdict: a cell that stays off shows the baseline's side only
        gamma = r.gamma if r and on else None
        grow = next((g for g in e.gammas if g.gamma == gamma), None)
        crows = {c.concurrency: c for c in (e.engine.concurrency if e.engine else [])}
        loads: list[CostAtLoad | None] = list(r.loads) if r and r.loads else [None]
        for load in loads:
            base_t, spec_t = e.baseline_tails, grow.tails if grow else None
            crow = crows.get(load.concurrency) if load else None
            if crow is not None:  # engine runs: the tails at this load
                cell = crow.gammas.get(str(gamma))
                base_t, spec_t = crow.baseline.tails, cell.tails if cell else None
            rows.append(
                [
                    e.workload,
                    f"{e.temperature:g}",
                    f"γ={gamma}" if gamma else stays_off(e.recommendation.verdict),
                    str(load.concurrency if load else 1),
                    cost_change(r, load) if r and load else "–",
                    num_text(r.ttft_change_ms if r and on else None, "{:+.2f}"),
                    num_text(r.draft_memory_mb if r and on else None, "{:+.0f}"),
                    *_tails_line(base_t, spec_t, shown),
                ]
            )
    return rows


def memory_lines(results: RunResults) -> list[str]:
    """The draft's memory, one line per draft, and for engine runs the KV-cache capacity each
    engine reported and the share speculation takes; each says where its figures come from."""
    econ = results.economics
    lines = []
    for name, m in (econ.draft_memory or {}).items():
        how = (
            " (computed from its config.json and safetensors headers)"
            if m.source == "computed"
            else ""
        )
        lines.append(
            f"draft `{name}`{how}: weights {num_text(m.weights_mib, '{:.1f}')} MiB "
            f"({num_text(m.weights_share_of_target, '{:.1%}')} of the target's), taking the room "
            f"of {m.target_kv_tokens_displaced if m.target_kv_tokens_displaced is not None else '–'}"
            f" tokens of target KV cache; its own KV cache adds "
            f"{num_text(m.kv_share_per_sequence, '{:.1%}')} to each sequence's "
            f"({num_text(m.kv_kib_per_token, '{:.1f}')} KiB per token)"
        )
    kv = econ.kv_capacity
    if kv is not None:
        base = (
            f"{kv.baseline_tokens:,} tokens" if kv.baseline_tokens is not None else "not reported"
        )
        cells = [
            f"γ={g}: {c.tokens:,} tokens"
            + (
                f", speculation takes {c.taken_tokens:,} ({num_text(c.taken_share, '{:.1%}')})"
                if c.taken_tokens is not None
                else ""
            )
            for g, c in kv.by_gamma.items()
        ]
        lines.append(
            "KV-cache capacity as the engines report it (num_gpu_blocks × block_size): without "
            f"speculation {base}" + ("; " + "; ".join(cells) if cells else "")
        )
    return lines


def _memory_block(results: RunResults) -> Block:
    lines = memory_lines(results)
    if lines:
        return Bullets(lines)
    backend = results.run.backend
    if backend in ENGINE_BACKENDS:
        return Para(
            "Draft memory: not reported by the engine (no `vllm:cache_config_info` on /metrics) "
            "and not computed (the target's and draft's config.json are not on this machine: "
            "give local directories or hub ids already in the cache)."
        )
    return Para("Draft memory: not computed (a run from an older specbench: no model profiles).")


def cost_and_tail_blocks(results: RunResults) -> list[Block]:
    """Cost per 10⁶ output tokens with and without speculation at each measured load, TTFT change,
    the draft's memory, and p50/p90/p99 latency of the baseline and the workload's setting."""
    econ = results.economics
    price = econ.gpu_hour_usd
    shown = _shown_percentiles(results)
    label = " / ".join(shown)
    rows = _cost_rows(results, shown)
    if not rows:
        return []
    note = (
        f"GPU-hour ${price:g} × {econ.gpus} GPU(s); "
        if price is not None
        else "No price given (`--gpu-hour-usd`, `--gpus` or the config's `economics:`); "
    )
    engine = results.run.backend in ENGINE_BACKENDS
    header = [
        "workload",
        "T",
        "setting",
        "concurrency",
        "$ / 10⁶ tokens (off → on)",
        "TTFT Δ ms",
        "draft memory MB",
        f"TPOT ms {label} (off → on)",
        f"e2e ms {label} (off → on)",
    ]
    memory_note = (
        "the draft's memory and the KV-cache capacity it takes are listed below the table."
        if engine
        else "draft memory = CUDA peak-memory delta (– on CPU, where the process's peak RSS "
        "cannot separate the draft)."
    )
    if engine:  # no CUDA peak delta from an engine: the column would be empty
        header.pop(6)
        rows = [r[:6] + r[7:] for r in rows]
    return [
        Heading("Cost and latency at each workload's setting"),
        Para(
            note + "cost = GPU time per output token (batch-1 decode ITL; engine runs: the batch's "
            "output tokens/s at that concurrency). TTFT Δ = speculation − baseline, mean over the "
            f"same prompts; {memory_note} Percentiles need ≥ 10 requests for p90 and ≥ 100 for "
            "p99. The setting follows the verdict: a cell that is not ON stays off, and its "
            "speculative side is –."
        ),
        TableBlock(header, rows),
        *_basis_block(results),
        _memory_block(results),
    ]


def _basis_block(results: RunResults) -> list[Block]:
    """The prompts each row covers, for the cells where some prompts were degenerate (§13)."""
    tags = [t for e in results.workloads if (t := prompts_basis_tag(e))]
    return [Bullets(["prompts: " + t for t in tags])] if tags else []
