"""The report of the shipped example run (docs/example-run), regenerated: the HTML opens on the
decision box, the appendix holds what the decision does not need first, warnings appear once, and
`report --gpu-hour-usd` prices the run with the one cost formula."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from specbench.analysis.documents.results_model import RunResults
from specbench.cli.app import app
from specbench.report.sections.text import setting_label

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"})


class _Outline(HTMLParser):
    """The body's top-level elements in order, and the text inside section#decision."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[tuple[str, dict[str, str | None]]] = []
        self.depth = 0
        self.in_decision = 0
        self.decision_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("html", "head", "body", "meta", "title", "style", "img"):
            if tag == "img" and self.depth == 0:
                self.order.append((tag, dict(attrs)))
            return
        if self.depth == 0:
            self.order.append((tag, dict(attrs)))
        if self.in_decision or dict(attrs).get("id") == "decision":
            self.in_decision += 1
        self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("html", "head", "body", "meta", "title", "style", "img"):
            return
        self.depth -= 1
        if self.in_decision:
            self.in_decision -= 1

    def handle_data(self, data: str) -> None:
        if self.in_decision:
            self.decision_text.append(data)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    run = tmp_path_factory.mktemp("ex") / "run"
    shutil.copytree(ROOT / "docs" / "example-run", run)
    res = runner.invoke(
        app, ["--plain", "report", str(run), "--gpu-hour-usd", "3.6", "--gpus", "2"]
    )
    assert res.exit_code == 0, res.output
    assert res.output.isascii()  # plain: ASCII only
    (run.parent / "console.txt").write_text(res.output)
    return run, json.loads((run / "results.json").read_text())


@pytest.mark.slow
def test_html_opens_on_the_decision_box(example: tuple[Path, dict[str, Any]]) -> None:
    run, results = example
    outline = _Outline()
    outline.feed((run / "report.html").read_text())
    tags = [t for t, _ in outline.order]
    # the title and the header paragraph(s), then the decision box before any table or image
    assert tags[0] == "h1"
    first_section = tags.index("section")
    assert set(tags[1:first_section]) == {"p"}
    assert outline.order[first_section][1].get("id") == "decision"
    # a table sits in its scrolling box (div.table: the page fits a 1366-px window)
    first_table = next(
        i for i, (t, a) in enumerate(outline.order) if t == "table" or a.get("class") == "table"
    )
    assert first_section < first_table and first_section < tags.index("img")
    text = " ".join(" ".join(outline.decision_text).split())
    for g in RunResults.model_validate(results).global_.by_temperature:
        head = f"T = {g.temperature:g}: "
        if g.verdict == "on":
            assert f"{head}ON at {setting_label(g)} for all traffic" in text
        elif g.verdict == "off":
            assert f"{head}OFF for all traffic" in text
        elif g.verdict == "undecided":
            assert f"{head}UNDECIDED" in text and "keep speculation off" in text
        else:
            assert f"{head}not measured" in text
    cells = len(results["workloads"])
    assert f"{cells} workload × temperature cells" in text and "failed unit(s)" in text


@pytest.mark.slow
def test_appendix_holds_estimators_and_each_warning_once(
    example: tuple[Path, dict[str, Any]],
) -> None:
    run, results = example
    md = (run / "report.md").read_text()
    appendix = md.index("## Appendix: estimators, fits and predictions")
    assert md.index("α estimators:") > appendix and md.index("T_t(k) =") > appendix
    assert "predicted (iid)" not in md[: md.index("## tiny_code (T = 0)")]
    low_rate = [w for e in results["workloads"] for w in e["warnings"] if "accepted/proposed" in w]
    assert low_rate  # the example run has the warning (in one cell or several: it is measured)
    # … listed once in the appendix with every cell (and at most once more on the first screen,
    # when it concerns a recommended γ)
    assert md[appendix:].count("accepted/proposed is") == 1
    assert md[:appendix].count("accepted/proposed is") <= 1
    line = next(x for x in md[appendix:].splitlines() if "accepted/proposed is" in x)
    assert len(re.findall(r"T=\d", line)) == len(low_rate)


