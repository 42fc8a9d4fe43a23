"""The config keys of speculation under load (docs/serving.md, docs/theory.md §18): batch_timing
and the vLLM γ schedule — their bounds and refusals (one line each), and the schedule files read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specbench.config import parse_config
from specbench.errors import SpecbenchError
from specbench.harness.serving.vllm.vllm_backend import read_schedule_file

BASE: dict[str, Any] = {
    "target": {"model": "tiny-target"},
    "draft": {"model": "tiny-draft"},
    "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
}


def config(**over: Any) -> Any:
    return parse_config({**BASE, **over})


def test_batch_timing_defaults_sorted_and_bounded() -> None:
    cfg = config(batch_timing={"batch_sizes": [4, 1, 4, 2]})
    assert cfg.batch_timing is not None
    assert cfg.batch_timing.batch_sizes == [1, 2, 4] and cfg.batch_timing.repeats == 5
    for bad in ({"batch_sizes": [0]}, {"batch_sizes": [512]}, {"batch_sizes": []},
                {"batch_sizes": list(range(1, 18))}, {"repeats": 0}, {"repeats": 101}):  # fmt: skip
        with pytest.raises(SpecbenchError, match="batch_timing"):
            config(batch_timing=bad)


def test_batch_timing_needs_the_transformers_backend_and_a_model_draft() -> None:
    with pytest.raises(SpecbenchError, match="batch_timing needs backend: transformers"):
        config(backend="vllm", batch_timing={})
    with pytest.raises(SpecbenchError, match="batch_timing needs"):
        config(draft={"method": "ngram"}, batch_timing={})
    with pytest.raises(SpecbenchError, match="plan: full"):
        config(plan="adaptive", batch_timing={})


def vllm(**spec: Any) -> Any:
    return config(backend="vllm", speculative={"num_speculative_tokens": [2], **spec})


def test_schedule_follows_vllms_rules() -> None:
    assert vllm(schedule=[[5, 64, 0], [1, 4, 3]]).speculative.schedule == [(1, 4, 3), (5, 64, 0)]
    assert vllm(schedule=[[1, 2, 4], [8, 9, 1]]).speculative.schedule == [(1, 2, 4), (8, 9, 1)]
    cases = {
        "must start at batch size 1": [[2, 8, 2]],
        "overlaps": [[1, 4, 2], [4, 8, 1]],
        "needs 1 <= lo <= hi": [[1, 4, 2], [9, 5, 1]],
        "every k is 0": [[1, 8, 0]],
        "k=65": [[1, 8, 65]],
        "1 to 64": [],
    }
    for message, schedule in cases.items():
        with pytest.raises(SpecbenchError, match=message):
            vllm(schedule=schedule)


def test_schedule_refusals() -> None:
    with pytest.raises(SpecbenchError, match="not both"):
        vllm(schedule=[[1, 4, 2]], schedule_from="s.json")
    with pytest.raises(SpecbenchError, match=r"give it as speculative\.schedule"):
        vllm(options={"num_speculative_tokens_per_batch_size": [[1, 4, 2]]})
    with pytest.raises(SpecbenchError, match="measured by backend: vllm"):
        config(speculative={"schedule": [[1, 4, 2]]})


@pytest.mark.parametrize(
    "doc",
    [
        [[1, 4, 2]],
        {"num_speculative_tokens_per_batch_size": [[1, 4, 2]]},
        {"speculative_config": {"num_speculative_tokens_per_batch_size": [[1, 4, 2]]}},
        {"schedule": [[1, 4, 2]]},
    ],
)
def test_schedule_files(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps(doc))
    assert read_schedule_file(path) == [[1, 4, 2]]


def test_schedule_file_without_a_schedule(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"other": 1}))
    with pytest.raises(SpecbenchError, match="holds no schedule"):
        read_schedule_file(path)
    with pytest.raises(SpecbenchError, match="cannot read"):
        read_schedule_file(tmp_path / "missing.json")
