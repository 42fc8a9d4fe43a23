"""Estimators from a run's records: the tables and groups they are read as, acceptance, latency
against the baseline, the γ table's predictions, content checks and an entry's warnings.

- `estimators.tables`: records as pandas DataFrames; `SettingKey`
- `estimators.groups`: one workload × temperature and its records by role
- `estimators.acceptance`: α, τ and ā(γ) from per-round records (§2)
- `estimators.latency`: a setting's latency against the baseline, paired by prompt (§9)
- `estimators.predictions`: the γ table (ā(γ) and predicted speedup)
- `estimators.batch_prediction`, `estimators.prediction_check`: throughput by batch size, predicted
  and checked against an engine run (§18)
- `estimators.content`: content checks on one answer
- `estimators.entry_warnings`: an entry's warnings, worded once
- `estimators.request_mix`: how a logged workload's requests were sampled
"""
