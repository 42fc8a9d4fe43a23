"""Serving engines' measurements (`backend: vllm` / `openai`): acceptance from the engine's
counters, latency and throughput by concurrency, the schedule setting, load cells, buffered streams,
tail latency and cost.

- `serving.spec_counters`, `serving.counter_reconcile`: the spec-decode counters and their check (§17)
- `serving.serving_acceptance`: acceptance from the counters
- `serving.serving_concurrency`: latency and throughput against concurrency
- `serving.serving_schedule`: the "schedule" setting (γ by batch size)
- `serving.load_cells`, `serving.buffering`: per load point and setting; buffered streams
- `serving.mix_batches`: the profile's mix under steady-state load (its batches, its cells)
- `serving.serving_cost`: tail latency and serving economics
"""
