"""The results.json `conformance` section: an engine run checked against its transformers
reference run (`conformance.reference_run`), with greedy outputs compared at T = 0 and the
setting differences that point at a cause when acceptance falls short."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from specbench.analysis.conformance.decision import Measured, judge, measure
from specbench.analysis.conformance.units import engine_units, reference_units
from specbench.analysis.documents.results_model_engine import Conformance, GreedyOutputs
from specbench.analysis.serving.serving_acceptance import request_counts
from specbench.config import ConformanceSpec, DecisionSpec
from specbench.config.stored import (
    StoredConfig,
    StoredConformance,
    StoredDecision,
    StoredModel,
    StoredSampling,
    StoredServer,
    StoredSpeculative,
)
from specbench.errors import SpecbenchError
from specbench.record_line import RecordLine

_DECISION, _CONFORMANCE = DecisionSpec(), ConformanceSpec()  # the defaults of unset keys

CAUSES = {
    "chat_template": "chat template: the engine renders prompts differently from the reference "
    "(a server's own template with server.chat, a BOS token added twice with prompt_format text, "
    "chat_template settings that differ) — compare prompt token counts",
    "sampling": "sampling mismatch: temperature, top_p, top_k, penalties or seeds differ; vLLM "
    "drafts greedily by default (speculative draft_sample_method 'greedy' treats q as one-hot), "
    "which at T > 0 accepts less than exact speculative sampling — set "
    "speculative.options.draft_sample_method: probabilistic",
    "dtype": "dtype: the engine runs the pair in a lower precision (bf16/fp16) than the "
    "reference, or quantized; near-ties flip and acceptance drops",
    "draft_config": "draft config: another draft checkpoint or revision, its own max_model_len, "
    "tensor-parallel size or quantization, or a tokenizer/vocabulary that differs from the target's",
}


def greedy_outputs(
    records: list[RecordLine], ref_records: list[RecordLine], workload: str, gamma: int
) -> GreedyOutputs | None:
    """At T = 0: engine γ outputs identical to the reference's target-only greedy outputs."""
    ref = {
        r["prompt_id"]: r["output_ids"][0]
        for r in ref_records
        if r.get("kind") == "baseline"
        and r["workload"] == workload
        and float(r["temperature"]) == 0.0
        and r.get("output_ids")
        and int(r.get("repeat", 0)) == 0
    }
    eng = [
        r
        for r in records
        if r.get("kind") == "spec"
        and r["workload"] == workload
        and float(r["temperature"]) == 0.0
        and int(r["gamma"]) == gamma
        and r.get("output_ids")
        and int(r.get("repeat", 0)) == 0
        and r["prompt_id"] in ref
    ]
    if not eng:
        return None
    c_ref = min(int(r.get("concurrency", 1)) for r in eng)
    pairs = [
        (r["output_ids"][0], ref[r["prompt_id"]])
        for r in eng
        if int(r.get("concurrency", 1)) == c_ref
    ]
    return GreedyOutputs(n=len(pairs), identical=sum(1 for a, b in pairs if list(a) == list(b)))


def setting_mismatches(config: StoredConfig, ref_config: StoredConfig) -> list[tuple[str, str]]:
    """(cause key, what differs) between the engine run's config and the reference's."""
    out: list[tuple[str, str]] = []
    s, rs = config.sampling or StoredSampling(), ref_config.sampling or StoredSampling()
    for key in ("top_p", "top_k"):
        if getattr(s, key) != getattr(rs, key):
            out.append(
                ("sampling", f"sampling.{key} {getattr(s, key)} vs reference {getattr(rs, key)}")
            )
    for key in ("max_new_tokens", "stop"):
        mine, ref = getattr(config, key), getattr(ref_config, key)
        if mine != ref:
            out.append(("sampling", f"{key} {mine} vs reference {ref}"))
    if config.chat_template != ref_config.chat_template:
        out.append(
            (
                "chat_template",
                f"chat_template {config.chat_template} vs reference {ref_config.chat_template}",
            )
        )
    server = config.server or StoredServer()
    if config.backend == "openai":
        if server.chat:
            out.append(("chat_template", "server.chat: true (the server applies its own template)"))
        elif (server.prompt_format or "text") == "text":
            out.append(
                ("chat_template", "server.prompt_format text (the server re-tokenizes the prompt)")
            )
    target, ref_target = config.target or StoredModel(), ref_config.target or StoredModel()
    dtype = (config.engine.dtype if config.engine else None) or target.dtype
    if config.backend == "vllm" and dtype != ref_target.dtype:
        out.append(("dtype", f"dtype {dtype} vs reference {ref_target.dtype}"))
    spec = config.speculative or StoredSpeculative()
    if isinstance(spec, list):  # several methods: the draft-model one is the one compared
        first = spec[0] if spec else StoredSpeculative()
        spec = next((x for x in spec if x.method == "draft_model"), first)
    opts = spec.options or {}
    if config.backend == "vllm" and opts.get("draft_sample_method", "greedy") == "greedy":
        temps = [t for t in (s.temperatures or []) if t > 0]
        if temps:
            out.append(("sampling", "vLLM drafts greedily (draft_sample_method greedy) at T > 0"))
    draft = spec.model or (config.draft.model if config.draft else None)
    ref_draft = ref_config.draft.model if ref_config.draft else None
    if config.backend == "vllm" and draft and ref_draft and draft != ref_draft:
        out.append(("draft_config", f"draft {draft} vs reference {ref_draft}"))
    return out


