"""The arithmetic of speculation: closed-form models with no data in them (docs/theory.md §3, §4, §15).

- `arithmetic.roi`: tokens per round, ITL, speedup, optimal γ, break-even points
- `arithmetic.timing_model`: per-round costs of speculation fitted from measured steps
- `arithmetic.batch_model`: the batch-aware step-cost model of an engine step
- `arithmetic.end_of_budget`: tokens per round near max_new_tokens
"""
