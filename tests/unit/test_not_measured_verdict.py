"""A cell (or a pool) with no speculative measurement has no verdict: "not_measured", never OFF
(issue 32: an engine run whose only endpoint is the baseline read OFF, "no measured γ")."""

from __future__ import annotations

from specbench.analysis.decide.recommend import recommend
from specbench.analysis.documents.results_model import RunEnv
from specbench.analysis.pipeline.results import build_results

from .test_compare import ENV, make_records, stored_config


def test_baseline_only_cell_is_not_measured() -> None:
    base = [r for r in make_records(seed=2, n_prompts=6, n_rounds=4) if r["kind"] == "baseline"]
    rec = recommend(base, {}, margin=0.05, level=0.95, n_boot=200)
    assert rec.verdict == "not_measured" and rec.speedup is None
    assert "only the baseline" in rec.reason


def test_baseline_only_run_is_not_measured_in_every_table() -> None:
    base = [r for r in make_records(seed=2, n_prompts=6, n_rounds=4) if r["kind"] == "baseline"]
    results = build_results(base, stored_config(), RunEnv.model_validate(ENV))
    (entry,) = results.workloads
    assert entry.recommendation.verdict == "not_measured"
    (pool,) = results.global_.by_temperature
    assert pool.verdict == "not_measured" and pool.not_measured == ["w"]
    assert pool.on_for == [] and pool.off_for == []


def test_a_cell_without_a_verdict_shows_no_speedup_in_the_own_pool_table() -> None:
    """A measured cell whose verdict is then withdrawn (e.g. too few non-degenerate prompts
    left, analysis/decide/validity.py) shows neither its best nor the pool's speedup."""
    from specbench.analysis.documents.results_model import RunResults
    from specbench.report.render.blocks import TableBlock
    from specbench.report.sections.decision import decision_blocks

    results = build_results(
        make_records(seed=4, n_prompts=8, n_rounds=6), stored_config(), RunEnv.model_validate(ENV)
    )

    def own_row(doc: RunResults) -> list[str]:
        tables = [b for b in decision_blocks(doc) if isinstance(b, TableBlock)]
        return list(tables[0].rows[0])

    measured = own_row(results)
    assert any("×" in cell for cell in measured), measured  # the control: a speedup is shown
    rec = results.workloads[0].recommendation
    rec.verdict, rec.reason = "not_measured", "too few prompts left"
    row = own_row(results)
    assert row[-1] == "NOT MEASURED"
    assert not any("×" in cell for cell in row), row
