"""Commands that check a claim against measurements: `verify` (losslessness), `compare` (a
regression gate for CI, with `compare_gate.py`'s calibration and plan) and `predict-check` (an
engine run against a transformers run's batch-size prediction)."""
