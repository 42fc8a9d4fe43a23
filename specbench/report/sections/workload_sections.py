"""The report's body per workload × temperature (the verdict, the γ table, drafter × policy
ranking, content checks and per-prompt α) and the appendix (estimators, fits, predictions)."""

from __future__ import annotations

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_base import EstimateJSON, SettingLabel
from specbench.analysis.documents.results_model_workload import HeterogeneityRow, WorkloadResult
from specbench.report.render.blocks import Block, Bullets, Heading, Image, Para, TableBlock
from specbench.report.sections.no_verdict import no_speedup_note, shows_speedup
from specbench.report.sections.text import (
    basis_text,
    ci_text,
    decision_rule,
    entry_slug,
    grouped_warnings,
    num_text,
    prompts_basis_note,
)


def _ci(est: EstimateJSON | None, fmt: str = "{:.3f}") -> str:
    """ "value [lo, hi]" of a results.json estimate; a missing end (no honest bound at this size,
    e.g. a rate of 0) prints as "–"."""
    return ci_text(est, fmt)


def _setting(s: SettingLabel) -> str:
    """'4' for the primary drafter at fixed γ, else e.g. '8 (ngram, adaptive)'."""
    extra = [x for x in (s.drafter, s.policy) if x and x not in ("model", "fixed")]
    return f"{s.gamma} ({', '.join(extra)})" if extra else str(s.gamma)


def _verdict_text(e: WorkloadResult) -> str:
    rec = e.recommendation
    if rec.verdict == "on":
        drafter = rec.drafter if rec.drafter is not None else "model"
        policy = rec.policy if rec.policy is not None else "fixed"
        return (
            f"**ON, γ = {rec.gamma}** ({drafter} drafter, {policy} policy): "
            f"{_ci(rec.speedup, '{:.2f}×')} ({rec.reason})."
        )
    word = {"not_measured": "NOT MEASURED", "undecided": "UNDECIDED"}.get(rec.verdict, "OFF")
    head = f"**{word}**: {rec.reason}."
    if rec.verdict != "not_measured":
        head += f" ({basis_text(rec)}.)"
    loss = rec.loss_avoided
    if loss and loss.speedup and loss.speedup.value is not None and loss.speedup.value < 1:
        head += f" Turning it off avoids γ={loss.gamma} at {_ci(loss.speedup, '{:.2f}×')}."
    return head


def _methods_blocks(e: WorkloadResult) -> list[Block]:
    """Every drafter × policy × γ measured, when more than one drafter or policy was."""
    methods = e.methods or []
    if len({(m.drafter, m.policy) for m in methods}) <= 1:
        return []
    return [
        Para("Drafter × policy × γ, ranked by measured speedup:"),
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
                    m.drafter,
                    m.policy,
                    str(m.gamma),
                    num_text(m.mean_gamma_used, "{:.2f}"),
                    _ci(m.mean_tokens_per_round, "{:.2f}"),
                    _ci(m.accepted_proposed),
                    _ci(m.measured_speedup, "{:.2f}×"),
                ]
                for m in methods
            ],
        ),
    ]


def workload_blocks(e: WorkloadResult, images: dict[str, str]) -> list[Block]:
    """One workload × temperature: the verdict, the measured γ, the ranking, the content."""
    slug = entry_slug(e)
    blocks: list[Block] = [Heading(f"{e.workload} (T = {e.temperature:g})"), Para(_verdict_text(e))]
    basis = prompts_basis_note(e, "γ table")
    if basis:
        blocks.append(Para(basis))
    speedups = shows_speedup(e)  # a cell without a verdict: its raw measurements only
    if (note := no_speedup_note(e, "γ table")) is not None:
        blocks.append(Para(note))
    grows = [
        [
            str(g.gamma),
            _ci(g.mean_tokens_per_round, "{:.2f}"),
            _ci(g.itl_ms, "{:.2f}"),
            *(
                [
                    _ci(g.measured_speedup, "{:.2f}×"),
                    num_text(g.predicted_speedup.iid, "{:.2f}×"),
                    num_text(g.predicted_speedup.empirical, "{:.2f}×"),
                ]
                if speedups
                else []
            ),
        ]
        for g in e.gammas
        if g.measured  # unmeasured γ: the appendix
    ]
    header = ["γ", "tokens/round", "ITL ms"]
    if speedups:
        header += ["measured speedup", "predicted (iid)", "predicted (empirical)"]
    blocks.append(TableBlock(header, grows))
    blocks += _methods_blocks(e) if speedups else []
    blocks += content_blocks(e, images, slug)  # warnings: once each, in decision/appendix
    if f"speedup_{slug}" in images:  # not drawn for a cell without a verdict
        blocks.append(Image(images[f"speedup_{slug}"], f"speedup against γ, {slug}"))
    blocks.append(Image(images[f"latency_{slug}"], f"latency distribution, {slug}"))
    return blocks


