"""Seeded simulations that measure the error rates and power the verdicts claim (docs/theory.md
§10): a known truth drawn, the project's own decision run on it, the rate returned with its Monte
Carlo error. tests/unit asserts them at small replicate counts; benchmarks/bench_calibration.py
prints them at large ones.

- `calibration.traffic_family`: the realistic family the rates are claimed for
- `calibration.recommend_calibration`: intervals and the ON/OFF verdict
- `calibration.family_calibration`, `calibration.sequential_calibration`: the verdict on the family,
  fixed-n and under optional stopping
- `calibration.schedule_calibration`, `calibration.pool_calibration`: the γ schedules
- `calibration.prediction_calibration`: the γ predictions near the end of the budget
- `calibration.compare_calibration`, `calibration.conformance_calibration`: compare and conformance
"""
