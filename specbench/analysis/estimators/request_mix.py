"""How a logged workload's requests were sampled (`dataset.sampling: logged`): the summary
results.json carries as `request_sampling`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis.documents.results_model_workload import MaxTokensSpread, RequestSampling
from specbench.record_line import RecordLine


def request_mix(baseline: Sequence[RecordLine]) -> RequestSampling | None:
    """One count per prompt (its first baseline record): temperatures (to 0.1) and top_p (to
    0.01) as counts, max tokens as min / median / max, and how many values came from the config
    (absent in the row) or were capped at `max_new_tokens`. None for a workload sampled with the
    config's settings."""
    first: dict[str, dict[str, Any]] = {}
    for rec in baseline:
        if rec.get("sampling") == "logged" and "request" in rec:
            first.setdefault(rec["prompt_id"], rec["request"] or {})
    if not first:
        return None
    reqs = pd.DataFrame(list(first.values()))
    logged = pd.DataFrame([r.get("logged") or {} for r in first.values()])
    logged = logged.reindex(columns=["temperature", "top_p", "max_tokens"])

    def counts(key: str, digits: int) -> dict[str, int]:
        labels = reqs[key].map(lambda v: f"{round(float(v), digits):g}")
        tally = labels.value_counts(sort=False)
        return {k: int(tally[k]) for k in sorted(tally.index, key=float)}

    max_tokens = reqs["max_tokens"].astype(int)
    capped = pd.to_numeric(logged["max_tokens"]) > reqs["max_tokens"]  # NaN (absent): False
    return RequestSampling(
        source="logged",
        prompts=len(reqs),
        temperature=counts("temperature", 1),
        top_p=counts("top_p", 2),
        max_tokens=MaxTokensSpread(
            min=int(max_tokens.min()),
            median=float(np.median(max_tokens.to_numpy())),
            max=int(max_tokens.max()),
        ),
        from_config={k: int(logged[k].isna().sum()) for k in logged.columns},
        max_tokens_capped=int(capped.sum()),
    )