def _snippet(text: str, width: int = 48) -> str:
    """A one-line, backtick-free excerpt of an answer (repr shows the newlines of a loop)."""
    r = repr(text[-width:]).replace("`", "'")
    return r if len(text) <= width else "…" + r


def _worst(pairs: list[tuple[HeterogeneityRow, float]]) -> tuple[HeterogeneityRow, float] | None:
    return max(pairs, key=lambda rv: abs(rv[1] - 1.0), default=None)


def _heterogeneity_items(rows: list[HeterogeneityRow]) -> list[str]:
    """What the spread of α across prompts does to the predictions (docs/theory.md §3): the
    largest misstatement of tokens per round by pooling rounds instead of prompts, and by the iid
    model at the pooled α instead of at each prompt's own."""
    rnd = _worst(
        [(r, r.round_over_per_prompt) for r in rows if r.round_over_per_prompt is not None]
    )
    iid = _worst(
        [
            (r, r.iid_pooled_over_per_prompt)
            for r in rows
            if r.iid_pooled_over_per_prompt is not None
        ]
    )
    if rnd is None and iid is None:
        return []
    parts = []
    if rnd is not None:
        row, ratio = rnd
        parts.append(
            f"pooling rounds instead of prompts would put tokens/round at "
            f"{num_text(row.round_pooled, '{:.2f}')} instead of "
            f"{num_text(row.per_prompt_pooled, '{:.2f}')} at γ = {row.gamma} ({ratio - 1:+.1%})"
        )
    if iid is not None:
        row, ratio = iid
        parts.append(
            f"the iid model at the pooled α {ratio - 1:+.1%} against "
            f"the same model per prompt (γ = {row.gamma})"
        )
    return ["heterogeneity: " + "; ".join(parts) + " (docs/theory.md §3)"]


def _content_items(e: WorkloadResult) -> list[str]:
    items = []
    content, ppa = e.content, e.per_prompt_alpha
    if content and content.checked:
        reasons = ", ".join(f"{k} {v}" for k, v in content.reasons.items())
        items.append(
            f"degenerate answers: {content.n_degenerate} of {content.n_prompts} prompts"
            + (f" ({reasons})" if reasons else "")
            + "; answers hitting max_new_tokens "
            f"{num_text(content.hit_length_limit_share, '{:.0%}')}, "
            f"early EOS {num_text(content.early_eos_share, '{:.0%}')}, "
            f"empty {num_text(content.empty_share, '{:.0%}')}; median repeated n-gram share "
            f"{num_text(content.median_repeated_ngram_share, '{:.2f}')}, median zlib ratio "
            f"{num_text(content.median_compression_ratio, '{:.2f}')}"
        )
        for d in content.degenerate_prompts[:3]:
            ends = f"; ends `{_snippet(d.answer_tail)}`" if d.answer_tail else ""  # text kept
            items.append(f"{d.prompt_id}: {d.reason}{ends}")
    if ppa:
        spread = ppa.spread
        items.append(
            "α per prompt (exact β over its verified positions, every γ run): token-pooled "
            f"{_ci(ppa.token_pooled)}, mean over prompts {_ci(ppa.request_mean)}; "
            f"spread sd {num_text(spread.sd)}, p10–p90 {num_text(spread.p10)}–"
            f"{num_text(spread.p90)}"
        )
        items += _heterogeneity_items(ppa.heterogeneity)
    return items


