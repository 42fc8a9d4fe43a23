"""The wording of a results entry's warnings where the statistics set it (docs/theory.md §7)."""

from __future__ import annotations

from specbench.analysis.estimators.entry_warnings import too_few_prompts


def test_too_few_prompts_names_the_resolution_not_an_extrapolation() -> None:
    """Below 6 prompts α's interval is [0, 1] by construction: the warning asks for the test's
    resolution instead of scaling a width no data produced (4 prompts × (0.5 / 0.05)² = 400)."""
    low = too_few_prompts(4, 0.5, 0.05)
    assert low is not None and "below 6 prompts" in low and "400" not in low
    assert too_few_prompts(20, 0.1, 0.05) == (
        "too few prompts: α CI half-width 0.100 > 0.05; about 80 prompts would reach it"
    )
    assert too_few_prompts(4, 0.04, 0.05) is None
