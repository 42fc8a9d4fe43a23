"""The adaptive plan on the tiny pair (harness/transformers/adaptive.py, docs/theory.md §14): its steps, the
plan step on every record, resume continuing the same plan, report reproducing its verdict, and
the target-forward counter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.analysis.decide.adaptive_summary import cell_decision, sequence_settings
from specbench.analysis.stats.sequential import FUTILITY_FROM, MIN_PROMPTS
from specbench.cli.report import write_reports
from specbench.config import parse_config
from specbench.config.stored import StoredConfig
from specbench.errors import SpecbenchError
from specbench.harness.plan.plan import Unit
from specbench.harness.transformers import runner
from specbench.harness.transformers.adaptive import PILOT_PROMPTS, predictions, run_adaptive
from specbench.records import UnitKey, read_records
from specbench.setting import Setting


def tiny_config(out: Path, **over: object) -> dict:
    cfg = {
        "name": "t",
        "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
        "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 4}],
        "sampling": {"temperatures": [1.0]},
        "gammas": [1, 2, 4],
        "max_new_tokens": 8,
        "warmup": 0,
        "plan": "adaptive",
        "adaptive": {"max_candidates": 2},
        "output_dir": str(out),
    }
    cfg.update(over)
    return cfg


@pytest.fixture(scope="module")
def session(tiny_pair):  # type: ignore[no-untyped-def]
    cfg = parse_config(tiny_config(Path("unused")))
    return tiny_pair.session(cfg)


def test_plan_steps_candidates_resume_and_report(tmp_path: Path, session) -> None:  # type: ignore[no-untyped-def]
    # futility off: the resumed run below must replay to the same end (a futility stop after a
    # re-measured prompt could differ); test_futility_state_… covers the stop
    cfg = parse_config(tiny_config(tmp_path, adaptive={"max_candidates": 2, "futility": False}))
    out = run_adaptive(cfg, tmp_path, session=session)
    recs = read_records(tmp_path / "records.jsonl")
    assert out.written == len(recs) and all(r["plan_step"] for r in recs)
    aside = {r["prompt_id"] for r in recs if r["gamma"] == 0 and r["content"][0]["degenerate"]}
    pilot = [r for r in recs if r["plan_step"] == "pilot"]
    # the pilot: baseline and γ_max on the first prompts, until PILOT_PROMPTS are usable
    assert {r["gamma"] for r in pilot} <= {0, 4}
    assert len({r["prompt_id"] for r in pilot} - aside) == PILOT_PROMPTS
    (cell,) = out.cells
    assert cell.candidates is not None and 1 <= len(cell.candidates) <= 2  # max_candidates
    chosen = {c.gamma for c in cell.candidates}
    past_pilot = {r["gamma"] for r in recs if r["kind"] == "spec" and r["plan_step"] != "pilot"}
    assert past_pilot == chosen - {4} or past_pilot == chosen  # only the candidates after it
    # every prompt measured has the baseline and every candidate (backfill pairs the pilots);
    # γ_max stays on the pilot prompts unless it was chosen; a prompt whose baseline answer is
    # degenerate gets no speculative unit (the analysis sets it aside whatever they give)
    by_prompt: dict[str, set[int]] = {}
    for r in recs:
        by_prompt.setdefault(r["prompt_id"], set()).add(r["gamma"])
    pilots = {r["prompt_id"] for r in pilot}
    for p, g in by_prompt.items():
        assert g == ({0} if p in aside else {0} | chosen | ({4} if p in pilots else set()))
    n = len(by_prompt)
    # a cap of 4 prompts has no look (the sign-flip test needs 6 at 2.5 %, docs/theory.md §14):
    # the cell runs its 4 prompts and ends undecided
    assert n == 4 and cell.state == "prompts exhausted"
    assert cell.decision is not None and cell.decision.state == "undecided"
    assert {r["plan_prompts"] for r in recs} == {4}  # the futility stop's prompt supply
    # report reproduces the verdict the plan stopped on
    write_reports(tmp_path)
    entry = json.loads((tmp_path / "results.json").read_text())["workloads"][0]
    assert cell.decision is not None
    assert entry["adaptive"]["state"] == cell.decision.state
    assert entry["adaptive"]["n_prompts"] == n
    assert entry["adaptive"]["prompts_left"] is None  # futility off
    # resume after losing the last step's records: the same plan, the same units
    keys = [UnitKey.of(r) for r in recs]
    last = (recs[-1]["prompt_id"], recs[-1]["plan_step"])
    keep = len(recs)
    while keep and (recs[keep - 1]["prompt_id"], recs[keep - 1]["plan_step"]) == last:
        keep -= 1
    lines = (tmp_path / "records.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "records.jsonl").write_text("".join(lines[:keep]))
    again = run_adaptive(cfg, tmp_path, resume=True, session=session)
    assert again.written == len(lines) - keep
    resumed = [UnitKey.of(r) for r in read_records(tmp_path / "records.jsonl")]
    assert len(resumed) == len(keys) and set(resumed) == set(keys)


def test_futility_state_is_a_function_of_the_records(tmp_path: Path, session) -> None:  # type: ignore[no-untyped-def]
    """With 8 prompts the plan may stop a cell as futile; whatever it stops on, the report states
    the same (futile included, with the prompts left), and a resumed run replays the records to
    the same state. Futility off: the cell runs until it is decided or its prompts run out."""
    wl = [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 8}]
    cfg = parse_config(tiny_config(tmp_path / "a", workloads=wl))
    (cell,) = run_adaptive(cfg, tmp_path / "a", session=session).cells
    assert cell.decision is not None
    n = len({pid for (_, _, _, pid) in cell.records})
    assert cell.state in ("on", "off", "futile", "prompts exhausted")
    assert (cell.state == "futile") == cell.decision.futile
    if cell.state == "futile":
        assert FUTILITY_FROM <= n < 8 and cell.decision.remaining == 8 - n
    write_reports(tmp_path / "a")
    entry = json.loads((tmp_path / "a" / "results.json").read_text())["workloads"][0]
    expected = "futile" if cell.decision.futile else cell.decision.state
    assert entry["adaptive"]["state"] == expected
    assert entry["adaptive"]["prompts_left"] == 8 - n
    if expected == "futile":
        assert f"the workload has {8 - n} left" in entry["adaptive"]["summary"]
    # the state is a function of the records: a resumed run measures nothing and stops on it
    again = run_adaptive(cfg, tmp_path / "a", resume=True, session=session)
    assert again.written == 0 and again.cells[0].state == cell.state
    off = parse_config(tiny_config(tmp_path / "b", workloads=wl, adaptive={"futility": False}))
    (plain,) = run_adaptive(off, tmp_path / "b", session=session).cells
    assert plain.state in ("on", "off", "prompts exhausted")
    assert plain.decision is not None and not plain.decision.futile


def test_sequential_verdict_from_records_matches_the_recorded_state(session) -> None:  # type: ignore[no-untyped-def]
    """cell_decision on too few prompts is undecided, whatever the speedup."""
    cfg = parse_config(tiny_config(Path("unused")))
    s = sequence_settings(StoredConfig.of(cfg))
    assert s.candidates == 2 and s.margin == cfg.decision.margin
    assert cell_decision([], [], s).state == "undecided"


def test_target_forwards_are_counted(session) -> None:  # type: ignore[no-untyped-def]
    """A greedy baseline of L new tokens calls the target once per token: prefill + L − 1."""
    from specbench.data import Prompt

    prompt = Prompt(id="p", workload="w", turns=["def add(a, b):"])
    base = Setting(0)
    before = session.target_forwards
    record, _ = runner.measure_unit(
        session, Unit(base, base.unit_key("w", 0.0, "p", 0), prompt), 0.0
    )
    assert record["status"] == "ok"
    assert session.target_forwards - before == record["new_tokens"]


def test_adaptive_needs_the_transformers_backend(tmp_path: Path) -> None:
    with pytest.raises(SpecbenchError, match="plan: adaptive needs backend: transformers"):
        parse_config(tiny_config(tmp_path, backend="openai", server={"url": "http://x/v1"}))


def test_policies_are_predicted_from_the_pilot_and_can_be_chosen(tmp_path: Path, session) -> None:  # type: ignore[no-untyped-def]
    """A γ policy is a candidate like a fixed γ: replayed on γ_max's pilot rounds, ranked by its
    predicted speedup; one whose max_gamma exceeds the trace's γ_max is not predicted."""
    policies = [
        {"name": "heuristic", "gamma": 2, "max_gamma": 4},
        {"name": "adaptive", "gamma": 2, "max_gamma": 8},
    ]
    # 2 prompts could never settle a verdict: futility off, or the pilot would end the cell
    adaptive = {"max_prompts": 2, "futility": False}
    cfg = parse_config(tiny_config(tmp_path, policies=policies, adaptive=adaptive))
    out = run_adaptive(cfg, tmp_path, session=session)
    (cell,) = out.cells
    pred = predictions(cfg, cell, cfg.draft)
    names = {st.policy_name for st in pred}
    assert names == {"fixed", "heuristic"}  # adaptive's max_gamma 8 > γ_max 4
    assert all(v > 0 for v in pred.values())
    ranked = sorted(pred, key=lambda st: -pred[st])
    assert cell.candidates is not None and cell.candidates[0] == ranked[0]


