"""report.md and report.html (self-contained, images embedded) from results.json and the plots.

Both documents are rendered from one list of blocks, so they always say the same thing.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.records import RECORDS_FILE, read_records
from specbench.report import plots
from specbench.report.text import (
    ci_text,
    counts_line,
    decision_rule,
    decision_warnings,
    engine_header,
    grouped_warnings,
    pool_decision,
    routing_note,
    setting_label,
    short_rule,
)


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class TableBlock:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Image:
    path: str  # relative to the run directory
    alt: str


@dataclass
class Box:
    """The decision box: the first thing a reader sees (a framed section in HTML, a quote in md)."""

    title: str
    items: list[str]
    note: str = ""


Block = Heading | Para | Bullets | TableBlock | Image | Box


def _num(x: float | None, fmt: str = "{:.3f}") -> str:
    return "–" if x is None else fmt.format(x)


def _ci(est: dict[str, Any] | None, fmt: str = "{:.3f}") -> str:
    """ "value [lo, hi]" of a results.json estimate; a missing end (no honest bound at this size,
    e.g. a rate of 0) prints as "–"."""
    if not est or est.get("value") is None:
        return "–"
    lo, hi = est["ci95"]
    if lo is None and hi is None:
        return fmt.format(est["value"])
    return f"{fmt.format(est['value'])} [{_num(lo, fmt)}, {_num(hi, fmt)}]"


def _setting(rec: dict[str, Any]) -> str:
    """'4' for the primary drafter at fixed γ, else e.g. '8 (ngram, adaptive)'."""
    extra = [
        x for x in (rec.get("drafter"), rec.get("policy")) if x and x not in ("model", "fixed")
    ]
    return f"{rec['gamma']} ({', '.join(extra)})" if extra else str(rec["gamma"])


def _slug(e: dict[str, Any]) -> str:
    return f"{e['workload']}_T{e['temperature']:g}".replace("/", "-")


def make_plots(run_dir: Path, results: dict[str, Any]) -> dict[str, str]:
    """Write every PNG; return {name: relative path}."""
    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    entries = results["workloads"]
    made: dict[str, str] = {}
    plots.plot_alpha(out / "alpha.png", entries)
    made["alpha"] = "plots/alpha.png"
    plots.plot_per_position(out / "per_position.png", entries)
    made["per_position"] = "plots/per_position.png"
    plots.plot_verify_fit(out / "verify_fit.png", entries)
    made["verify_fit"] = "plots/verify_fit.png"
    records = read_records(run_dir / RECORDS_FILE)
    for e in entries:
        slug = _slug(e)
        plots.plot_speedup(out / f"speedup_{slug}.png", e)
        made[f"speedup_{slug}"] = f"plots/speedup_{slug}.png"
        if (e.get("per_prompt_alpha") or {}).get("values"):
            plots.plot_prompt_alpha(out / f"alpha_prompts_{slug}.png", e)
            made[f"alpha_prompts_{slug}"] = f"plots/alpha_prompts_{slug}.png"
        rec = e["recommendation"]
        gamma = (
            rec["gamma"]
            or (rec.get("best_measured") or {}).get("gamma")
            or ((e.get("content") or {}).get("speedup_setting") or {}).get("gamma", 0)
        )  # a verdict not measured (degenerate output) still shows its best setting's latency
        mine = [
            r
            for r in records
            if r["workload"] == e["workload"]
            and float(r["temperature"]) == e["temperature"]
            and r.get("concurrency", 1) == (e.get("engine") or {}).get("reference_concurrency", 1)
        ]
        base = [r["tpot_ms"] for r in mine if r["kind"] == "baseline" and r.get("tpot_ms")]
        spec = [
            r["tpot_ms"]
            for r in mine
            if r["kind"] == "spec" and r["gamma"] == gamma and r.get("tpot_ms")
        ]
        plots.plot_latency_distribution(out / f"latency_{slug}.png", e, base, spec, gamma)
        made[f"latency_{slug}"] = f"plots/latency_{slug}.png"
    from specbench.report.serving_sections import make_engine_plots

    made.update(make_engine_plots(out, results))
    return made


def header_blocks(results: dict[str, Any]) -> list[Block]:
    """Title, the pair and the machine, and for engine runs the engine, its version and flags."""
    run = results["run"]
    env = results.get("env", {})
    blocks: list[Block] = [
        Heading(f"specbench report: {run.get('name')}", 1),
        Para(
            f"Target `{run.get('target')}`, draft `{run.get('draft')}` ({run.get('drafter')}); "
            f"backend {run.get('backend', 'transformers')}; γ grid {run.get('gammas')}, "
            f"max_new_tokens {run.get('max_new_tokens')}; device {env.get('device')} "
            f"({env.get('gpu') or env.get('cpu')}), dtype {env.get('dtype')}, "
            f"torch {env.get('torch')}, transformers {env.get('transformers')}, "
            f"specbench {env.get('specbench')}."
        ),
    ]
    engine = engine_header(results)
    if engine:
        blocks.append(Para(engine))
    return blocks


def _at_setting(e: dict[str, Any], g: dict[str, Any]) -> dict[str, Any] | None:
    """This workload's measured speedup at setting g (the pool's), or None."""
    for m in e.get("methods") or []:
        if (m["drafter"], m["policy"], m["gamma"]) == (
            g.get("drafter"),
            g.get("policy"),
            g.get("gamma"),
        ):
            return m.get("measured_speedup")
    if e.get("engine"):
        row = next((r for r in e.get("gammas", []) if r["gamma"] == g.get("gamma")), None)
        return (row or {}).get("measured_speedup")
    return None


def decision_blocks(results: dict[str, Any]) -> list[Block]:
    """The first screen: the deployable decision per temperature regime, then each workload's own
    optimum ("if you route it to its own pool"), with counts of what was not measured or failed."""
    run = results["run"]
    pools = results.get("global", {}).get("by_temperature", [])
    items = [
        pool_decision(g, run.get("margin"))
        + ("." if g["verdict"] == "not_measured" else f"; {routing_note(g)}.")
        for g in pools
    ]
    items.append(counts_line(results) + ".")
    items += decision_warnings(results)
    blocks: list[Block] = [
        Box("Decision: one speculative configuration per server", items, short_rule(run))
    ]
    pool_of = {g["temperature"]: g for g in pools}
    rows = []
    for e in results["workloads"]:
        rec = e["recommendation"]
        itl = rec.get("itl_ms") or {}
        on = rec["verdict"] == "on"
        best = rec.get("best_measured") or {}
        speed = rec["speedup"] if on else best.get("speedup")
        pool = pool_of.get(e["temperature"]) or {}
        at_pool = _at_setting(e, pool) if pool.get("verdict") == "on" else None
        bound = rec.get("decision_lower_bound") if on else best.get("decision_lower_bound")
        rows.append(
            [
                e["workload"],
                f"{e['temperature']:g}",
                _num(e.get("weight"), "{:.2f}"),
                setting_label(rec)
                if on
                else f"off (best {setting_label(best)})"
                if best
                else "–"
                if rec["verdict"] == "not_measured"
                else "off",
                ci_text(speed),
                _num(bound, "{:.2f}"),
                f"{ci_text(at_pool)} at {setting_label(pool)}" if at_pool else "–",
                f"{_num(itl.get('baseline'), '{:.2f}')} → {_num(itl.get('speculative'), '{:.2f}')}",
                rec["verdict"].upper().replace("_", " "),
            ]
        )
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
    blocks += cost_and_tail_blocks(results)
    return blocks


def _pcts(t: dict[str, Any] | None, key: str, shown: list[str]) -> str:
    d = (t or {}).get(key) or {}
    return " / ".join(_num(d.get(p), "{:.1f}") for p in shown)


def _shown_percentiles(results: dict[str, Any]) -> list[str]:
    """The percentiles any setting of the run has enough requests for (p50 always)."""
    tails = [e.get("baseline_tails") for e in results["workloads"]]
    tails += [g.get("tails") for e in results["workloads"] for g in e.get("gammas", [])]
    have = {
        p
        for t in tails
        for key in ("tpot_ms", "e2e_ms")
        for p, v in ((t or {}).get(key) or {}).items()
        if v is not None
    }
    return [p for p in ("p50", "p90", "p99") if p == "p50" or p in have]


def cost_and_tail_blocks(results: dict[str, Any]) -> list[Block]:
    """Cost per 10⁶ output tokens with and without speculation at each measured load, TTFT change,
    the draft's memory, and p50/p90/p99 latency of the baseline and the workload's setting."""
    econ = results.get("economics") or {}
    by = {(r["workload"], r["temperature"]): r for r in econ.get("by_workload") or []}
    price = econ.get("gpu_hour_usd")
    shown = _shown_percentiles(results)
    label = " / ".join(shown)
    rows = []
    for e in results["workloads"]:
        r = by.get((e["workload"], e["temperature"])) or {}
        gamma = r.get("gamma")
        grow = next((g for g in e.get("gammas", []) if g["gamma"] == gamma), None) or {}
        crows = {c["concurrency"]: c for c in (e.get("engine") or {}).get("concurrency") or []}
        for load in r.get("loads") or [{}]:
            off, on = load.get("usd_per_million_off"), load.get("usd_per_million_on")
            base_t, spec_t = e.get("baseline_tails"), grow.get("tails")
            crow = crows.get(load.get("concurrency"))
            if crow is not None:  # engine runs: the tails at this load
                base_t = crow["baseline"].get("tails")
                spec_t = (crow["gammas"].get(str(gamma)) or {}).get("tails")
            rows.append(
                [
                    e["workload"],
                    f"{e['temperature']:g}",
                    f"γ={gamma}" if gamma else "–",
                    str(load.get("concurrency", 1)),
                    f"${off:.3f} → ${on:.3f}" if off is not None and on is not None else "–",
                    _num(r.get("ttft_change_ms"), "{:+.2f}"),
                    _num(r.get("draft_memory_mb"), "{:+.0f}"),
                    f"{_pcts(base_t, 'tpot_ms', shown)} → {_pcts(spec_t, 'tpot_ms', shown)}",
                    f"{_pcts(base_t, 'e2e_ms', shown)} → {_pcts(spec_t, 'e2e_ms', shown)}",
                ]
            )
    if not rows:
        return []
    note = (
        f"GPU-hour ${price:g} × {econ.get('gpus', 1)} GPU(s); "
        if price is not None
        else "No price given (`--gpu-hour-usd`, `--gpus` or the config's `economics:`); "
    )
    memory = [
        f"draft `{label}`: weights {_num(m['weights_mib'], '{:.1f}')} MiB "
        f"({_num(m['weights_share_of_target'], '{:.1%}')} of the target's), taking the room of "
        f"{m['target_kv_tokens_displaced'] if m['target_kv_tokens_displaced'] is not None else '–'}"
        f" tokens of target KV cache; its own KV cache adds "
        f"{_num(m['kv_share_per_sequence'], '{:.1%}')} to each sequence's "
        f"({_num(m['kv_kib_per_token'], '{:.1f}')} KiB per token)"
        for label, m in (econ.get("draft_memory") or {}).items()
    ]
    rows_note: Block
    if memory:
        rows_note = Bullets(memory)
    else:
        rows_note = Para(
            "Draft memory: not computed (env.json holds no model profiles: an engine run, whose "
            "engine reports its own KV-cache blocks in its log, or a run from an older specbench)."
        )
    return [
        Heading("Cost and latency at each workload's setting"),
        Para(
            note + "cost = GPU time per output token (batch-1 decode ITL; engine runs: the batch's "
            "output tokens/s at that concurrency). TTFT Δ = speculation − baseline, mean over the "
            "same prompts; draft memory = CUDA peak-memory delta (– on CPU, where the process's "
            "peak RSS cannot separate the draft). Percentiles need ≥ 10 requests for p90 and "
            "≥ 100 for p99."
        ),
        TableBlock(
            [
                "workload",
                "T",
                "setting",
                "concurrency",
                "$ / 10⁶ tokens (off → on)",
                "TTFT Δ ms",
                "draft memory MB",
                f"TPOT ms {label} (off → on)",
                f"e2e ms {label} (off → on)",
            ],
            rows,
        ),
        rows_note,
    ]


def appendix_blocks(results: dict[str, Any]) -> list[Block]:
    """What the decision does not need first: every α estimator, the timing fits, predictions for
    unmeasured γ, the decision rule in full, and the warnings once each under the setting."""
    blocks: list[Block] = [Heading("Appendix: estimators, fits and predictions")]
    blocks.append(Para(decision_rule(results["run"])))
    grouped = grouped_warnings(results)
    if grouped:
        blocks.append(Heading("Warnings by setting", 3))
        blocks.append(
            Bullets(
                [
                    f"⚠ {'γ=' + str(g) + ': ' if g is not None else 'all settings: '}{text} — "
                    f"{', '.join(cells)}"
                    for g, text, cells in sorted(
                        grouped, key=lambda x: (x[0] is not None, x[0] or 0)
                    )
                ]
            )
        )
    for e in results["workloads"]:
        est = e.get("alpha_estimators") or {}
        t = e["timing"]
        blocks.append(Heading(f"{e['workload']} (T = {e['temperature']:g})", 3))
        blocks.append(
            Bullets(
                [
                    f"α estimators: exact β {_ci(est.get('exact_beta'))}; accepted/tested {_ci(est.get('accepted_tested'))}; "
                    f"accepted/proposed at γ={est.get('at_gamma')} {_ci(est.get('accepted_proposed'))}; "
                    f"from mean accepted length {_ci(est.get('from_accepted_length'))}",
                    f"baseline ITL {_ci(e.get('baseline_itl_ms'), '{:.2f}')} ms, TTFT {_ci(e.get('ttft_ms'), '{:.2f}')} ms, "
                    f"{e['n_prompts']} prompts",
                    f"T_d mean {_num(t['t_draft_ms']['mean'])} ms (median {_num(t['t_draft_ms']['median'])}, "
                    f"p10–p90 {_num(t['t_draft_ms']['p10'])}–{_num(t['t_draft_ms']['p90'])}); "
                    f"T_t(k) = {_num(t['verify_fit']['t0_ms'])} + {_num(t['verify_fit']['t1_ms_per_token'])}·k ms; "
                    f"harness overhead {_num(t['overhead_fit']['o0_ms'])} + {_num(t['overhead_fit']['o1_ms_per_token'])}·k ms per round",
                    "prediction error (mean |rel|): iid "
                    f"{_num(e['prediction_error']['iid']['mean_abs_rel'], '{:.1%}')}, empirical "
                    f"{_num(e['prediction_error']['empirical']['mean_abs_rel'], '{:.1%}')}",
                ]
            )
        )
        unmeasured = [g for g in e["gammas"] if not g["measured"]]
        if unmeasured:
            blocks.append(
                TableBlock(
                    ["unmeasured γ", "predicted (iid)", "predicted (empirical)"],
                    [
                        [
                            str(g["gamma"]),
                            _num(g["predicted_speedup"]["iid"], "{:.2f}×"),
                            _num(g["predicted_speedup"]["empirical"], "{:.2f}×"),
                        ]
                        for g in unmeasured
                    ],
                )
            )
    return blocks


def build_blocks(results: dict[str, Any], images: dict[str, str]) -> list[Block]:
    blocks: list[Block] = header_blocks(results) + decision_blocks(results)
    blocks += [
        Image(images["alpha"], "α by workload"),
        Image(images["per_position"], "per-position acceptance"),
        Image(images["verify_fit"], "verify time fit"),
    ]
    for e in results["workloads"]:
        slug = _slug(e)
        rec = e["recommendation"]
        blocks.append(Heading(f"{e['workload']} (T = {e['temperature']:g})"))
        verdict = (
            f"**ON, γ = {rec['gamma']}** ({rec.get('drafter', 'model')} drafter, "
            f"{rec.get('policy', 'fixed')} policy): {_ci(rec['speedup'], '{:.2f}×')} ({rec['reason']})."
            if rec["verdict"] == "on"
            else f"**{'NOT MEASURED' if rec['verdict'] == 'not_measured' else 'OFF'}**: {rec['reason']}."
            + (
                f" Turning it off avoids γ={rec['loss_avoided']['gamma']} at {_ci(rec['loss_avoided']['speedup'], '{:.2f}×')}."
                if rec.get("loss_avoided") and rec["loss_avoided"]["speedup"]["value"] < 1
                else ""
            )
        )
        blocks.append(Para(verdict))
        grows = []
        for g in [g for g in e["gammas"] if g["measured"]]:  # unmeasured γ: the appendix
            grows.append(
                [
                    str(g["gamma"]),
                    _ci(g.get("mean_tokens_per_round"), "{:.2f}") if g["measured"] else "–",
                    _ci(g.get("itl_ms"), "{:.2f}") if g["measured"] else "–",
                    _ci(g.get("measured_speedup"), "{:.2f}×") if g["measured"] else "–",
                    _num(g["predicted_speedup"]["iid"], "{:.2f}×"),
                    _num(g["predicted_speedup"]["empirical"], "{:.2f}×"),
                ]
            )
        blocks.append(
            TableBlock(
                [
                    "γ",
                    "tokens/round",
                    "ITL ms",
                    "measured speedup",
                    "predicted (iid)",
                    "predicted (empirical)",
                ],
                grows,
            )
        )
        methods = e.get("methods") or []
        if len({(m["drafter"], m["policy"]) for m in methods}) > 1:
            blocks.append(Para("Drafter × policy × γ, ranked by measured speedup:"))
            blocks.append(
                TableBlock(
                    [
                        "drafter",
                        "policy",
                        "γ (max)",
                        "mean γ",
                        "tokens/round",
                        "accepted/proposed",
                        "measured speedup",
                    ],
                    [
                        [
                            m["drafter"],
                            m["policy"],
                            str(m["gamma"]),
                            _num(m["mean_gamma_used"], "{:.2f}"),
                            _ci(m["mean_tokens_per_round"], "{:.2f}"),
                            _ci(m["accepted_proposed"]),
                            _ci(m["measured_speedup"], "{:.2f}×"),
                        ]
                        for m in methods
                    ],
                )
            )
        blocks += content_blocks(e, images, slug)  # warnings: once each, in decision/appendix
        blocks.append(Image(images[f"speedup_{slug}"], f"speedup against γ, {slug}"))
        blocks.append(Image(images[f"latency_{slug}"], f"latency distribution, {slug}"))
    from specbench.report.serving_sections import engine_blocks

    blocks += engine_blocks(results, images)  # vllm / openai runs, conformance
    if results.get("failures"):
        blocks.append(Heading("Failures"))
        blocks.append(
            Bullets(
                [
                    f"{f['workload']} γ={f['gamma']} {f['prompt_id']}: {f['error']}"
                    for f in results["failures"]
                ]
            )
        )
    return blocks + appendix_blocks(results)


def _snippet(text: str, width: int = 48) -> str:
    """A one-line, backtick-free excerpt of an answer (repr shows the newlines of a loop)."""
    r = repr(text[-width:]).replace("`", "'")
    return r if len(text) <= width else "…" + r


def _heterogeneity_items(rows: list[dict[str, Any]]) -> list[str]:
    """What the spread of α across prompts does to the predictions (docs/theory.md §3): the
    largest misstatement of tokens per round by pooling rounds instead of prompts, and by the iid
    model at the pooled α instead of at each prompt's own."""

    def worst(key: str) -> dict[str, Any] | None:
        rows_k = [r for r in rows if r.get(key) is not None]
        return max(rows_k, key=lambda r: abs(r[key] - 1.0), default=None)

    rnd, iid = worst("round_over_per_prompt"), worst("iid_pooled_over_per_prompt")
    if rnd is None and iid is None:
        return []
    parts = []
    if rnd is not None:
        parts.append(
            f"pooling rounds instead of prompts would put tokens/round at "
            f"{_num(rnd['round_pooled'], '{:.2f}')} instead of {_num(rnd['per_prompt_pooled'], '{:.2f}')} "
            f"at γ = {rnd['gamma']} ({rnd['round_over_per_prompt'] - 1:+.1%})"
        )
    if iid is not None:
        parts.append(
            f"the iid model at the pooled α {iid['iid_pooled_over_per_prompt'] - 1:+.1%} against "
            f"the same model per prompt (γ = {iid['gamma']})"
        )
    return ["heterogeneity: " + "; ".join(parts) + " (docs/theory.md §3)"]


