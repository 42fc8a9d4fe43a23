"""The γ schedule by concurrency, rendered.

- `schedule.schedule_export`: the schedule in each engine's own configuration (`specbench schedule`)
- `schedule.schedule_plot`: throughput against concurrency per γ, and the schedule's envelope
"""
