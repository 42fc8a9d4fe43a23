"""Every method in one run (`backend: openai`): several servers at the same γ told apart by
method and label, one baseline without speculation, one ranking per workload across them all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from specbench.cli.app import app
from specbench.records import read_records
from tests.harness.test_openai_backend import FakeServer, runner, write_config


@pytest.fixture
def fleet() -> Iterator[dict[str, FakeServer]]:
    made = {
        "base": FakeServer(0, step_s=0.004),
        "draft2": FakeServer(2, step_s=0.004),  # 3 tokens per 4 ms step
        "ngram2": FakeServer(2, step_s=0.012),  # 3 tokens per 12 ms: no faster than the baseline
        "draft4": FakeServer(4, step_s=0.004),  # 5 tokens per 4 ms step
    }
    yield made
    for s in made.values():
        s.close()


FEW = [
    {"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 8}
]  # seconds, not minutes (8: the verdict needs at least 6)


def endpoints(fleet: dict[str, FakeServer]) -> list[dict[str, object]]:
    return [
        {"url": fleet["draft2"].url, "gamma": 2, "method": "draft_model"},
        {"url": fleet["ngram2"].url, "gamma": 2, "method": "ngram"},
        {"url": fleet["draft4"].url, "gamma": 4, "method": "draft_model"},
        {"url": fleet["base"].url, "gamma": 0, "method": "none"},
    ]


def test_methods_at_one_gamma_are_ranked_in_one_run(
    tmp_path: Path, fleet: dict[str, FakeServer]
) -> None:
    cfg = write_config(tmp_path, {"endpoints": endpoints(fleet)}, concurrency=[1], workloads=FEW)
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    recs = [r for r in read_records(out / "records.jsonl") if r["kind"] in ("baseline", "spec")]
    by_setting = {(r["setting"], r["method"]) for r in recs}
    assert by_setting == {
        ("baseline", "none"),
        ("draft_model γ=2", "draft_model"),
        ("ngram γ=2", "ngram"),
        ("draft_model γ=4", "draft_model"),
    }
    entry = json.loads((out / "results.json").read_text())["workloads"][0]
    ranking = entry["engine"]["ranking"]
    assert [r["label"] for r in ranking] == ["draft_model γ=4", "draft_model γ=2", "ngram γ=2"]
    assert [r["rank"] for r in ranking] == [1, 2, 3]
    # each setting's acceptance from its own server's counters, not pooled by γ: 13 tokens in
    # chunks of 5 (3 drafts, 10 accepted) at γ=4 and of 3 (5 drafts, 8 accepted) at γ=2
    tau = {r["label"]: r["mean_accepted_length"]["value"] for r in ranking}
    assert tau["draft_model γ=4"] == pytest.approx(1 + 10 / 3)
    assert tau["ngram γ=2"] == pytest.approx(1 + 8 / 5)
    # the selection-aware rule counts all three candidates, across methods
    rec = entry["recommendation"]
    assert rec["candidates"] == 3
    assert ranking[2]["speedup"]["value"] < ranking[1]["speedup"]["value"]
    assert rec["verdict"] == "on" and rec["drafter"] == "draft_model γ=4"
    assert [r["chosen"] for r in ranking] == [True, False, False]
    assert ranking[0]["clears"]
    assert entry["engine"]["chosen_setting"] == "draft_model γ=4"
    md = (out / "report.md").read_text()
    assert "Ranking of every setting" in md and "ngram γ=2" in md
    # resume: every unit is done, nothing is measured again
    before = len(read_records(out / "records.jsonl"))
    res = runner.invoke(app, ["run", str(cfg), "--resume"])
    assert res.exit_code == 0, res.output
    assert len(read_records(out / "records.jsonl")) == before


def test_run_without_a_baseline_server_is_refused(
    tmp_path: Path, fleet: dict[str, FakeServer]
) -> None:
    eps = endpoints(fleet)[:3]
    res = runner.invoke(app, ["run", str(write_config(tmp_path, {"endpoints": eps}))])
    assert res.exit_code == 2
    assert "no server without speculation" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "out").exists()  # refused before the run directory is made


@pytest.mark.parametrize(
    ("eps", "message"),
    [
        (
            [{"url": "http://127.0.0.1:9", "gamma": 2, "label": "x"}] * 2
            + [{"url": "http://127.0.0.1:9", "gamma": 0}],
            "two servers are labelled 'x'",
        ),
        (
            [{"url": "http://127.0.0.1:9", "gamma": 2, "method": "none"}],
            "method none but gamma 2",
        ),
        (
            [{"url": "http://127.0.0.1:9", "gamma": 0}, {"url": "http://127.0.0.1:8", "gamma": 0}],
            "keep one baseline",
        ),
    ],
)
def test_endpoint_mistakes_are_one_line(tmp_path: Path, eps: list[dict], message: str) -> None:
    res = runner.invoke(app, ["run", str(write_config(tmp_path, {"endpoints": eps}))])
    assert res.exit_code == 2 and message in res.output, res.output


def test_series_of_servers_keeps_same_gamma_methods_apart(
    tmp_path: Path, fleet: dict[str, FakeServer]
) -> None:
    """One server per invocation, `--resume` adding each: two methods at γ=2 both stay."""
    eps = endpoints(fleet)
    first = write_config(tmp_path, {"endpoints": [eps[3], eps[0]]}, concurrency=[1], workloads=FEW)
    assert runner.invoke(app, ["run", str(first)]).exit_code == 0
    second = write_config(tmp_path, {"endpoints": [eps[1]]}, concurrency=[1], workloads=FEW)
    res = runner.invoke(app, ["run", str(second), "--resume"])
    assert res.exit_code == 0, res.output
    stored = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert sorted(ep.get("method") or "" for ep in stored["server"]["endpoints"]) == [
        "draft_model",
        "ngram",
        "none",
    ]
    entry = json.loads((tmp_path / "out" / "results.json").read_text())["workloads"][0]
    assert {r["label"] for r in entry["engine"]["ranking"]} == {"draft_model γ=2", "ngram γ=2"}


def test_compare_matches_method_labelled_settings_across_drafts(
    tmp_path: Path, fleet: dict[str, FakeServer]
) -> None:
    """Two runs with different drafts (a draft model in one, EAGLE-3 in the other) and n-gram in
    both: compare matches the settings by label instead of refusing, and says what it matched."""
    base_ep = {"url": fleet["base"].url, "gamma": 0, "method": "none"}
    ngram = {"url": fleet["ngram2"].url, "gamma": 2, "method": "ngram"}
    runs = {}
    for name, method, draft in (("a", "draft_model", "tiny-draft"), ("b", "eagle3", "eagle-head")):
        eps = [base_ep, ngram, {"url": fleet["draft2"].url, "gamma": 2, "method": method}]
        (tmp_path / name).mkdir()
        cfg = write_config(
            tmp_path / name,
            {"endpoints": eps},
            concurrency=[1],
            workloads=FEW,
            draft={"model": draft},
            output_dir=str(tmp_path / name / "out"),
        )
        assert runner.invoke(app, ["run", str(cfg)]).exit_code == 0
        runs[name] = str(tmp_path / name / "out")
    res = runner.invoke(app, ["compare", runs["a"], runs["b"], "--show-unchanged"])
    assert res.exit_code in (0, 1, 5), res.output  # 5: one run per side is inconclusive
    text = " ".join(res.output.split())
    assert "settings matched by label: ngram γ=2" in text
    assert "only in" in text and "draft_model γ=2" in text and "eagle3 γ=2" in text
    assert "speedup (ngram γ=2)" in text, res.output
    assert "recommended setting" in text or "OFF" in text  # the chosen methods differ
