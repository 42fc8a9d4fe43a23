"""`batch_timing` on the tiny pair: batched verify/draft records per workload × b × repetition,
--resume measuring only what is missing, and the predicted throughput by batch size in results.json
(docs/theory.md §18)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from specbench.cli.report import write_reports
from specbench.config import parse_config
from specbench.harness.transformers import runner
from specbench.records import BatchTimingRecord, read_records, read_typed_records
from tests.harness.test_runner import tiny_config

TIMING = {"batch_sizes": [1, 2], "repeats": 2, "warmup": 0}


@pytest.fixture(scope="module")
def session(tiny_pair):  # type: ignore[no-untyped-def]
    cfg = parse_config(tiny_config(Path("unused")))
    return tiny_pair.session(cfg)


def test_batch_timing_records_resume_and_prediction(tmp_path: Path, session) -> None:  # type: ignore[no-untyped-def]
    cfg = parse_config(tiny_config(tmp_path, batch_timing=TIMING, decision={"bootstrap": 200}))
    runner.run(cfg, tmp_path, session=session)
    path = tmp_path / "batch_timing.jsonl"
    typed = read_typed_records(path)
    assert all(isinstance(r, BatchTimingRecord) for r in typed)
    recs = [r for r in typed if isinstance(r, BatchTimingRecord)]
    assert sorted((r.batch_size, r.repeat) for r in recs) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert all(r.gammas == [0, 1, 3] and len(r.verify_ms) == 3 for r in recs)
    assert all(ms > 0 for r in recs for ms in [r.draft_ms, *r.verify_ms])
    # the cache length: median rendered prompt + half the answer budget
    lengths = [r["prompt_tokens"][0] for r in read_records(tmp_path / "records.jsonl")]
    assert {r.context_len for r in recs} == {int(statistics.median(lengths)) + 10 // 2}
    # the decoding records are untouched by the timing
    assert {r["kind"] for r in read_records(tmp_path / "records.jsonl")} == {"baseline", "spec"}

    # --resume measures only the (b, repetition) it has no record of
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))
    runner.run(cfg, tmp_path, resume=True, session=session)
    again = read_records(path)
    assert len(again) == 4
    assert sorted((r["batch_size"], r["repeat"]) for r in again) == [(1, 0), (1, 1), (2, 0), (2, 1)]

    write_reports(tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    (entry,) = results["batch_prediction"]["entries"]
    assert entry["gamma_max"] == 3 and entry["repeats"] == 2
    cells = {(c["batch_size"], c["gamma"]): c for c in entry["cells"]}
    assert set(cells) == {(b, g) for b in (1, 2) for g in (0, 1, 3)}
    assert all(cells[(b, 0)]["speedup_vs_off"]["value"] == 1.0 for b in (1, 2))
    # ā(1) ≤ ā(3) by truncation of the same rounds; each at least one token per step
    a1 = cells[(1, 1)]["tokens_per_step"]["value"]
    a3 = cells[(1, 3)]["tokens_per_step"]["value"]
    assert 1.0 <= a1 <= a3 <= 4.0
    assert "Predicted throughput by batch size" in (tmp_path / "report.md").read_text()
