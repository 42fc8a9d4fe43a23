"""From teacher-forced β to a rollout plan: per-bucket α with intervals, its drift along the
response, and the γ / speedup / ON-OFF verdict it implies (docs/theory.md §2–4). Pure numpy, no
models.

`specbench accept` feeds it per-request β arrays; every interval resamples requests (tokens of
one request are correlated) through `analysis.stats.resampling`, in blocks so that memory stays
O(block × requests) on large traffic logs. One module per step:

- `rollout.acceptance`: α per bucket × setting, its position profile and drift (`summarize_bucket`)
- `rollout.timing`: the time model and where it comes from (`TimeModel`, `time_model_from_*`)
- `rollout.plan`: ā(γ), speedup and verdict for γ = 1..γ_max (`plan_rollout`; the speedup model
  is in that module's docstring)
- `rollout.result`: a bucket's plans and warnings, and the whole `AcceptResult`
- `rollout.document`: the accept.json document (`accept_results` → `accept_model.AcceptResults`)
- `rollout.accept_summary`: the whole command's analysis from teacher-forced scores
  (`plan_buckets`, `time_model_resolver`, `settings_meta`)
"""

from specbench.analysis.rollout.acceptance import (
    DRIFT_MIN_REQUESTS,
    DRIFT_WARN,
    ESTIMATOR,
    BucketAcceptance,
    ProfileBin,
    Scored,
    SettingAcceptance,
    drift_ci,
    position_edges,
    summarize_bucket,
)
from specbench.analysis.rollout.document import accept_results
from specbench.analysis.rollout.plan import (
    GammaOption,
    RolloutPlan,
    break_even_alpha,
    break_even_cost,
    plan_rollout,
    predicted_speedup,
)
from specbench.analysis.rollout.result import (
    AcceptResult,
    BucketResult,
    bucket_result,
    is_provisional,
)
from specbench.analysis.rollout.timing import (
    TimeModel,
    time_model_from_flags,
    time_model_from_measurement,
    time_model_from_results,
    time_model_relative,
)

__all__ = [
    "DRIFT_MIN_REQUESTS",
    "DRIFT_WARN",
    "ESTIMATOR",
    "AcceptResult",
    "BucketAcceptance",
    "BucketResult",
    "GammaOption",
    "ProfileBin",
    "RolloutPlan",
    "Scored",
    "SettingAcceptance",
    "TimeModel",
    "accept_results",
    "break_even_alpha",
    "break_even_cost",
    "bucket_result",
    "drift_ci",
    "is_provisional",
    "plan_rollout",
    "position_edges",
    "predicted_speedup",
    "summarize_bucket",
    "time_model_from_flags",
    "time_model_from_measurement",
    "time_model_from_results",
    "time_model_relative",
]