def content_blocks(e: WorkloadResult, images: dict[str, str], slug: str) -> list[Block]:
    """Is it real text? Degenerate answers, α and speedup over the non-degenerate prompts, and the
    per-prompt α distribution (docs/theory.md §13)."""
    content = e.content
    if not (content and content.checked) and not e.per_prompt_alpha:
        return []
    blocks: list[Block] = [Heading("Content and per-prompt acceptance", 3)]
    blocks.append(Bullets(_content_items(e)))
    if content and content.n_degenerate:
        speedups = shows_speedup(e)  # without a verdict, α only
        rows = []
        for label, part, counted in (
            ("all prompts, degenerate counted", content.all_prompts, True),
            ("non-degenerate (the verdict's)", content.non_degenerate, False),
        ):
            verdict = str((part.verdict if part else None) or "–").upper().replace("_", " ")
            rows.append(
                [
                    label,
                    str(part.n_prompts) if part else "–",
                    _ci(part.alpha if part else None),
                    *([_ci(part.speedup if part else None, "{:.2f}×")] if speedups else []),
                    # what the verdict would be with the degenerate answers: not the verdict
                    f"(would be {verdict})" if counted and verdict != "–" else verdict,
                ]
            )
        st = content.speedup_setting
        speedup_col = f"speedup at γ {_setting(st)} [95% CI]" if st else "speedup"
        header = ["prompts", "n", "α [95% CI]", *([speedup_col] if speedups else []), "verdict"]
        blocks.append(TableBlock(header, rows))
    if f"alpha_prompts_{slug}" in images:
        blocks.append(Image(images[f"alpha_prompts_{slug}"], f"α per prompt, {slug}"))
    return blocks


def _estimator_items(e: WorkloadResult) -> list[str]:
    est, t = e.alpha_estimators, e.timing
    at_gamma = est.at_gamma if est else None
    return [
        f"α estimators: exact β {_ci(est.exact_beta if est else None)}; "
        f"accepted/tested {_ci(est.accepted_tested if est else None)}; "
        f"accepted/proposed at γ={at_gamma} {_ci(est.accepted_proposed if est else None)}; "
        f"from mean accepted length {_ci(est.from_accepted_length if est else None)}",
        f"baseline ITL {_ci(e.baseline_itl_ms, '{:.2f}')} ms, TTFT {_ci(e.ttft_ms, '{:.2f}')} ms, "
        f"{e.n_prompts} prompts",
        f"T_d mean {num_text(t.t_draft_ms.mean)} ms (median {num_text(t.t_draft_ms.median)}, "
        f"p10–p90 {num_text(t.t_draft_ms.p10)}–{num_text(t.t_draft_ms.p90)}); "
        f"T_t(k) = {num_text(t.verify_fit.t0_ms)} + {num_text(t.verify_fit.t1_ms_per_token)}·k ms; "
        f"harness overhead {num_text(t.overhead_fit.o0_ms)} + "
        f"{num_text(t.overhead_fit.o1_ms_per_token)}·k ms per round",
        "prediction error (mean |rel|): iid "
        f"{num_text(e.prediction_error.iid.mean_abs_rel, '{:.1%}')}, empirical "
        f"{num_text(e.prediction_error.empirical.mean_abs_rel, '{:.1%}')}",
    ]


def appendix_blocks(results: RunResults) -> list[Block]:
    """What the decision does not need first: every α estimator, the timing fits, predictions for
    unmeasured γ, the decision rule in full, and the warnings once each under the setting."""
    blocks: list[Block] = [Heading("Appendix: estimators, fits and predictions")]
    blocks.append(Para(decision_rule(results.run)))
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
    for e in results.workloads:
        blocks.append(Heading(f"{e.workload} (T = {e.temperature:g})", 3))
        blocks.append(Bullets(_estimator_items(e)))
        unmeasured = [g for g in e.gammas if not g.measured]
        if unmeasured and shows_speedup(e):  # predicted speedups: a cell with a verdict only
            blocks.append(
                TableBlock(
                    ["unmeasured γ", "predicted (iid)", "predicted (empirical)"],
                    [
                        [
                            str(g.gamma),
                            num_text(g.predicted_speedup.iid, "{:.2f}×"),
                            num_text(g.predicted_speedup.empirical, "{:.2f}×"),
                        ]
                        for g in unmeasured
                    ],
                )
            )
    return blocks
