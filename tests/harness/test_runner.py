"""The runner on the tiny pair: records, resume after an interruption, refusal, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.cli.run import run_incomplete
from specbench.config import parse_config
from specbench.errors import SpecbenchError
from specbench.harness.transformers import runner
from specbench.records import UnitKey, read_records


def tiny_config(out: Path, **over: object) -> dict:
    cfg = {
        "name": "t",
        "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
        "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 3}],
        "sampling": {"temperatures": [0.0]},
        "gammas": [1, 3],
        "max_new_tokens": 10,
        "warmup": 1,
        "output_dir": str(out),
    }
    cfg.update(over)
    return cfg


@pytest.fixture(scope="module")
def session(tiny_pair):  # type: ignore[no-untyped-def]
    cfg = parse_config(tiny_config(Path("unused")))
    return tiny_pair.session(cfg)


def _units(path: Path) -> list[UnitKey]:
    return [UnitKey.of(r) for r in read_records(path / "records.jsonl")]


def test_records_are_self_describing_and_complete(tmp_path: Path, session) -> None:  # type: ignore[no-untyped-def]
    cfg = parse_config(tiny_config(tmp_path))
    outcome = runner.run(cfg, tmp_path, session=session)
    recs = read_records(tmp_path / "records.jsonl")
    assert outcome.written == len(recs) == 3 * 3  # baseline + 2 γ, 3 prompts
    assert [r["kind"] for r in recs[:3]] == ["baseline", "spec", "spec"]  # prompt-major
    spec = [r for r in recs if r["kind"] == "spec"]
    for r in spec:
        assert r["schema"] == 1 and r["workload"] == "tiny_code" and r["temperature"] == 0.0
        rounds = r["rounds"]
        assert len(rounds["beta"]) == len(rounds["accepted"]) == len(rounds["verify_ms"])
        assert all(len(b) == d for b, d in zip(rounds["beta"], rounds["drafted"], strict=True))
        assert r["new_tokens"] == 1 + sum(rounds["emitted"]) == len(r["output_ids"][0])
    # greedy: speculative outputs equal the baseline's for the same prompt
    base = {r["prompt_id"]: r["output_ids"] for r in recs if r["kind"] == "baseline"}
    assert all(r["output_ids"] == base[r["prompt_id"]] for r in spec)
    # the same greedy answer, the same target log-probability (docs/theory.md §13)
    base_lp = {r["prompt_id"]: r["content"][0]["target_mean_logprob"] for r in recs[::3]}
    assert all(v is not None and v < 0 for v in base_lp.values())
    for r in spec:
        assert r["content"][0]["target_mean_logprob"] == pytest.approx(
            base_lp[r["prompt_id"]], abs=2e-4
        )
    assert len(read_records(tmp_path / "warmup.jsonl")) == 2
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["torch"] and env["transformers"] and env["device"] == "cpu"
    assert "gammas:" in (tmp_path / "config.yaml").read_text()


def test_resume_after_interruption_gives_the_same_units(tmp_path: Path, session) -> None:  # type: ignore[no-untyped-def]
    full, part = tmp_path / "full", tmp_path / "part"
    runner.run(parse_config(tiny_config(full)), full, session=session)
    with pytest.raises(KeyboardInterrupt):
        runner.run(
            parse_config(tiny_config(part)), part, session=session, stop_after=lambda n: n == 4
        )
    assert len(_units(part)) == 4
    # simulate a kill mid-write: a partial last line is dropped on resume
    with (part / "records.jsonl").open("a") as fh:
        fh.write('{"schema": 1, "kind": "spec", "workl')
    with pytest.raises(SpecbenchError, match="already holds a run"):
        runner.run(parse_config(tiny_config(part)), part, session=session)
    outcome = runner.run(parse_config(tiny_config(part)), part, session=session, resume=True)
    assert outcome.skipped == 4 and outcome.written == 5
    assert sorted(map(repr, _units(part))) == sorted(map(repr, _units(full)))


def test_resume_refuses_a_different_config_and_force_starts_over(tmp_path: Path, session) -> None:  # type: ignore[no-untyped-def]
    runner.run(parse_config(tiny_config(tmp_path)), tmp_path, session=session)
    other = parse_config(tiny_config(tmp_path, gammas=[2]))
    with pytest.raises(SpecbenchError, match="different configuration"):
        runner.run(other, tmp_path, session=session, resume=True)
    runner.run(other, tmp_path, session=session, force=True)
    assert {u.gamma for u in _units(tmp_path)} == {0, 2}


def test_a_failing_prompt_is_recorded_and_the_run_goes_on(
    tmp_path: Path, session, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    real = runner.Session.run_prompt
    failed_once: list[str] = []

    def flaky(self, prompt, temperature, gamma, seed, *args):  # type: ignore[no-untyped-def]
        if gamma == 3 and not failed_once:
            failed_once.append(prompt.id)
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(self, prompt, temperature, gamma, seed, *args)

    monkeypatch.setattr(runner.Session, "run_prompt", flaky)
    outcome = runner.run(parse_config(tiny_config(tmp_path)), tmp_path, session=session)
    assert len(outcome.failures) == 1
    recs = read_records(tmp_path / "records.jsonl")
    failed = [r for r in recs if r["kind"] == "failed"]
    assert len(failed) == 1 and "out of memory" in failed[0]["error"]
    assert sum(r["kind"] == "spec" for r in recs) == 5
    assert run_incomplete(outcome, 0.05) is not None  # 1 of 9 failed: `run` would exit 4
    # --resume retries the failed unit, and only it
    outcome = runner.run(
        parse_config(tiny_config(tmp_path)), tmp_path, session=session, resume=True
    )
    assert (outcome.written, outcome.skipped, outcome.failures) == (1, 8, [])
    assert run_incomplete(outcome, 0.05) is None
