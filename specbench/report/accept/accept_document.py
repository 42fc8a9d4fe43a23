"""`specbench accept`'s Markdown/HTML report (the same blocks and renderers as `run`'s report) and
its α-by-position plot, from the accept.json document (`analysis.documents.accept_model.AcceptResults`)."""

from __future__ import annotations

import math
from pathlib import Path

from specbench.analysis.documents.accept_model import AcceptResults
from specbench.report.accept.accept_tables import (
    LEAD_HEADER,
    PROVISIONAL,
    SUMMARY_HEADER,
    ci_cell,
    lead_rows,
    profile_header,
    profile_rows,
    summary_rows,
    timing_lines,
    unit,
)
from specbench.report.render.blocks import Block, Bullets, Heading, Image, Para, TableBlock
from specbench.report.render.figure_file import save_figure


def build_blocks(doc: AcceptResults, plot: str | None) -> list[Block]:
    blocks: list[Block] = [Heading("specbench accept: offline acceptance and rollout plan", 1)]
    if doc.provisional:
        blocks += [
            Para(f"**{PROVISIONAL}.**"),
            Heading("α, ā(γ) and break-even draft cost"),
            TableBlock(LEAD_HEADER, lead_rows(doc)),
        ]
    blocks += [
        Para(
            f"Target `{doc.pair.target}`, draft `{doc.pair.draft}` on {doc.pair.device} "
            f"({doc.pair.dtype}); {doc.data.requests} logged requests from `{doc.data.source}`, "
            f"{doc.data.positions} response positions, bucketed by "
            f"`{doc.data.bucket_by or '(none)'}`."
        ),
        Para(
            "α is the mean exact β = Σ min(p, q) over every response position, teacher-forced "
            "(one forward of each model over prompt + logged response; docs/theory.md §2 (a)); intervals "
            "are 95 % percentile bootstrap over requests. The plan predicts ā(γ) and the speedup "
            "under iid acceptance; the speedup interval carries α's interval (timings taken as "
            f"exact). ON only if the low end of the speedup interval at the best γ exceeds 1 + "
            f"{doc.options.margin:g}."
        ),
        Heading("Summary (provisional verdicts)" if doc.provisional else "Summary"),
        TableBlock(SUMMARY_HEADER, summary_rows(doc)),
        Bullets(timing_lines(doc)),
        Heading("α by position in the response"),
        TableBlock(profile_header(doc), profile_rows(doc)),
    ]
    if plot:
        blocks.append(Image(plot, "α by position in the response"))
    for b in doc.buckets:
        blocks.append(Heading(f"{b.bucket}"))
        items = [
            f"{b.requests} requests, {b.tokens} positions; greedy agreement "
            f"{ci_cell(b.greedy_agreement)}; target NLL {b.target_nll_per_token:.3f} nats/token",
        ]
        for s in b.settings:
            plan = s.plan
            verdict = (
                f"**ON, γ = {plan.gamma}**"
                if plan.verdict == "on"
                else "**UNDECIDED**"
                if plan.verdict == "undecided"
                else "**OFF**"
            )
            if b.timing.provisional:
                verdict += " (provisional)"
            drift = f"; drift along the response {ci_cell(s.drift, '{:+.3f}')}" if s.drift else ""
            items.append(f"{s.setting}: α {ci_cell(s.alpha)}{drift}. {verdict}: {plan.reason}.")
        blocks.append(Bullets(items))
        u = unit(b.timing)
        header = ["γ"] + [h for s in b.settings for h in (f"ā {s.setting}", f"speedup {s.setting}")]
        rows = (
            [
                [str(g)]
                + [
                    cell
                    for s in b.settings
                    for cell in (
                        ci_cell(s.plan.gammas[g - 1].expected_tokens, "{:.2f}"),
                        ci_cell(s.plan.gammas[g - 1].speedup, "{:.2f}×"),
                    )
                ]
                for g in range(1, len(b.settings[0].plan.gammas) + 1)
            ]
            if b.settings
            else []
        )
        blocks.append(TableBlock(header, rows))
        blocks.append(Para(f"Baseline ITL {b.timing.t_target_ms:.3g} {u}."))
        if b.warnings:
            blocks.append(Bullets([f"⚠ {w}" for w in b.warnings]))
    if doc.warnings:
        blocks += [Heading("Warnings"), Bullets(doc.warnings)]
    if doc.data.skipped_rows:
        blocks += [
            Heading("Skipped rows"),
            Bullets([f"{r.row}: {r.reason}" for r in doc.data.skipped_rows]),
        ]
    return blocks


def plot_profile(path: Path, doc: AcceptResults) -> None:
    """α against position bin, one panel per setting, one line per bucket, with CI bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = doc.labels
    fig, axes = plt.subplots(
        1, len(labels), figsize=(4.2 * len(labels), 3.6), dpi=100, squeeze=False
    )
    for ax, label in zip(axes[0], labels, strict=True):
        for b in doc.buckets:
            s = next((x for x in b.settings if x.setting == label), None)
            if s is None or not s.profile:
                continue
            xs = [(p.positions[0] + p.positions[1] - 1) / 2 for p in s.profile]
            ys = [p.alpha.value for p in s.profile]
            err = [
                [
                    max(p.alpha.value - p.alpha.ci95[0], 0) if math.isfinite(p.alpha.ci95[0]) else 0
                    for p in s.profile
                ],
                [
                    max(p.alpha.ci95[1] - p.alpha.value, 0) if math.isfinite(p.alpha.ci95[1]) else 0
                    for p in s.profile
                ],
            ]
            ax.errorbar(xs, ys, yerr=err, marker="o", ms=3, capsize=2, label=b.bucket)
        ax.set_xscale("log", base=2)
        ax.set_title(label)
        ax.set_xlabel("position in the response")
        ax.set_ylabel("α (exact β)")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
