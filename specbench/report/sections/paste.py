"""The line to paste: the `vllm serve` command of a measured engine setting, or of the server
without speculation (report/schedule/schedule_export.py; keys as recorded in engine-keys.json)."""

from __future__ import annotations

from typing import Any

from specbench.analysis.documents.results_model import PoolDecision, RunResults


def paste_line(results: RunResults, g: PoolDecision) -> str | None:
    """The command that starts a vLLM server with the pool's decision at one temperature (an
    engine run's ON verdict); None for other runs and verdicts."""
    return setting_paste_line(results, g.drafter, g.gamma) if g.verdict == "on" else None


def plain_paste_line(results: RunResults) -> str | None:
    """The command that starts the measured vLLM server without speculation (an engine run's
    OFF or undecided answer: serve as is); None for other runs."""
    from specbench.report.schedule.schedule_off import plain_vllm

    env, run = results.env, results.run
    if (run.backend or env.backend) not in ("vllm", "openai"):
        return None
    target = str((env.engine_args or {}).get("model") or run.target or "MODEL")
    return plain_vllm(target, env.engine_args if (run.backend or env.backend) == "vllm" else None)


def setting_paste_line(
    results: RunResults,
    drafter: str | None,
    gamma: int,
    schedule: list[list[int]] | None = None,
) -> str | None:
    """The command that starts a vLLM server with one measured setting (a fixed γ, or a γ
    schedule by batch size) of an engine run (report/schedule/schedule_export.py, keys as recorded in
    engine-keys.json); None for other runs, or where the method is not known."""
    from specbench.report.schedule.schedule_export import (
        Deployment,
        engine_keys,
        vllm_command,
        vllm_speculative_config,
    )

    env, run = results.env, results.run
    backend = run.backend or env.backend
    if backend not in ("vllm", "openai") or not gamma:
        return None
    confs = env.speculative_config
    confs = confs if isinstance(confs, list) else [confs] if confs else []
    conf = next((c for c in confs if drafter in (c.get("method"), c.get("label"))), None)
    if conf is None and confs and backend == "vllm":
        conf = confs[0]
    if conf is None:  # vllm: the setting's label; openai: the server's method, if it was named
        srv = next((x for x in env.servers or [] if x.label == drafter), None)
        method = (
            drafter
            if backend == "vllm"
            else (srv.model_extra or {}).get("method")
            if srv is not None
            else None
        )
        if method not in engine_keys().vllm.methods:
            return None  # no method known: no line rather than a wrong one
        conf = {"method": method}
    target = str((env.engine_args or {}).get("model") or run.target or "MODEL")
    dep = Deployment.from_vllm(target, conf)
    base: dict[str, Any] = {"method": dep.method, **dep.options, "num_speculative_tokens": gamma}
    if dep.draft or dep.method == "draft_model":
        # an OpenAI server's draft is whatever it serves ("as served"): not a path to paste
        known = run.draft if run.draft not in (None, "", "as served", dep.method) else None
        base["model"] = dep.draft or known or "DRAFT_MODEL"
    if schedule:  # vLLM's own schedule key (engine-keys.json)
        base = vllm_speculative_config([(int(a), int(b), int(k)) for a, b, k in schedule], base)
    # an in-process run's tensor / pipeline parallel layout is part of what was measured
    return vllm_command(target, base, env.engine_args if backend == "vllm" else None)