def test_a_degenerate_baseline_sets_its_prompt_aside_unmeasured(tmp_path: Path, tiny_pair) -> None:  # type: ignore[no-untyped-def]
    """At T = 0 the tiny pair loops on most tiny_prose prompts. A prompt whose baseline answer is
    degenerate is set aside by the analysis whatever its speculative answers say, so the plan
    runs none of them; the pilot goes on until PILOT_PROMPTS usable prompts, and a cell whose
    prompts cannot reach MIN_PROMPTS usable ones ends futile, in the run and in the report."""
    wl = [{"name": "tiny_prose", "dataset": {"name": "tiny_prose"}, "n": 6}]
    over = {"workloads": wl, "sampling": {"temperatures": [0.0]}, "max_new_tokens": 40}
    cfg = parse_config(tiny_config(tmp_path, **over))
    session = tiny_pair.session(cfg)  # this config's 40 new tokens (the module's makes 8)
    (cell,) = run_adaptive(cfg, tmp_path, session=session).cells
    recs = read_records(tmp_path / "records.jsonl")
    base = {r["prompt_id"]: r for r in recs if r["gamma"] == 0}
    aside = {p for p, r in base.items() if r["content"][0]["degenerate"]}
    assert aside  # the premise: some baselines loop
    spec_prompts = {r["prompt_id"] for r in recs if r["gamma"]}
    assert not spec_prompts & aside
    usable = len(base) - len(aside)
    write_reports(tmp_path)
    entry = json.loads((tmp_path / "results.json").read_text())["workloads"][0]
    assert entry["content"]["n_degenerate"] >= len(aside)
    assert entry["adaptive"]["state"] == ("futile" if cell.state == "futile" else cell.state)
    if usable + (6 - len(base)) < MIN_PROMPTS:
        assert cell.state == "futile" and "even if all" in entry["adaptive"]["summary"]


