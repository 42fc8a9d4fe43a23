"""The decisions: ON / OFF / UNDECIDED per workload and for a pool, the validity rules they obey,
the γ schedule by concurrency, the engine ranking and the adaptive run's sequential verdict
(docs/theory.md §8, §13, §14, §15).

- `decide.recommend`: the selection-aware ON/OFF/UNDECIDED decision
- `decide.validity`: degenerate answers and the verdict without them
- `decide.pool`: one configuration for a serving pool
- `decide.gamma_schedule`, `decide.pool_schedule`: the γ schedule by concurrency (one workload; a pool)
- `decide.engine_ranking`: an engine run's ranking of every setting
- `decide.adaptive_summary`: the sequential verdict of an adaptive run's cell
"""
