"""Report section of the profile's mix under steady-state load (results.json `mix`,
`analysis.serving.mix_batches`): one row per setting × load point over every workload's
requests, as the per-workload load table; the token shares asked, the request shares drawn with,
and the token shares the steady window achieved (docs/serving.md "The profile's mix")."""

from __future__ import annotations

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_load import MixCell, MixSection
from specbench.report.render.blocks import Block, Bullets, Heading, Para, TableBlock
from specbench.report.sections.load_sections import HEADER, load_row, steady_text


def _shares(shares: dict[str, float] | dict[str, float | None]) -> str:
    return ", ".join(f"{w} {x:.1%}" if x is not None else f"{w} –" for w, x in shares.items())


def achieved_text(mix: MixSection, c: MixCell) -> str:
    return (
        f"{c.drafter or 'baseline'} {c.load}: output-token shares achieved "
        f"{_shares(c.token_shares)} (asked {_shares(mix.token_shares)})"
    )


def mix_lines(results: RunResults) -> list[str]:
    """The first screen's lines: each mix cell's steady state and kept-up flag."""
    mix = results.mix
    if mix is None:
        return []
    return [f"mix {line}" for c in mix.cells if (line := steady_text(c)) is not None]


def mix_blocks(results: RunResults) -> list[Block]:
    mix = results.mix
    if mix is None:
        return []
    temps = ", ".join(f"T={t} {x:.1%}" for t, x in mix.temperature_shares.items())
    budgets = ", ".join(f"{w} {b:g}" for w, b in mix.mean_max_tokens.items())
    notes = [
        f"asked: output tokens {_shares(mix.token_shares)}; requests {temps}",
        f"drawn: requests {_shares(mix.request_shares)} (token share ÷ mean max_tokens: "
        f"{budgets}; answers that stop early shift the token shares)",
    ]
    for c in mix.cells:
        notes.append(achieved_text(mix, c))
        if (line := steady_text(c)) is not None:
            notes.append(line)
    return [
        Heading("Engine: the profile's traffic mix under load"),
        Para(
            "Each arrival draws a workload (by its share of requests, converted from the "
            "profile's shares of output tokens), a temperature and a prompt; every setting is "
            "sent the same draws at the same times. Columns as in the load table above, over "
            "the mix's requests (docs/serving.md \"The profile's mix\")."
        ),
        TableBlock(HEADER, [load_row(c) for c in mix.cells]),
        Bullets([*notes, *mix.warnings]),
    ]
