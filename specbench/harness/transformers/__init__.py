"""`specbench run` on the transformers backend.

- `transformers.runner`: measure a pair over workloads × temperatures × γ and append records
- `transformers.batch_timing`: the batched forwards of `batch_timing`
- `transformers.adaptive`: the adaptive plan (measure only what the verdict needs)
"""
