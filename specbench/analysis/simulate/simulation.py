"""simulation.json's entries: per workload × temperature × drafter, each γ policy replayed on the
largest fixed-γ trace (`simulate.replay`), beside the measured result of a real run of that
policy when the run has one — built as `documents.simulation_model`'s `Simulation`.

    specbench simulate reports/tiny --policy confidence:threshold=0.5,max_gamma=6 --json
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.analysis.documents.results_model_base import est_model
from specbench.analysis.documents.simulation_model import PolicyReplay, Simulation
from specbench.analysis.estimators.latency import pair, speedup_of
from specbench.analysis.simulate.replay import (
    PolicyOptions,
    policy_for,
    replay,
    timing_from_records,
)
from specbench.decoding.policies import Policy
from specbench.record_line import RecordLine


def _predicted_speedup(row: PolicyReplay) -> float:
    """The replay's speedup, 0 where it has none (the ranking's key)."""
    return (row.predicted_speedup.value if row.predicted_speedup else None) or 0.0


def simulate_run(
    records: list[RecordLine],
    policies: Sequence[Policy | tuple[str, PolicyOptions]],
    n_boot: int = 2000,
    ngram_drafters: frozenset[str] = frozenset({"ngram"}),
) -> list[Simulation]:
    """Per workload × temperature × drafter: each policy replayed on the largest fixed-γ trace,
    beside the measured result of a real run of that policy when the run has one."""
    from specbench.analysis.estimators.groups import group_records

    out = []
    for (workload, temp), grp in group_records(records).items():
        base = grp["baseline"]
        specs = grp["spec"]
        drafters = sorted({d for d, _, _ in specs})
        for drafter in drafters:
            fixed = {g: recs for (d, p, g), recs in specs.items() if d == drafter and p == "fixed"}
            if not fixed or not base:
                continue
            gamma_max = max(fixed)
            trace = fixed[gamma_max]
            timing = timing_from_records(base, trace)
            rows = []
            wanted = [
                p if isinstance(p, Policy) else policy_for(p[0], p[1], temp, gamma_max)
                for p in policies
            ]
            not_replayed = [
                f"{p.name} (drafts up to γ={p.max_gamma})"
                for p, given in zip(wanted, policies, strict=True)
                if p.max_gamma > gamma_max and not (isinstance(given, tuple) and given[1])
            ]
            for pol in wanted:
                if any(n.startswith(f"{pol.name} (") for n in not_replayed):
                    continue  # a default that cannot fit this trace: named below, not refused
                rep = replay(
                    pol,
                    trace,
                    timing,
                    gamma_max,
                    n_boot,
                    position_level=drafter not in ngram_drafters,
                )
                row = PolicyReplay(
                    policy=pol.name,
                    gamma=pol.max_gamma,
                    predicted_tokens_per_round=est_model(rep.tokens_per_round),
                    predicted_speedup=est_model(rep.speedup),
                    mean_gamma=round(rep.mean_gamma, 3),
                    measured_tokens_per_round=None,
                    measured_speedup=None,
                )
                real = specs.get((drafter, pol.name, pol.max_gamma)) or (
                    fixed.get(pol.max_gamma) if pol.name == "fixed" else None
                )
                if real:
                    from specbench.analysis.estimators.acceptance import estimate_alpha

                    est = estimate_alpha(real, pol.max_gamma, n_boot, 0.95)
                    row.measured_tokens_per_round = est_model(est.tokens_per_round)
                    measured = est_model(speedup_of(pair(base, real), n_boot, 0.95))
                    row.measured_speedup = measured
                    if measured is not None and measured.value:
                        row.speedup_error = round(rep.speedup.value / measured.value - 1, 4)
                rows.append(row)
            rows.sort(key=_predicted_speedup, reverse=True)
            out.append(
                Simulation(
                    workload=workload,
                    temperature=temp,
                    drafter=drafter,
                    trace_gamma=gamma_max,
                    policies=rows,
                    not_replayed=not_replayed,
                )
            )
    return out
