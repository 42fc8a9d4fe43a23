"""Statistics with no speculation in them: the resampling layer, sign-flip tests, crossed
(prompt × engine-start) intervals, multiple testing, group-sequential and normal-mixture
boundaries, quantile intervals, and the JSON form of an estimate (docs/theory.md §7, §14, §16).

- `stats.resampling`: `Estimate`, intervals over prompts, selection-aware lower bounds, sample sizes
- `stats.signflip`: sign-flip tests of a ratio of sums, inverted into bounds (the verdict's pivots)
- `stats.crossed`: intervals when engine starts are a second random factor
- `stats.multiple_testing`: Holm's adjustment and the power arithmetic of a z-test
- `stats.sequential`: the adaptive plan's group-sequential ON/OFF rule
- `stats.mixture_boundary`: the one-sided normal-mixture boundary (canary's sequences)
- `stats.latency_tails`: latency quantiles with distribution-free intervals, SLO goodput
- `stats.serialize`: JSON-ready numbers (`json_num`, `est_json`, `json_safe`)
"""