def content_blocks(e: dict[str, Any], images: dict[str, str], slug: str) -> list[Block]:
    """Is it real text? Degenerate answers, α and speedup over the non-degenerate prompts, and the
    per-prompt α distribution (docs/theory.md §13)."""
    blocks: list[Block] = []
    content = e.get("content") or {}
    ppa = e.get("per_prompt_alpha") or {}
    if not content.get("checked") and not ppa:
        return blocks
    blocks.append(Heading("Content and per-prompt acceptance", 3))
    items = []
    if content.get("checked"):
        n_deg, n = content.get("n_degenerate", 0), content.get("n_prompts", 0)
        reasons = ", ".join(f"{k} {v}" for k, v in (content.get("reasons") or {}).items())
        items.append(
            f"degenerate answers: {n_deg} of {n} prompts"
            + (f" ({reasons})" if reasons else "")
            + f"; answers hitting max_new_tokens {_num(content.get('hit_length_limit_share'), '{:.0%}')}, "
            f"early EOS {_num(content.get('early_eos_share'), '{:.0%}')}, "
            f"empty {_num(content.get('empty_share'), '{:.0%}')}; median repeated n-gram share "
            f"{_num(content.get('median_repeated_ngram_share'), '{:.2f}')}, median zlib ratio "
            f"{_num(content.get('median_compression_ratio'), '{:.2f}')}"
        )
        for d in (content.get("degenerate_prompts") or [])[:3]:
            items.append(f"{d['prompt_id']}: {d['reason']}; ends `{_snippet(d['answer_tail'])}`")
    if ppa:
        spread = ppa.get("spread") or {}
        items.append(
            "α per prompt (exact β over its verified positions, every γ run): token-pooled "
            f"{_ci(ppa.get('token_pooled'))}, mean over prompts {_ci(ppa.get('request_mean'))}; "
            f"spread sd {_num(spread.get('sd'))}, p10–p90 {_num(spread.get('p10'))}–"
            f"{_num(spread.get('p90'))}"
        )
        items += _heterogeneity_items(ppa.get("heterogeneity") or [])
    blocks.append(Bullets(items))
    if content.get("n_degenerate"):
        rows = []
        for label, key in (("all prompts", "all_prompts"), ("non-degenerate", "non_degenerate")):
            part = content.get(key) or {}
            rows.append(
                [
                    label,
                    str(part.get("n_prompts", "–")),
                    _ci(part.get("alpha")),
                    _ci(part.get("speedup"), "{:.2f}×"),
                    str(part.get("verdict") or "–").upper().replace("_", " "),
                ]
            )
        st = content.get("speedup_setting")
        blocks.append(
            TableBlock(
                [
                    "prompts",
                    "n",
                    "α [95% CI]",
                    f"speedup at γ {_setting(st)} [95% CI]" if st else "speedup",
                    "verdict",
                ],
                rows,
            )
        )
    if f"alpha_prompts_{slug}" in images:
        blocks.append(Image(images[f"alpha_prompts_{slug}"], f"α per prompt, {slug}"))
    return blocks


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + b.text)
        elif isinstance(b, Para):
            out.append(b.text)
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {i}" for i in b.items))
        elif isinstance(b, TableBlock):
            lines = ["| " + " | ".join(b.header) + " |", "|" + "---|" * len(b.header)]
            lines += ["| " + " | ".join(r) + " |" for r in b.rows]
            out.append("\n".join(lines))
        elif isinstance(b, Image):
            out.append(f"![{b.alt}]({b.path})")
        elif isinstance(b, Box):
            lines = [f"> **{b.title}**", ">"] + [f"> - {i}" for i in b.items]
            lines += [">", f"> {b.note}"] if b.note else []
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Escape, then render **bold** and `code` (the only inline markup the blocks use)."""
    parts = html.escape(text).split("**")
    text = "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))
    parts = text.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(blocks: list[Block], run_dir: Path, title: str) -> str:
    body: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            body.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, TableBlock):
            head = "".join(f"<th>{_inline(h)}</th>" for h in b.header)
            rows = "".join(
                "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in b.rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(b, Box):
            items = "".join(f"<li>{_inline(i)}</li>" for i in b.items)
            note = f'<p class="rule">{_inline(b.note)}</p>' if b.note else ""
            body.append(
                f'<section id="decision" class="decision"><h2>{_inline(b.title)}</h2>'
                f"<ul>{items}</ul>{note}</section>"
            )
        elif isinstance(b, Image):
            data = base64.b64encode((run_dir / b.path).read_bytes()).decode()
            body.append(f'<img alt="{html.escape(b.alt)}" src="data:image/png;base64,{data}">')
    style = (
        "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
        "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;"
        "text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}img{max-width:100%;display:block;"
        "margin:1rem 0}code{background:#f3f3f3;padding:0 .2rem}"
        ".decision{border:2px solid #2a6f3e;border-radius:6px;background:#f2faf4;padding:.2rem 1.2rem;"
        "margin:1rem 0}.decision h2{margin:.6rem 0}.decision li{margin:.3rem 0}"
        ".decision .rule{color:#444;font-size:.9rem}"
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def write_documents(run_dir: Path, results: dict[str, Any]) -> None:
    images = make_plots(run_dir, results)
    blocks = build_blocks(results, images)
    (run_dir / "report.md").write_text(to_markdown(blocks))
    title = f"specbench report: {results['run'].get('name')}"
    (run_dir / "report.html").write_text(to_html(blocks, run_dir, title))