def check_against_reference(
    records: list[RecordLine],
    config: StoredConfig,
    loader: Callable[[Path], tuple[list[RecordLine], StoredConfig, object, list[str]]],
) -> Conformance | None:
    """The results.json `conformance` section, or None when no reference run is configured.
    `loader` reads a run directory (`harness.run.rundir.load_run`; its env is not read here)."""
    conf = config.conformance or StoredConformance()
    ref_dir = conf.reference_run
    if not ref_dir:
        return None
    try:
        ref_records, ref_config, _, _ = loader(Path(ref_dir))
    except SpecbenchError as exc:
        return _unavailable(str(ref_dir), str(exc))
    if (ref_config.backend or "transformers") != "transformers":
        return _unavailable(str(ref_dir), "the reference run must use the transformers backend")
    decision = config.decision or StoredDecision()
    n_boot = _DECISION.bootstrap if decision.bootstrap is None else decision.bootstrap
    level = _DECISION.ci_level if decision.ci_level is None else decision.ci_level
    min_effect = _CONFORMANCE.min_effect if conf.min_effect is None else conf.min_effect
    ref_draft = ref_config.draft or StoredModel()
    drafters = {ref_draft.name or "", ref_draft.method or "model", "model"} - {""}
    groups: dict[tuple[str, float], set[int]] = defaultdict(set)
    for r in records:
        if r.get("kind") == "spec" and request_counts(r) is not None:
            groups[(r["workload"], float(r["temperature"]))].add(int(r["gamma"]))
    measured: list[Measured] = []
    cells: list[tuple[str, float, int]] = []
    for (workload, temp), gammas in sorted(groups.items()):
        for g in sorted(gammas):
            ref = reference_units(ref_records, workload, temp, g, drafters)
            if not ref:
                continue
            eng = engine_units(records, workload, temp, g)
            # the unit is the prompt of a workload, shared by its temperatures and γ
            measured.append(measure(eng, ref, g, n_boot, level, unit_prefix=workload))
            cells.append((workload, temp, g))
    # one family over every comparison of the run: the run's status has the stated error rate
    judge(measured, 1 - level, min_effect)
    rows = []
    for (workload, temp, g), (m, _) in zip(cells, measured, strict=True):
        row = m.row(workload, temp, g)
        if temp == 0.0:
            row.greedy_outputs = greedy_outputs(records, ref_records, workload, g)
        rows.append(row)
    mismatches = setting_mismatches(config, ref_config)
    out = Conformance(
        reference_run=str(ref_dir),
        comparisons=rows,
        status="ok",
        family_wise_alpha=round(1 - level, 6),
        setting_differences=[m for _, m in mismatches],
    )
    if not rows:
        out.status = "unavailable"
        out.reason = (
            "no workload × temperature × γ measured in both runs with per-request counters "
            "(concurrency 1)"
        )
        return out
    if any(c.verdict == "shortfall" for c in rows):
        out.status = "shortfall"
        flagged = {k for k, _ in mismatches}
        # The causes the settings point at first, then the rest.
        out.causes = [CAUSES[k] for k in CAUSES if k in flagged] + [
            CAUSES[k] for k in CAUSES if k not in flagged
        ]
    return out


def _unavailable(reference_run: str, reason: str) -> Conformance:
    """A reference run that could not be read or is not a transformers run."""
    return Conformance(
        reference_run=reference_run, comparisons=[], status="unavailable", reason=reason
    )
