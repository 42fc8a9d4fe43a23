"""`specbench run` and `specbench report` end to end on the tiny pair, and their bad input."""

from __future__ import annotations

import base64
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app

runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def write_config(tmp_path: Path, **over: object) -> Path:
    cfg = {
        "name": "cli",
        "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
        "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
        "workloads": [
            {"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 3},
            {"name": "tiny_prose", "dataset": {"name": "tiny_prose"}, "n": 3},
        ],
        "sampling": {"temperatures": [0.0]},
        "gammas": [1, 2, 4],
        "max_new_tokens": 12,
        "warmup": 0,
        "output_dir": str(tmp_path / "out"),
    }
    cfg.update(over)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("run")
    res = runner.invoke(
        app, ["run", str(write_config(tmp)), "--temperature", "0", "--temperature", "1"]
    )
    assert res.exit_code == 0, res.output
    assert "Decision at batch 1 (one request in flight), per temperature" in res.output
    return tmp / "out"


def test_run_writes_every_output(finished_run: Path) -> None:
    for name in (
        "records.jsonl",
        "config.yaml",
        "env.json",
        "results.json",
        "summary.csv",
        "report.md",
        "report.html",
    ):
        assert (finished_run / name).stat().st_size > 0, name
    results = json.loads((finished_run / "results.json").read_text())
    entries = results["workloads"]
    assert {(e["workload"], e["temperature"]) for e in entries} == {
        ("tiny_code", 0.0), ("tiny_code", 1.0), ("tiny_prose", 0.0), ("tiny_prose", 1.0),
    }  # fmt: skip
    for e in entries:
        assert 0.0 <= e["alpha"]["value"] <= 1.0 and e["alpha"]["estimator"] == "exact_beta"
        lo, hi = e["alpha"]["ci95"]
        assert lo <= e["alpha"]["value"] <= hi
        assert e["baseline_itl_ms"]["value"] > 0
        assert [g["gamma"] for g in e["gammas"]] == [1, 2, 3, 4]
        measured = [g for g in e["gammas"] if g["measured"]]
        assert [g["gamma"] for g in measured] == [1, 2, 4]
        assert all(g["measured_speedup"]["value"] > 0 for g in measured)
        assert e["recommendation"]["verdict"] in ("on", "off", "undecided", "not_measured")
        assert (e["recommendation"]["gamma"] == 0) == (e["recommendation"]["verdict"] != "on")
    csv_lines = (finished_run / "summary.csv").read_text().strip().splitlines()
    assert len(csv_lines) == 1 + 4 * 4
    assert len(list((finished_run / "plots").glob("*.png"))) >= 3 + 2 * 4


def test_report_regenerates_results_identically(finished_run: Path) -> None:
    before = (finished_run / "results.json").read_text()
    res = runner.invoke(app, ["report", str(finished_run)])
    assert res.exit_code == 0, res.output
    assert (finished_run / "results.json").read_text() == before
    html = (finished_run / "report.html").read_text()
    results = json.loads(before)
    for e in results["workloads"]:
        assert e["workload"] in html
    assert html.count("data:image/png;base64,") >= 3 + 2 * 4
    assert any(f"<td>{v}</td>" in html for v in ("ON", "OFF", "UNDECIDED"))


def test_report_bad_inputs(tmp_path: Path, finished_run: Path) -> None:
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "has no records.jsonl" in res.stderr
    copy = tmp_path / "copy"
    copy.mkdir()
    lines = (finished_run / "records.jsonl").read_text().splitlines()
    (copy / "records.jsonl").write_text("\n".join(lines) + "\n" + lines[-1][:40])
    (copy / "config.yaml").write_text((finished_run / "config.yaml").read_text())
    res = runner.invoke(app, ["report", str(copy)])
    assert res.exit_code == 0 and "truncated" in res.output
    newer = json.loads(lines[0]) | {"schema": 99}
    (copy / "records.jsonl").write_text(json.dumps(newer) + "\n")
    res = runner.invoke(app, ["report", str(copy)])
    assert res.exit_code == 2 and "schema version 99" in res.stderr


@pytest.mark.parametrize(
    ("over", "args", "needle"),
    [
        ({"gammas": [0, 2]}, [], "gammas must all be in [1, 64]"),
        ({}, ["--gammas", "0,1"], "gammas must all be in [1, 64]"),
        ({}, ["--temperature", "-0.5"], "temperatures must be in [0, 100]"),
        ({"sampling": {"top_p": 1.5}}, [], "top_p must be in (0, 1]"),
        ({"target": {"model": "./no/such/model"}}, [], "model directory not found"),
        ({"gamas": [1]}, [], "did you mean 'gammas'"),
        ({}, ["--workloads", "nope"], "unknown workload 'nope'"),
        ({"workloads": [{"name": "x", "dataset": {"path": "missing.jsonl"}}]}, [], "missing.jsonl"),
    ],
)
def test_run_bad_input_one_line_exit_2(
    tmp_path: Path, over: dict, args: list[str], needle: str
) -> None:
    res = runner.invoke(app, ["run", str(write_config(tmp_path, **over)), *args])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.output


def test_run_refuses_a_directory_holding_another_run(finished_run: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, output_dir=str(finished_run), gammas=[3])
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 2 and "already holds a run" in res.stderr
    res = runner.invoke(app, ["run", str(cfg), "--resume"])
    assert res.exit_code == 2 and "different configuration" in res.stderr


class _HtmlInventory(HTMLParser):
    """Images (alt, src) and tables (header cells, row cell counts) of a report.html."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[tuple[str, str]] = []
        self.tables: list[dict[str, list[int] | int]] = []
        self.h2: list[str] = []
        self._in_h2 = False
        self._cells = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img":
            self.images.append((a.get("alt") or "", a.get("src") or ""))
        elif tag == "table":
            self.tables.append({"header": 0, "rows": []})
        elif tag == "th":
            self.tables[-1]["header"] += 1  # type: ignore[operator]
        elif tag == "tr":
            self._cells = 0
        elif tag == "td":
            self._cells += 1
        elif tag == "h2":
            self._in_h2 = True
            self.h2.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._cells:
            self.tables[-1]["rows"].append(self._cells)  # type: ignore[union-attr]
        elif tag == "h2":
            self._in_h2 = False

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self.h2[-1] += data


def test_report_html_has_every_image_and_table(finished_run: Path) -> None:
    """Parse report.html: every image the run made is embedded as a decodable PNG with a caption,
    every table has a header and full rows, and each workload section carries its content check,
    per-prompt α plot and γ table."""
    results = json.loads((finished_run / "results.json").read_text())
    inv = _HtmlInventory()
    inv.feed((finished_run / "report.html").read_text())
    pngs = sorted(p.name for p in (finished_run / "plots").glob("*.png"))
    assert len(inv.images) == len(pngs)
    for alt, src in inv.images:
        assert alt, "an image without alt text"
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    alts = {alt for alt, _ in inv.images}
    entries = results["workloads"]
    for e in entries:
        slug = f"{e['workload']}_T{e['temperature']:g}"
        for kind in ("α per prompt", "speedup against γ", "latency distribution"):
            # a cell without a verdict draws no speedup (report/sections/no_verdict.py)
            shown = kind != "speedup against γ" or e["recommendation"]["verdict"] != "not_measured"
            assert (f"{kind}, {slug}" in alts) == shown
        assert f"alpha_prompts_{slug}.png" in pngs
        # per-prompt α marks the degenerate prompts among every prompt (it compares the sets);
        # the entry's other figures count the prompts they cover (docs/theory.md §13)
        assert e["per_prompt_alpha"]["n_prompts"] == e["content"]["n_prompts"]
        assert e["n_prompts"] == e["figures_basis"]["n_prompts"]
    sections = [h for h in inv.h2 if "(T = " in h]
    assert len(sections) == len(entries)
    for t in inv.tables:
        assert t["header"] and t["rows"]
        assert all(n == t["header"] for n in t["rows"])  # type: ignore[union-attr]
    # first screen (own-pool table, cost and latency) + one γ table per workload, + an
    # all/non-degenerate table where answers loop, + an appendix table of unmeasured γ predictions
    degenerate = sum(1 for e in entries if e["content"]["n_degenerate"])
    unmeasured = sum(  # predictions: only for a cell with a verdict (report/sections/no_verdict.py)
        1
        for e in entries
        if any(not g["measured"] for g in e["gammas"])
        and e["recommendation"]["verdict"] != "not_measured"
    )
    assert len(inv.tables) == 2 + len(entries) + degenerate + unmeasured
    md = (finished_run / "report.md").read_text()
    assert md.count("](plots/") == len(pngs)


def test_records_carry_content_checks(finished_run: Path) -> None:
    recs = [json.loads(line) for line in (finished_run / "records.jsonl").read_text().splitlines()]
    measured = [r for r in recs if r["kind"] in ("baseline", "spec")]
    assert measured
    for r in measured:
        assert len(r["content"]) == r["turns"] == len(r["answers"])
        for c, ids, stop in zip(r["content"], r["output_ids"], r["stop_reason"], strict=True):
            assert c["tokens"] == len(ids) and c["stop_reason"] == stop
            assert c["hit_length_limit"] == (stop == "max_new_tokens")
    results = json.loads((finished_run / "results.json").read_text())
    for e in results["workloads"]:
        mine = [
            r
            for r in measured
            if r["workload"] == e["workload"] and r["temperature"] == e["temperature"]
        ]
        flagged = {r["prompt_id"] for r in mine if any(c["degenerate"] for c in r["content"])}
        assert e["content"]["n_degenerate"] >= len(flagged)
        assert {d["prompt_id"] for d in e["content"]["degenerate_prompts"]} >= flagged
