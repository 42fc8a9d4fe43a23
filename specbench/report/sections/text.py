"""Sentences shared by the console summary and the documents (one wording per statement), read
from a validated results.json (`analysis.documents.results_model`)."""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from specbench.analysis.documents.results_model import (
    CostAtLoad,
    PoolDecision,
    RunInfo,
    RunResults,
    WorkloadEconomics,
)
from specbench.analysis.documents.results_model_base import DecisionNumbers, EstimateJSON
from specbench.analysis.documents.results_model_workload import (
    Recommendation,
    SettingSpeedup,
    WorkloadResult,
)


class Setting(Protocol):
    """Anything naming a drafter × policy × γ: a recommendation, a pool decision, a setting."""

    @property
    def drafter(self) -> str | None: ...

    @property
    def policy(self) -> str | None: ...

    @property
    def gamma(self) -> int | None: ...


def _x(v: float | None) -> str:
    return f"{v:.2f}×" if isinstance(v, int | float) else "–"


# where the per-temperature decisions hold: one request in flight (the closed-loop batches at
# concurrency 1 on an engine; the transformers loop's own batch-1 decode)
BATCH_ONE = "at batch 1 (one request in flight)"
# the per-temperature box's title: under 80 columns, so a terminal does not wrap it
BATCH_ONE_TITLE = f"Decision {BATCH_ONE}, per temperature"


def num_text(x: float | None, fmt: str = "{:.3f}") -> str:
    """A number in `fmt`, or "–" where the analysis could not compute it."""
    return "–" if x is None else fmt.format(x)


def entry_slug(e: WorkloadResult) -> str:
    """A workload × temperature as a file-name part: plots/speedup_SLUG.png."""
    return f"{e.workload}_T{e.temperature:g}".replace("/", "-")


def decision_rule(run: RunInfo) -> str:
    level = run.ci_level
    a = (1 - level) / 2
    return (
        f"Three outcomes (docs/theory.md §8). ON for a workload only if the simultaneous "
        f"{1 - a:.1%} lower confidence bound of its best setting's speedup exceeds 1 + "
        f"{run.margin} — simultaneous over every measured drafter × policy × γ, so picking the "
        f"best does not inflate the error: a false ON at most {a:.1%} of the time. OFF only if "
        f"every setting's {1 - a:.1%} upper bound is below 1 + {run.margin}: a false OFF at most "
        f"{a:.1%}. Otherwise UNDECIDED: speculation stays off, and the verdict says how many "
        "prompts would likely decide it. Fewer than 6 prompts decide nothing. Speedup = pooled "
        "decode time of the baseline ÷ speculation on the same tokens; the bounds are a sign-flip "
        "test over prompts inverted (docs/theory.md §8)."
    )


# --- the first screen: the deployable decision, counts, engine, warnings by setting ---


def ci_text(est: EstimateJSON | None, fmt: str = "{:.2f}×") -> str:
    """ "1.43× [1.21×, 1.68×]" of a results.json estimate; a missing end prints as "–"."""
    if est is None or est.value is None:
        return "–"
    lo, hi = est.ci95
    if lo is None and hi is None:
        return fmt.format(est.value)
    return f"{fmt.format(est.value)} [{num_text(lo, fmt)}, {num_text(hi, fmt)}]"


def setting_label(d: Setting) -> str:
    """'γ=4', or 'γ=8 (ngram, adaptive)' for another drafter or policy."""
    extra = [x for x in (d.drafter, d.policy) if x and x not in ("model", "fixed")]
    if d.drafter and "γ=" in d.drafter:  # an engine setting's own label, e.g. "eagle3 γ=4"
        return d.drafter + (f" ({d.policy})" if d.policy not in ("", "fixed", None) else "")
    return f"γ={d.gamma}" + (f" ({', '.join(extra)})" if extra else "")


def pool_decision(g: PoolDecision, margin: float | None) -> str:
    """The deployable decision of one temperature regime: one setting for the whole pool."""
    head = f"T = {g.temperature:g}: "
    if g.verdict == "on":
        bound = g.decision_lower_bound
        clear = f"{1 + margin:.2f}" if margin is not None else "1 + margin"
        return (
            head + f"**ON at {setting_label(g)}** for all traffic — "
            f"{ci_text(g.speedup)} of total decode time; simultaneous lower bound "
            f"{'–' if bound is None else f'{bound:.2f}'} > {clear}"
        )
    if g.verdict == "not_measured":
        return head + f"**not measured** ({g.reason})"
    basis = basis_text(g)
    why = f"{g.reason}; {basis}" if basis else g.reason
    if g.verdict == "undecided":
        return head + f"**UNDECIDED**, keep speculation off ({why})"
    return head + f"**OFF** for all traffic ({why})"


