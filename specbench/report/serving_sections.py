"""Report sections for engine runs (`backend: vllm` / `openai`): speedup against concurrency, the
engine's acceptance counters, and the conformance check against a transformers reference run.

`documents.py` calls `make_engine_plots` and appends `engine_blocks`; a transformers run has no
`engine` entries and no `conformance` section, so both return nothing for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specbench.report import plots


def _slug(e: dict[str, Any]) -> str:
    return f"{e['workload']}_T{e['temperature']:g}".replace("/", "-")


def _v(est: dict[str, Any] | None, fmt: str = "{:.3f}") -> str:
    if not est or est.get("value") is None:
        return "–"
    lo, hi = (est.get("ci95") or [None, None])[:2]
    if lo is None or hi is None:
        return fmt.format(est["value"])
    return f"{fmt.format(est['value'])} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _n(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def make_engine_plots(plot_dir: Path, results: dict[str, Any]) -> dict[str, str]:
    made: dict[str, str] = {}
    for e in results["workloads"]:
        if e.get("engine"):
            name = f"concurrency_{_slug(e)}"
            plots.plot_speedup_vs_concurrency(plot_dir / f"{name}.png", e)
            made[name] = f"plots/{name}.png"
    return made


def stops_paying_text(eng: dict[str, Any], gamma: int | None) -> str:
    """One sentence: the concurrency at which speculation at γ stops paying."""
    if not gamma:
        return "no γ to follow across concurrency"
    s = (eng.get("stops_paying") or {}).get(str(gamma)) or {}
    levels = [r["concurrency"] for r in eng.get("concurrency") or []]
    if not s or not levels:
        return f"γ={gamma}: no speedup measured across concurrency"
    if s.get("never_pays"):
        return f"γ={gamma} pays at no measured concurrency ({', '.join(map(str, levels))})"
    if s.get("stops_paying_at") is None:
        return f"γ={gamma} pays at every measured concurrency (up to {max(levels)})"
    return (
        f"γ={gamma} stops paying at concurrency {s['stops_paying_at']} "
        f"(pays at {', '.join(map(str, s['pays_at']))})"
    )


def engine_blocks(results: dict[str, Any], images: dict[str, str]) -> list[Any]:
    from specbench.report.documents import Bullets, Heading, Image, Para, TableBlock

    blocks: list[Any] = []
    entries = [e for e in results["workloads"] if e.get("engine")]
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
    for e in entries:
        eng = e["engine"]
        slug = _slug(e)
        rows = eng.get("concurrency") or []
        gammas = sorted({int(g) for r in rows for g in r["gammas"]})
        blocks.append(
            Heading(f"{e['workload']} (T = {e['temperature']:g}), {eng.get('backend')}", 3)
        )
        header = ["concurrency", "baseline TPOT ms", "baseline tok/s"]
        for g in gammas:
            header += [f"γ={g} TPOT ms", f"γ={g} speedup [95% CI]", f"γ={g} throughput ×"]
        table = []
        for r in rows:
            b = r["baseline"]
            line = [
                str(r["concurrency"]),
                _v(b.get("tpot_ms"), "{:.2f}"),
                _n(b.get("output_tokens_per_s"), "{:.1f}"),
            ]
            for g in gammas:
                cell = r["gammas"].get(str(g)) or {}
                line += [
                    _v(cell.get("tpot_ms"), "{:.2f}"),
                    _v(cell.get("speedup"), "{:.2f}×"),
                    _n(cell.get("throughput_ratio"), "{:.2f}×"),
                ]
            table.append(line)
        blocks.append(TableBlock(header, table))
        notes = [stops_paying_text(eng, eng.get("chosen_gamma"))]
        src = eng.get("acceptance_source")
        notes.append(
            f"acceptance from {src} (engine spec-decode counters); speedup and verdict at "
            f"concurrency {eng.get('reference_concurrency')}"
        )
        if eng.get("accept_length_gauge") is not None:
            notes.append(f"the server's own accept-length gauge: {eng['accept_length_gauge']:.3f}")
        fit = (e.get("timing") or {}).get("engine_round_fit") or {}
        if fit.get("points") == 1:
            notes.append(
                f"round time (TPOT × τ) {fit['r0_ms']:.3f} ms at the one measured γ; the "
                "predictions for other γ assume it does not grow with γ"
            )
        elif fit.get("r0_ms") is not None:
            notes.append(
                f"round time (TPOT × τ) ≈ {fit['r0_ms']:.3f} + {_n(fit.get('r1_ms_per_token'), '{:.3f}')}·γ ms "
                f"from {fit.get('points')} measured γ (used for the predictions)"
            )
        blocks.append(Bullets(notes))
        per = eng.get("per_gamma") or {}
        if per:
            blocks.append(
                TableBlock(
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
                            _n(p.get("rounds"), "{:.0f}"),
                            _v(p.get("mean_accepted_length")),
                            _v(p.get("accepted_proposed")),
                            _v(p.get("accepted_tested")),
                            _v(p.get("from_accepted_length")),
                            ", ".join(
                                _n((a or {}).get("value")) for a in p.get("per_position") or []
                            ),
                        ]
                        for g, p in sorted(per.items(), key=lambda kv: int(kv[0]))
                    ],
                )
            )
        if images.get(f"concurrency_{slug}"):
            blocks.append(
                Image(images[f"concurrency_{slug}"], f"speedup against concurrency, {slug}")
            )
    blocks += conformance_blocks(results.get("conformance"))
    return blocks


def conformance_blocks(conf: dict[str, Any] | None) -> list[Any]:
    from specbench.report.documents import Bullets, Heading, Para, TableBlock

    if not conf:
        return []
    blocks: list[Any] = [Heading("Engine conformance")]
    status = conf.get("status")
    if status == "unavailable":
        blocks.append(
            Para(f"Not checked against `{conf.get('reference_run')}`: {conf.get('reason')}.")
        )
        return blocks
    verdict = (
        "**SHORTFALL**: the engine accepts significantly less than the reference"
        if status == "shortfall"
        else "**OK**: no significant shortfall against the reference"
    )
    blocks.append(
        Para(
            f"{verdict} (`{conf.get('reference_run')}`, transformers backend, same prompts paired; "
            "flagged when a one-sided paired permutation test, max-T over τ and every a_i of the "
            f"run, gives a family-wise adjusted p ≤ {conf.get('family_wise_alpha', 0.05):g} and the "
            "shortfall exceeds the minimum effect; the 95 % CI is the paired bootstrap's)."
        )
    )
    rows = []
    for c in conf.get("comparisons") or []:
        tau = c.get("mean_accepted_length") or {}
        worst = min(
            (p for p in c.get("per_position") or [] if p),
            key=lambda p: p["diff"],
            default=None,
        )
        greedy = c.get("greedy_outputs")
        rows.append(
            [
                c["workload"],
                f"{c['temperature']:g}",
                str(c["gamma"]),
                str(c.get("n_prompts")),
                _n(tau.get("engine"), "{:.3f}"),
                _n(tau.get("reference"), "{:.3f}"),
                _v({"value": tau.get("diff"), "ci95": tau.get("ci95")}, "{:+.3f}") if tau else "–",
                f"i={worst['position']}: {worst['engine']:.3f} vs {worst['reference']:.3f}"
                if worst
                else "–",
                f"{greedy['identical']}/{greedy['n']}" if greedy else "–",
                str(c["verdict"]).upper(),
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
    if conf.get("setting_differences"):
        blocks.append(Bullets([f"setting differs: {d}" for d in conf["setting_differences"]]))
    if conf.get("causes"):
        blocks.append(Para("Usual causes to check, those the settings point at first:"))
        blocks.append(Bullets(list(conf["causes"])))
    return blocks
