"""report.md and report.html (self-contained, images embedded) from results.json and the plots.

Both documents are rendered from one list of blocks (`report.blocks`), so they always say the same
thing: the first screen (`report.decision`), each workload's sections and the appendix
(`report.workload_sections`), and for engine runs their sections (`report.serving_sections`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.estimators.latency import LatencyDistribution
from specbench.report.render.blocks import Block, Bullets, Heading, Image, to_html, to_markdown
from specbench.report.run.load_csv import LOAD_CSV, load_frame
from specbench.report.run.summary_csv import summary_frame, write_csv
from specbench.report.sections import plots
from specbench.report.sections.batch_sections import (
    batch_prediction_blocks,
    prediction_check_blocks,
    schedule_blocks,
)
from specbench.report.sections.decision import decision_blocks, header_blocks
from specbench.report.sections.load_sections import load_blocks
from specbench.report.sections.mix_sections import mix_blocks
from specbench.report.sections.no_verdict import shows_speedup
from specbench.report.sections.serving_sections import engine_blocks, make_engine_plots
from specbench.report.sections.text import entry_slug
from specbench.report.sections.workload_sections import appendix_blocks, workload_blocks

# per workload × temperature: the per-request TPOT the latency histogram draws
LatencyDistributions = Mapping[tuple[str, float], LatencyDistribution]


def make_plots(run_dir: Path, results: RunResults, latency: LatencyDistributions) -> dict[str, str]:
    """Write every PNG; return {name: relative path}. `latency`: each workload × temperature's
    per-request TPOT (`analysis.estimators.latency.latency_distributions`)."""
    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    entries = results.workloads
    made: dict[str, str] = {}
    plots.plot_alpha(out / "alpha.png", entries)
    made["alpha"] = "plots/alpha.png"
    plots.plot_per_position(out / "per_position.png", entries)
    made["per_position"] = "plots/per_position.png"
    plots.plot_verify_fit(out / "verify_fit.png", entries)
    made["verify_fit"] = "plots/verify_fit.png"
    for e in entries:
        slug = entry_slug(e)
        if shows_speedup(e):  # a cell without a verdict draws no speedup
            plots.plot_speedup(out / f"speedup_{slug}.png", e)
            made[f"speedup_{slug}"] = f"plots/speedup_{slug}.png"
        if e.per_prompt_alpha and e.per_prompt_alpha.values:
            plots.plot_prompt_alpha(out / f"alpha_prompts_{slug}.png", e)
            made[f"alpha_prompts_{slug}"] = f"plots/alpha_prompts_{slug}.png"
        dist = latency[(e.workload, e.temperature)]
        plots.plot_latency_distribution(
            out / f"latency_{slug}.png", e, dist.baseline_ms, dist.setting_ms, dist.gamma
        )
        made[f"latency_{slug}"] = f"plots/latency_{slug}.png"
    made.update(make_engine_plots(out, results))
    return made


def build_blocks(results: RunResults, images: dict[str, str]) -> list[Block]:
    blocks: list[Block] = header_blocks(results) + decision_blocks(results)
    blocks += [
        Image(images["alpha"], "α by workload"),
        Image(images["per_position"], "per-position acceptance"),
        Image(images["verify_fit"], "verify time fit"),
    ]
    for e in results.workloads:
        blocks += workload_blocks(e, images)
    blocks += engine_blocks(results, images)  # vllm / openai runs, conformance
    blocks += load_blocks(results)  # engine runs: tails and SLO goodput per load point
    blocks += mix_blocks(results)  # engine runs with a profile: the mix under steady load
    blocks += schedule_blocks(results)  # vllm runs with speculative.schedule
    blocks += batch_prediction_blocks(results) + prediction_check_blocks(results)  # §18
    if results.failures:
        blocks.append(Heading("Failures"))
        blocks.append(
            Bullets(
                [f"{f.workload} γ={f.gamma} {f.prompt_id}: {f.error}" for f in results.failures]
            )
        )
    return blocks + appendix_blocks(results)


def write_documents(run_dir: Path, results: RunResults, latency: LatencyDistributions) -> None:
    """Write plots/, report.md and report.html of a run from its typed results."""
    images = make_plots(run_dir, results, latency)
    blocks = build_blocks(results, images)
    (run_dir / "report.md").write_text(to_markdown(blocks))
    title = f"specbench report: {results.run.name}"
    (run_dir / "report.html").write_text(to_html(blocks, run_dir, title))


def write_run_files(run_dir: Path, results: RunResults, latency: LatencyDistributions) -> None:
    """Everything a run directory shows beside results.json: summary.csv, the load cells' CSV
    (engine runs), plots/, report.md and report.html."""
    write_csv(run_dir / "summary.csv", summary_frame(results))
    if (load := load_frame(results)) is not None:  # engine runs: one row per load cell
        write_csv(run_dir / LOAD_CSV, load)
    write_documents(run_dir, results, latency)