def basis_text(d: DecisionNumbers) -> str:
    """What a verdict rests on and can see (docs/theory.md §8): "8 prompts, effective 2.7;
    detects ≥ 1.32× with 80 % power" (unbounded where the data cannot say)."""
    parts = []
    if d.n_prompts is not None:
        eff = f", effective {d.n_eff:.1f}" if d.n_eff is not None else ""
        parts.append(f"{d.n_prompts} prompts{eff}")
    if d.n_prompts is not None:
        mde = d.detectable_speedup
        parts.append(
            f"detects ≥ {mde:.2f}× with 80 % power"
            if mde is not None
            else "detectable speedup unbounded"
        )
    return "; ".join(parts)


def routing_note(g: PoolDecision) -> str:
    """What a separate pool per workload would give instead (the per-workload optima)."""
    on = ", ".join(g.on_for) or "none"
    return (
        f"routing each workload to its own pool instead: {_x(g.per_workload_routing_speedup)}"
        f" (ON for {on})"
    )


def shown_setting(rec: Recommendation) -> tuple[SettingSpeedup | None, EstimateJSON | None]:
    """What a cell's "own pool" row shows (the documents' table and the console's alike): the
    best measured setting of a cell that stays off (its speedup in parentheses, not a result),
    none for a cell not measured — no speedup anywhere — and the speedup that goes with it (the
    verdict's own for an ON cell)."""
    best = rec.best_measured if rec.verdict != "not_measured" else None
    return best, rec.speedup if rec.verdict == "on" else (best.speedup if best else None)


def stays_off(verdict: str) -> str:
    """Why a cell's speculative side is not shown: it has no ON verdict."""
    return "not measured" if verdict == "not_measured" else "stays off"


def cost_change(row: WorkloadEconomics, load: CostAtLoad) -> str:
    """Cost per 10⁶ output tokens at a cell's setting, following its verdict: "$off → $on" only
    where speculation is ON; a cell that stays off (OFF, UNDECIDED, not measured) costs what
    the baseline costs — what its best γ would cost is not a result (issue: one figure per cell)."""
    off, on = load.usd_per_million_off, load.usd_per_million_on
    if off is None:
        return "–"
    if row.verdict != "on":
        return f"${off:.3f} ({stays_off(row.verdict)})"
    return f"${off:.3f} → {num_text(on, '${:.3f}')}"


def prompts_basis_note(e: WorkloadResult, table: str) -> str | None:
    """Which prompts a cell's `table` is over, where some were degenerate (docs/theory.md §13):
    the verdict's non-degenerate ones (the analysis restricts every figure of the cell to them),
    or every prompt where none is left — said, so that no figure's prompt set goes unlabelled."""
    basis = e.recommendation.basis
    if basis is None or basis.prompts != "non_degenerate":
        return None
    n_all = basis.n_used + basis.n_degenerate_excluded
    fig = e.figures_basis
    if fig is not None and fig.prompts == "non_degenerate":
        note = (
            f"The {table}, like every figure of this cell, is over the verdict's {fig.n_prompts} "
            f"non-degenerate prompt{_s(fig.n_prompts)} ({basis.n_degenerate_excluded} of {n_all} degenerate set "
            "aside; the two prompt sets are compared in the workload's section)"
        )
        if fig.all_prompts:
            note += f"; over every prompt (no per-prompt split): {'; '.join(fig.all_prompts)}"
        return note + "."
    head = (
        f"The {table} is over all {n_all} prompts, the "
        f"{basis.n_degenerate_excluded} degenerate ones included"
    )
    if e.recommendation.verdict == "not_measured":  # no speedup shown (`no_verdict`)
        return head + "."
    return (
        head + f"; the verdict rests on the {basis.n_used} non-degenerate ones (the "
        "prompt sets are compared in the workload's section)."
    )


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def prompts_basis_tag(e: WorkloadResult) -> str | None:
    """One line for a table that lists several cells (cost, load): the prompts a cell's row
    covers, where some of its prompts were degenerate; None where every prompt counts."""
    basis = e.recommendation.basis
    if basis is None or basis.prompts != "non_degenerate":
        return None
    n_all = basis.n_used + basis.n_degenerate_excluded
    fig = e.figures_basis
    where = f"{e.workload} T={e.temperature:g}"
    if fig is not None and fig.prompts == "non_degenerate":
        text = (
            f"{where}: over its {fig.n_prompts} non-degenerate prompt{_s(fig.n_prompts)} of {n_all}"
        )
        return text + (f" ({'; '.join(fig.all_prompts)}: every prompt)" if fig.all_prompts else "")
    return (
        f"{where}: over all {n_all} prompts, the {basis.n_degenerate_excluded} degenerate included"
    )


def counts_line(results: RunResults) -> str:
    """Cells decided, not measured, and failed units — on the first screen, never hidden below."""
    entries = results.workloads
    verdicts = [e.recommendation.verdict for e in entries]
    failed = sum(e.failed_units for e in entries)
    return (
        f"{len(entries)} workload × temperature cells: {verdicts.count('on')} ON, "
        f"{verdicts.count('off')} OFF, {verdicts.count('undecided')} UNDECIDED, "
        f"{verdicts.count('not_measured')} not measured; "
        f"{failed} failed unit(s) (prompt × setting)"
        + (f", {len(results.failures)} unresolved" if failed else "")
    )