@pytest.mark.slow
def test_report_prices_the_run(example: tuple[Path, dict[str, Any]]) -> None:
    run, results = example
    econ = results["economics"]
    assert econ["gpu_hour_usd"] == 3.6 and econ["gpus"] == 2
    for e, row in zip(results["workloads"], econ["by_workload"], strict=True):
        itl = e["recommendation"]["itl_ms"]
        load = row["loads"][0]
        # $3.6/h × 2 = $0.002/s; at ITL ms per token: 0.002 × ITL/1000 × 10⁶ = 2·ITL dollars
        assert load["usd_per_million_off"] == pytest.approx(2 * itl["baseline"], rel=1e-5)
        if e["recommendation"]["verdict"] == "on":
            assert load["usd_per_million_on"] == pytest.approx(2 * itl["speculative"], rel=1e-5)
        assert row["draft_memory_mb"] is None  # a CPU run cannot separate the draft's memory
        tails = e["baseline_tails"]
        assert tails["n"] == e["n_prompts"] and tails["tpot_ms"]["p50"] > 0
        assert tails["tpot_ms"]["p90"] is None  # 4 prompts: no honest p90
    md = (run / "report.md").read_text()
    assert "GPU-hour $3.6 × 2 GPU(s)" in md
    # --plain: the console spells 10⁶ and × in ASCII
    assert "Cost per 10^6 output tokens ($3.6/GPU-hour x 2" in " ".join(
        (run.parent / "console.txt").read_text().split()
    )


def test_engine_run_first_screen_prices_and_tails_each_concurrency(tmp_path: Path) -> None:
    """A synthetic vLLM run (TPOT 10 → 5 ms at c=1, 12 → 12.6 ms at c=8; batch output tokens/s
    100 → 200 at c=1, 600 → 570 at c=8): cost per load from the batch throughput, tails per load."""
    import yaml

    from specbench.cli.report import write_reports
    from tests.unit.test_engine_metrics import synthetic_engine_run

    (tmp_path / "records.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in synthetic_engine_run())
    )
    cfg = {
        "backend": "vllm",
        "name": "eng",
        "target": {"model": "t"},
        "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
        "concurrency": [1, 8],
        "gammas": [3],
        "decision": {"bootstrap": 300},
        "economics": {"gpu_hour_usd": 3.6},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "env.json").write_text(
        json.dumps({"backend": "vllm", "vllm": "0.32.0", "device": "cpu",
                    "engine_args": {"enforce_eager": True}})
    )  # fmt: skip
    write_reports(tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    loads = results["economics"]["by_workload"][0]["loads"]
    assert [x["concurrency"] for x in loads] == [1, 8]
    # $1/h-equivalent: $0.001/s ÷ (tokens/s) × 10⁶
    assert loads[0]["usd_per_million_off"] == pytest.approx(10.0)
    assert loads[0]["usd_per_million_on"] == pytest.approx(5.0)
    assert loads[1]["usd_per_million_on"] == pytest.approx(1e3 / 570)
    c8 = next(c for c in results["workloads"][0]["engine"]["concurrency"] if c["concurrency"] == 8)
    assert c8["gammas"]["3"]["tails"]["tpot_ms"]["p90"] is not None  # 12 requests: p90 allowed
    md = (tmp_path / "report.md").read_text()
    assert md.index("> **Decision") < md.index("## Engine: speedup against concurrency")
    assert "Engine: vLLM 0.32.0 (in-process)" in md and "enforce_eager=True" in md
    row8 = next(x for x in md.splitlines() if x.startswith("| w | 0 | γ=3 | 8 |"))
    assert "$1.667 → $1.754" in row8
