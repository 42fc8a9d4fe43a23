"""Run records as pandas DataFrames: the tables the analysis groups and aggregates.

- `records_frame`: one row per record (a prompt × setting unit, a failure, an engine batch), its
  unit key (`UNIT_KEY`: workload, temperature, drafter, policy, γ, prompt, repeat, concurrency),
  its kind,
  its position in the file and the record itself (`record`, the JSON object as written);
- `rounds_frame`: one row per speculative round of the transformers backend's spec records
  (γ asked, tokens drafted and accepted, verify and harness ms, the summed draft-step ms).

The statistics (`analysis.stats.resampling`) take numpy arrays; these tables only select and group.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from specbench.record_line import RecordLine

UNIT_COLUMNS = [
    "unit_kind",
    "workload",
    "temperature",
    "kind",
    "drafter",
    "policy",
    "gamma",
    "prompt_id",
    "repeat",
    "concurrency",
]
# what makes a unit unique in a run (`records.UnitKey`, plus the engine backends' concurrency)
UNIT_KEY = [c for c in UNIT_COLUMNS if c != "kind"]
SETTING_COLUMNS = ["drafter", "policy", "gamma"]  # a speculative setting (`setting.SettingKey`)
ROUND_COLUMNS = [
    "workload",
    "temperature",
    "drafter",
    "policy",
    "setting_gamma",
    "prompt_id",
    "repeat",
    "round",
    "gamma",
    "drafted",
    "accepted",
    "verify_ms",
    "overhead_ms",
    "draft_ms",
]


def records_frame(records: Sequence[RecordLine]) -> pd.DataFrame:
    """One row per record, in file order (`pos`). `policy` is as written ("" for a baseline);
    `concurrency` is 0 on the transformers backend (it has none)."""
    rows = [
        {
            "pos": i,
            "unit_kind": rec.get("unit_kind"),
            "workload": rec.get("workload"),
            "temperature": float(rec["temperature"]) if "temperature" in rec else None,
            "kind": rec.get("kind"),
            "drafter": rec.get("drafter", ""),
            "policy": rec.get("policy", ""),
            "gamma": int(rec.get("gamma", 0)),
            "prompt_id": rec.get("prompt_id"),
            "repeat": int(rec.get("repeat", 0)),
            "concurrency": int(rec.get("concurrency") or 0),
            "record": rec,
        }
        for i, rec in enumerate(records)
    ]
    return pd.DataFrame(rows, columns=["pos", *UNIT_COLUMNS, "record"])


def rounds_frame(records: Sequence[RecordLine]) -> pd.DataFrame:
    """One row per round of the spec records that carry per-round data (transformers backend).
    `setting_gamma` is the setting's γ (a policy's largest), `gamma` the γ the round asked for
    and `drafted` what it drafted (fewer at the end of the answer, 0 on an n-gram miss)."""
    rows = []
    for rec in records:
        rd = rec.get("rounds")
        if rec.get("kind") != "spec" or not rd:
            continue
        head = (
            rec["workload"],
            float(rec["temperature"]),
            rec.get("drafter", ""),
            rec.get("policy") or "fixed",
            int(rec["gamma"]),
            str(rec["prompt_id"]),
            int(rec.get("repeat", 0)),
        )
        for i, (g, k, a, v, o, d) in enumerate(
            zip(
                rd["gamma"],
                rd["drafted"],
                rd["accepted"],
                rd["verify_ms"],
                rd["overhead_ms"],
                rd["draft_ms"],
                strict=True,
            )
        ):
            rows.append((*head, i, g, k, a, v, o, float(sum(d))))
    return pd.DataFrame(rows, columns=ROUND_COLUMNS)