def test_a_forwards_budget_stops_the_plan_and_resume_spends_the_rest(
    tmp_path: Path, session
) -> None:  # type: ignore[no-untyped-def]
    """`--budget-forwards B`: every record carries its unit's target forwards (the session's
    counter), the plan stops once B are spent (over by at most the step it was in), and a
    resumed run counts what the records spent: the same budget measures nothing more, a larger
    one continues the plan."""
    wl = [
        {"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 8},
        {"name": "tiny_prose", "dataset": {"name": "tiny_prose"}, "n": 8},
    ]
    cfg = parse_config(tiny_config(tmp_path, workloads=wl, adaptive={"futility": False}))
    before = session.target_forwards
    out = run_adaptive(cfg, tmp_path, session=session, budget_forwards=150)
    recs = read_records(tmp_path / "records.jsonl")
    spent = sum(r["target_forwards"] for r in recs)
    assert all(r["target_forwards"] > 0 for r in recs)
    assert spent == session.target_forwards - before  # no warm-up here (warmup: 0)
    step = 1 + len(cfg.gammas) * 2  # a step: one prompt's baseline and candidates, or a backfill
    assert 150 <= spent < 150 + step * (cfg.max_new_tokens + 1)
    assert "budget spent" in {c.state for c in out.cells}
    write_reports(tmp_path)  # the report says which cells the budget stopped
    entries = json.loads((tmp_path / "results.json").read_text())["workloads"]
    summary = {(e["workload"], e["temperature"]): e["adaptive"]["summary"] for e in entries}
    for c in out.cells:
        stopped = summary[(c.workload, c.temp)].startswith("undecided at the budget")
        assert stopped == (c.state == "budget spent"), summary
    again = run_adaptive(cfg, tmp_path, resume=True, session=session, budget_forwards=150)
    assert again.written == 0
    more = run_adaptive(cfg, tmp_path, resume=True, session=session, budget_forwards=400)
    assert more.written > 0
    total = sum(r["target_forwards"] for r in read_records(tmp_path / "records.jsonl"))
    assert total >= 400 or all(c.state != "budget spent" for c in more.cells)


def test_under_a_budget_the_cell_nearest_a_verdict_goes_next() -> None:
    """Shortest first: every pilot in turn before any estimate, then the fewest "more prompts
    needed"; unknown
    (too few usable prompts to estimate) before any estimate; decided cells never."""
    from specbench.analysis.stats.sequential import SequentialDecision
    from specbench.harness.transformers.adaptive import Cell, nearest_first

    def cell(name: str, more: int | None, piloting: bool = False, state: str = "measuring") -> Cell:
        c = Cell(name, 1.0, [], state=state)
        c.candidates = None if piloting else [Setting(2, "model")]
        c.decision = SequentialDecision("undecided", None, [], more)
        return c

    far, near, done = cell("far", 300), cell("near", 12), cell("done", 1, state="on")
    assert nearest_first([far, near, done]) == [near]
    pilots = [cell("p1", None, piloting=True), cell("p2", None, piloting=True)]
    assert nearest_first([far, pilots[0], near, pilots[1]]) == pilots  # each pilots, in turn
    assert nearest_first([near, cell("unknown", None)])[0].workload == "unknown"
    assert nearest_first([done]) == []
