"""The γ schedule by concurrency, rendered.

- `schedule.engine_keys`: the engines' recorded configuration keys (engine-keys.json), one model
- `schedule.schedule_export`: the schedule in each engine's own configuration (`specbench schedule`)
- `schedule.parallel_layout`: the measured parallel layout in SGLang's and TensorRT-LLM's own keys
- `schedule.schedule_plot`: throughput against concurrency per γ, and the schedule's envelope
"""
