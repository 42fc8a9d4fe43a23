"""A run directory's config.yaml as the analyses read it: `StoredConfig`, typed, read once at the
edge (`harness.rundir.read_stored_config`) and passed down as this model.

A stored config is a dumped `RunConfig`, but `report`, `compare`, `schedule` and `simulate` also
read run directories written by older versions and tests' synthetic configs, which hold only some
keys. So every key here is optional (None: not stored; an analysis falls back to the typed
config's own default, e.g. `DecisionSpec`'s) and keys this version does not read are kept
(extra="allow"), where `RunConfig` refuses them. `StoredConfig.of(cfg)` is a live `RunConfig`
seen the same way (the adaptive plan decides as the report will). The only free-form values are
an engine's own `speculative.options` (JSON, passed to the engine as given).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from specbench.config.profile import (
    DeploymentProfile,
    Objective,
    ProfileLoad,
    ProfilePrice,
    ProfileSlo,
    TrafficMix,
)
from specbench.config.run import RunConfig
from specbench.config.sections import MAX_BOOTSTRAP


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class StoredModel(_Loose):
    """`target:` / `draft:` / an `extra_drafters` entry."""

    model: str | None = None
    dtype: str | None = None
    revision: str | None = None
    method: str | None = None
    name: str | None = None
    logit_noise: float | None = None

    @property
    def label(self) -> str:
        """How records name a drafter: its `name`, else its method (records' `drafter`)."""
        return self.name or self.method or "model"


class StoredWorkload(_Loose):
    name: str
    weight: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    n: int | None = None


class StoredSampling(_Loose):
    temperatures: list[Annotated[float, Field(ge=0.0, allow_inf_nan=False)]] | None = None
    top_p: float | None = None
    top_k: int | None = None


class StoredDecision(_Loose):
    margin: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    ci_level: float | None = Field(default=None, gt=0.0, lt=1.0)
    bootstrap: int | None = Field(default=None, ge=1, le=MAX_BOOTSTRAP)
    target_ci_halfwidth: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)


class StoredAdaptive(_Loose):
    max_prompts: int | None = None
    max_candidates: int | None = None
    futility: bool | None = None


class StoredSlo(_Loose):
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None


class StoredEconomics(_Loose):
    gpu_hour_usd: float | None = None
    gpus: int | None = None


class StoredConformance(_Loose):
    reference_run: str | None = None
    min_effect: float | None = None


class StoredEndpoint(_Loose):
    method: str | None = None


class StoredServer(_Loose):
    chat: bool | None = None
    prompt_format: str | None = None
    endpoints: list[StoredEndpoint] | None = None


class StoredEngine(_Loose):
    dtype: str | None = None
    interleave: bool | None = None  # every repeat started every engine afresh, alternated


class StoredSpeculative(_Loose):
    method: str | None = None
    model: str | None = None
    options: dict[str, JsonValue] | None = None  # the engine's own keys, passed as given


class StoredProfile(_Loose):
    traffic: TrafficMix | None = None
    load: ProfileLoad | None = None
    slo: ProfileSlo | None = None
    objective: Objective | None = None
    price: ProfilePrice | None = None

    def deployment(self) -> DeploymentProfile:
        """The profile as the run stated it (its parts left out take their defaults)."""
        given = {k: getattr(self, k) for k in ("traffic", "load", "slo", "objective", "price")}
        return DeploymentProfile(**{k: v for k, v in given.items() if v is not None})


class StoredConfig(_Loose):
    """The keys of a run's stored config.yaml that report / compare / schedule / simulate read,
    typed (module docstring)."""

    name: str | None = None
    backend: str | None = None
    target: StoredModel | None = None
    draft: StoredModel | None = None
    extra_drafters: list[StoredModel] | None = None
    workloads: list[StoredWorkload] | None = None
    sampling: StoredSampling | None = None
    gammas: list[int] | None = None
    max_new_tokens: int | None = None
    stop: list[str] | None = None
    seed: int | None = None
    chat_template: str | bool | None = None
    concurrency: list[int] | None = None
    decision: StoredDecision | None = None
    adaptive: StoredAdaptive | None = None
    slo: StoredSlo | None = None
    profile: StoredProfile | None = None
    conformance: StoredConformance | None = None
    server: StoredServer | None = None
    engine: StoredEngine | None = None
    speculative: StoredSpeculative | list[StoredSpeculative] | None = None
    economics: StoredEconomics | None = None

    @classmethod
    def of(cls, cfg: RunConfig) -> StoredConfig:
        """A live config as a run directory stores it (`dump_config`'s JSON form)."""
        return cls.model_validate(cfg.model_dump(mode="json"))

    def deployment_profile(self) -> DeploymentProfile | None:
        """The run's deployment profile (None: it has none), its price's unset parts the run's
        `economics` (config/profile.py `ProfilePrice`: None means economics')."""
        if self.profile is None:
            return None
        dep = self.profile.deployment()
        econ, price = self.economics, dep.price
        if econ is None:
            return dep
        filled = price.model_copy(
            update={
                "gpu_hour_usd": price.gpu_hour_usd
                if price.gpu_hour_usd is not None
                else econ.gpu_hour_usd,
                "gpus_per_server": price.gpus_per_server or econ.gpus,
            }
        )
        return dep.model_copy(update={"price": filled})

    @property
    def drafters(self) -> list[StoredModel]:
        """The primary drafter (when stored), then the extra ones."""
        return [*([self.draft] if self.draft else []), *(self.extra_drafters or [])]
