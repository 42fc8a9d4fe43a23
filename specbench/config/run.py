"""`RunConfig`: one flat YAML file whose keys are these fields (docs: configs/*.yaml).

The sections live in `config.sections` (what every backend reads) and `config.backends` (what
`backend: vllm` / `openai` read); this module puts them together and checks what spans several
sections: the γ grid, unique workload and drafter names, and what a backend can measure.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from specbench import defaults
from specbench.config.backends import (
    Backend,
    EngineSpec,
    ServerSpec,
    SpeculativeSpec,
    engine_defaults,
    speculative_label,
    speculative_specs,
)
from specbench.config.load import LoadSpec, SloSpec
from specbench.config.profile import MIX_WORKLOAD, DeploymentProfile
from specbench.config.sections import (
    MAX_GAMMA,
    MAX_NEW_TOKENS,
    MAX_REPEATS,
    AdaptiveSpec,
    BatchTimingSpec,
    ConformanceSpec,
    DecisionSpec,
    DraftSpec,
    EconomicsSpec,
    ModelSpec,
    PolicySpec,
    SamplingSpec,
    StrictModel,
    WorkloadSpec,
)

SCHEMA_VERSION = 1


class RunConfig(StrictModel):
    name: str = "run"  # the run's name in reports
    backend: Backend = "transformers"  # our own loop, vLLM in-process, or OpenAI-compatible servers
    target: ModelSpec  # the model whose outputs speculation must reproduce
    draft: DraftSpec  # the drafter: a smaller model, or n-gram lookup (method: ngram)
    # More drafters to measure beside `draft` (e.g. n-gram prompt lookup), each over the γ grid.
    extra_drafters: list[DraftSpec] = Field(default_factory=list)
    # γ policies to measure beside the fixed γ grid, with every drafter.
    policies: list[PolicySpec] = Field(default_factory=list)
    workloads: list[WorkloadSpec]  # prompt sets, each decided on its own and weighted in the pool
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)  # temperatures, top-p, top-k
    gammas: list[int] = Field(default_factory=lambda: list(defaults.GAMMAS))  # draft lengths tried
    max_new_tokens: int = Field(default=64, ge=1, le=MAX_NEW_TOKENS)
    stop: list[str] = Field(default_factory=list)  # stop strings (EOS always stops)
    chat_template: Literal["auto", "on", "off"] = "auto"  # auto = on when the tokenizer has one
    warmup: int = Field(default=1, ge=0, le=1_000)  # warm-up prompts per workload, reported apart
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS)  # runs of each prompt (clustered)
    # `run` exits 4 ("run incomplete") when more than this share of the prompts failed.
    max_failure_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    seed: int = Field(default=0, ge=0, lt=2**63)  # every sampled token derives from it
    # torch intra-op threads on CPU (None = torch's default). For tiny models 1 is fastest and,
    # on a busy machine, far steadier: OpenMP threads waiting on a preempted sibling turned a
    # 2 ms decode step into 60 ms here.
    cpu_threads: int | None = Field(default=None, ge=1, le=1024)
    output_dir: str = "reports/run"  # the run directory (--out overrides)
    # prompt and answer text in the run's files (data/privacy.py, docs/privacy.md): None = kept
    # for shipped and generated sets only, the user's data (path, hf_id) private; true / false
    # for every workload
    keep_text: bool | None = None
    decision: DecisionSpec = Field(default_factory=DecisionSpec)  # margin and confidence of ON/OFF
    # full: every prompt at every setting; adaptive: baseline and γ_max, then the predicted best
    # γ, stopping each cell when the sequential verdict is settled (docs/theory.md §14)
    plan: Literal["full", "adaptive"] = "full"
    adaptive: AdaptiveSpec = Field(default_factory=AdaptiveSpec)
    engine: EngineSpec = Field(default_factory=EngineSpec)  # backend: vllm
    # backend: vllm; a list measures several methods in one run
    speculative: SpeculativeSpec | list[SpeculativeSpec] = Field(default_factory=SpeculativeSpec)
    # engine backends: the numbers of requests kept in flight
    concurrency: list[int] = Field(default_factory=lambda: [1])
    load: LoadSpec = Field(default_factory=LoadSpec)  # engine backends: open-loop arrivals
    slo: SloSpec = Field(default_factory=SloSpec)  # engine backends: SLO goodput's objectives
    server: ServerSpec = Field(default_factory=ServerSpec)  # backend: openai
    conformance: ConformanceSpec = Field(default_factory=ConformanceSpec)
    economics: EconomicsSpec = Field(default_factory=EconomicsSpec)  # report only
    # where the decision is to hold: traffic mix, load, SLOs, price (config/profile.py)
    profile: DeploymentProfile | None = None
    # transformers backend: batched verify / draft timing for the batch-size prediction (§18)
    batch_timing: BatchTimingSpec | None = None

    def keeps_text(self, wl: WorkloadSpec) -> bool:
        """Does the run write `wl`'s prompt and answer text (and its raw prompt ids)?"""
        if self.keep_text is not None:
            return self.keep_text
        return bool(wl.dataset.name or wl.dataset.generate)

    @model_validator(mode="before")
    @classmethod
    def _engine_defaults(cls, data: Any) -> Any:
        return engine_defaults(data) if isinstance(data, dict) else data

    @field_validator("chat_template", mode="before")
    @classmethod
    def _yaml_switch(cls, v: Any) -> Any:
        """YAML 1.1 reads unquoted on/off/yes/no as true/false: take them as the user meant."""
        return {True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v

    @field_validator("profile", mode="before")
    @classmethod
    def _profile_switch(cls, v: Any) -> Any:
        """`profile: off` (a YAML boolean) is no profile; `profile: on` says nothing."""
        if v is False:
            return None
        if v is True:
            raise ValueError("give the profile's settings (a mapping), or off, not on/true")
        return v

    @field_validator("concurrency")
    @classmethod
    def _concurrency(cls, v: list[int]) -> list[int]:
        if not v or any(not 1 <= c <= 4096 for c in v):
            raise ValueError("concurrency needs at least one value, each in [1, 4096]")
        return sorted(set(v))

    @field_validator("gammas")
    @classmethod
    def _gammas(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("gammas needs at least one value")
        if any(not 1 <= g <= MAX_GAMMA for g in v):
            raise ValueError(f"gammas must all be in [1, {MAX_GAMMA}]")
        return sorted(set(v))

    @model_validator(mode="after")
    def _logged_sampling(self) -> RunConfig:
        logged = [w.name for w in self.workloads if w.dataset.sampling == "logged"]
        fixed = [k for k in ("temperature", "top_p", "max_tokens") if k in self.server.extra_body]
        if logged and self.backend == "openai" and fixed:  # it would override every request's
            raise ValueError(
                f"workload '{logged[0]}': dataset.sampling: logged sends each request's own "
                f"{fixed[0]}, which server.extra_body overrides; remove it from extra_body"
            )
        return self

    @model_validator(mode="after")
    def _load(self) -> RunConfig:
        if self.backend == "transformers" and (
            self.load.open_loop or self.load.steady or self.slo.any
        ):
            raise ValueError("load and slo need an engine backend (backend: vllm or openai)")
        return self

    @model_validator(mode="after")
    def _profile(self) -> RunConfig:
        """The profile names what the run measures (docs/configuration.md "Deployment profile")."""
        p = self.profile
        if p is None:
            return self
        names = [w.name for w in self.workloads]
        for w in p.traffic.workloads or {}:
            if w not in names:
                raise ValueError(
                    f"profile.traffic.workloads: '{w}' is not a workload ({', '.join(names)})"
                )
        temps = self.sampling.temperatures
        for t in p.traffic.temperatures or {}:
            if not any(abs(t - x) < 1e-9 for x in temps):
                raise ValueError(
                    f"profile.traffic.temperatures: {t:g} is not in sampling.temperatures "
                    f"({', '.join(f'{x:g}' for x in temps)})"
                )
        engine = self.backend != "transformers"
        has_load = any(x is not None for x in (p.load.rates, p.load.concurrency, p.load.trace))
        if not engine and (has_load or p.slo.any):
            raise ValueError(
                "profile.load and profile.slo need an engine backend (backend: vllm or openai); "
                "the transformers backend decides at batch 1"
            )
        for c in p.load.concurrency or {}:
            if c not in self.concurrency:
                raise ValueError(
                    f"profile.load.concurrency: {c} is not measured; add it to concurrency "
                    f"({', '.join(map(str, self.concurrency))})"
                )
        for r in p.load.rates or []:
            if r not in self.load.rates:
                raise ValueError(
                    f"profile.load.rates: {r:g} req/s is not measured; add it to load.rates"
                )
        if p.load.rates is not None and not self.load.steady:
            raise ValueError(
                "the profile's load needs a steady state: set load.duration_s or load.requests"
            )
        if p.objective == "slo_goodput" and engine and not (p.slo.any or self.slo.any):
            raise ValueError(
                "profile.objective slo_goodput needs an SLO: set profile.slo or slo "
                "(ttft_ms, tpot_ms, e2e_ms)"
            )
        if p.objective == "cost_per_mtok" and (
            p.price.gpu_hour_usd is None and self.economics.gpu_hour_usd is None
        ):
            raise ValueError(
                "profile.objective cost_per_mtok needs a price: set profile.price.gpu_hour_usd "
                "or economics.gpu_hour_usd"
            )
        return self

    @model_validator(mode="after")
    def _adaptive_backend(self) -> RunConfig:
        if self.plan == "adaptive" and self.backend != "transformers":
            raise ValueError("plan: adaptive needs backend: transformers (it reads every round)")
        return self

    @model_validator(mode="after")
    def _batch_timing(self) -> RunConfig:
        if self.batch_timing is not None and (
            self.backend != "transformers" or self.draft.method != "model" or self.plan != "full"
        ):
            raise ValueError(
                "batch_timing needs backend: transformers, plan: full and a model draft "
                "(draft.method: model)"
            )
        return self

    @model_validator(mode="after")
    def _interleave(self) -> RunConfig:
        if self.engine.interleave and (self.backend == "transformers" or self.repeats < 2):
            raise ValueError(
                "engine.interleave needs an engine backend and repeats >= 2 (each repeat starts "
                "every engine once)"
            )
        return self

    @model_validator(mode="after")
    def _schedule_backend(self) -> RunConfig:
        given = any(
            s.schedule is not None or s.schedule_from for s in speculative_specs(self.speculative)
        )
        if given and self.backend != "vllm":
            raise ValueError(
                "speculative.schedule is measured by backend: vllm (an openai server runs its "
                "own: give it an endpoint label)"
            )
        return self

    @model_validator(mode="after")
    def _drafter_names(self) -> RunConfig:
        labels = [d.label for d in self.drafters]
        if len(set(labels)) != len(labels):
            raise ValueError("drafters need distinct names: set `name:` on each extra drafter")
        return self

    @model_validator(mode="after")
    def _speculative_labels(self) -> RunConfig:
        specs = speculative_specs(self.speculative)
        if not specs:
            raise ValueError("speculative: give at least one method (or leave the key out)")
        labels = [speculative_label(s) for s in specs]
        if len(set(labels)) != len(labels):
            dup = next(x for x in labels if labels.count(x) > 1)
            raise ValueError(
                f"speculative: two entries are named '{dup}'; give each a distinct `label:`"
            )
        if any(s.method == "none" for s in specs):
            raise ValueError(
                "speculative: method none is the baseline, which every vllm run measures; "
                "remove that entry"
            )
        return self

    @property
    def drafters(self) -> list[DraftSpec]:
        return [self.draft, *self.extra_drafters]

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, v: list[WorkloadSpec]) -> list[WorkloadSpec]:
        if not v:
            raise ValueError("workloads needs at least one workload")
        names = [w.name for w in v]
        if len(set(names)) != len(names):
            raise ValueError("workload names must be unique")
        if MIX_WORKLOAD in names:  # the label of the profile's mix batches (config/profile.py)
            raise ValueError(
                f"'{MIX_WORKLOAD}' is reserved (the profile's mix); rename the workload"
            )
        return v