def _flags(d: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (d or {}).items() if v is not None and v != {})


def _json(d: dict[str, Any] | None) -> str:
    """A speculative_config as the JSON `--speculative-config` takes."""
    return json.dumps(d, ensure_ascii=False, separators=(", ", ": ")) if d else ""


def engine_header(results: RunResults) -> str | None:
    """The engine, its version and flags (env.json of a vllm / openai run); None otherwise."""
    env = results.env
    backend = results.run.backend or env.backend
    if backend == "vllm":
        return (
            f"Engine: vLLM {env.vllm or '?'} (in-process), device {env.device}"
            f"{' (' + str(env.gpu) + ')' if env.gpu else ''}; engine args: "
            f"{_flags(env.engine_args) or '–'}; speculative_config (γ grid): "
            + (
                " | ".join(_json(c) for c in env.speculative_config)
                if isinstance(env.speculative_config, list)
                else _json(env.speculative_config) or "–"
            )
            + "."
        )
    if backend == "openai":
        info = env.server_info or {}
        servers = []
        for s in env.servers or []:
            own = info.get(s.url) if s.url is not None else None
            meta: dict[str, Any] = own or next(
                (v for k, v in info.items() if str(k).startswith(str(s.url))), {}
            )
            version = meta.get("server_version")  # the server's own metadata, free-form
            servers.append(
                f"{s.url} γ={s.gamma} ({s.label or ('baseline' if not s.gamma else '–')}"
                + (f", version {version}" if version else "")
                + (f", model {meta.get('model')}" if meta.get("model") else "")
                + ")"
            )
        return (
            "Engine: OpenAI-compatible server(s) "
            + ("; ".join(servers) or "–")
            + f"; chat {env.chat}, prompt_format {env.prompt_format}."
        )
    return None


_GAMMA = re.compile(r"\s*(?:at )?γ=(\d+)\s*:?\s*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?%?")


def grouped_warnings(results: RunResults) -> list[tuple[int | None, str, list[str]]]:
    """Each warning once: (the γ it concerns or None, its wording, the cells it applies to).
    Warnings that differ only in their figures are one line: the figures that vary become "…" in
    the wording and are listed with each cell — "accepted/proposed is 0.33 at γ=8" in eight
    workloads becomes one line under γ=8 naming the eight with their rates."""
    groups: dict[tuple[int | None, str], list[tuple[str, str, list[str]]]] = {}
    for e in results.workloads:
        cell = f"{e.workload} T={e.temperature:g}"
        for w in dict.fromkeys(e.warnings):
            m = _GAMMA.search(w)
            gamma = int(m.group(1)) if m else None
            text = (w[: m.start()] + " " + w[m.end() :]).strip() if m else w
            key = (gamma, _NUMBER.sub("#", text))
            groups.setdefault(key, []).append((cell, text, _NUMBER.findall(text)))
    out = []
    for (gamma, _), members in groups.items():
        numbers = [nums for _, _, nums in members]
        varying = [i for i in range(len(numbers[0])) if len({n[i] for n in numbers}) > 1]
        parts = _NUMBER.split(members[0][1])
        text = parts[0] + "".join(
            ("…" if i in varying else numbers[0][i]) + parts[i + 1] for i in range(len(numbers[0]))
        )
        cells = [
            f"{cell} ({', '.join(nums[i] for i in varying)})" if varying else cell
            for cell, _, nums in members
        ]
        out.append((gamma, text, cells))
    return out


def short_rule(run: RunInfo) -> str:
    """The decision rule in one sentence, with its nominal error rates (full text: decision_rule)."""
    a = (1 - run.ci_level) / 2
    return (
        f"ON only where the simultaneous {1 - a:.1%} lower bound of the speedup exceeds "
        f"1 + {run.margin}, OFF only where every upper bound is below it (each wrong at most "
        f"{a:.1%} of the time); otherwise UNDECIDED (docs/theory.md §8)."
    )


def decision_warnings(results: RunResults) -> list[str]:
    """Warnings that bear on the decision — about every setting, or about a recommended γ (the
    pool's or a workload's own) — once each; the rest are counted and left to the appendix."""
    deployed: set[int | None] = {g.gamma for g in results.global_.by_temperature}
    deployed |= {e.recommendation.gamma for e in results.workloads}
    shown, rest = [], 0
    for gamma, text, cells in grouped_warnings(results):
        if gamma is None or gamma in deployed:
            where = f"γ={gamma}: " if gamma is not None else ""
            shown.append(f"⚠ {where}{text} — {', '.join(cells)}")
        else:
            rest += 1
    if rest:
        shown.append(
            f"{rest} further warning(s) concern settings not recommended: see the appendix."
        )
    return shown
