"""What a serving engine reports about its speculation and memory.

- `metrics.metrics`: Prometheus spec-decode counters
- `metrics.request_metrics`: per-request acceptance from the engine's own response
- `metrics.engine_memory`: KV-cache capacity and the models' memory (env.json's `memory`)
"""
