"""The typed run configuration: one flat YAML file whose keys are the fields of `RunConfig`.

Public API (see each module for details):

- `RunConfig`, `SCHEMA_VERSION` (`config.run`)
- the sections every backend reads: `ModelSpec`, `DraftSpec`, `PolicySpec`, `DatasetSpec`,
  `WorkloadSpec`, `SamplingSpec`, `DecisionSpec`, `AdaptiveSpec`, `EconomicsSpec`, `ConformanceSpec`, the size
  bounds `MAX_*` and the names `DRAFT_METHODS`, `POLICY_NAMES` (`config.sections`)
- the backend sections: `EngineSpec`, `SpeculativeSpec` (vllm), `ServerSpec`, `EndpointSpec`
  (openai), `speculative_specs`, `speculative_label` (`config.backends`)
- a run directory's config.yaml as the analyses read it: `StoredConfig` (`config.stored`)
- reading: `load_config`, `parse_config`, `read_yaml`, `deep_merge`, `dump_config`,
  `format_validation_error` (`config.loader`)
"""

from specbench.config.backends import (
    EndpointSpec,
    EngineSpec,
    ServerSpec,
    SpeculativeSpec,
    speculative_label,
    speculative_specs,
)
from specbench.config.loader import (
    EXTENDS_KEY,
    deep_merge,
    dump_config,
    format_validation_error,
    load_config,
    parse_config,
    read_yaml,
)
from specbench.config.run import SCHEMA_VERSION, RunConfig
from specbench.config.sections import (
    DRAFT_METHODS,
    MAX_BOOTSTRAP,
    MAX_BUDGET_FORWARDS,
    MAX_GAMMA,
    MAX_NEW_TOKENS,
    MAX_PROMPTS,
    MAX_REPEATS,
    POLICY_NAMES,
    AdaptiveSpec,
    BatchTimingSpec,
    ConformanceSpec,
    DatasetSpec,
    DecisionSpec,
    DraftSpec,
    EconomicsSpec,
    ModelSpec,
    PolicySpec,
    SamplingSpec,
    WorkloadSpec,
)

__all__ = [
    "DRAFT_METHODS",
    "EXTENDS_KEY",
    "MAX_BOOTSTRAP",
    "MAX_BUDGET_FORWARDS",
    "MAX_GAMMA",
    "MAX_NEW_TOKENS",
    "MAX_PROMPTS",
    "MAX_REPEATS",
    "POLICY_NAMES",
    "SCHEMA_VERSION",
    "AdaptiveSpec",
    "BatchTimingSpec",
    "ConformanceSpec",
    "DatasetSpec",
    "DecisionSpec",
    "DraftSpec",
    "EconomicsSpec",
    "EndpointSpec",
    "EngineSpec",
    "ModelSpec",
    "PolicySpec",
    "RunConfig",
    "SamplingSpec",
    "ServerSpec",
    "SpeculativeSpec",
    "WorkloadSpec",
    "deep_merge",
    "dump_config",
    "format_validation_error",
    "load_config",
    "parse_config",
    "read_yaml",
    "speculative_label",
    "speculative_specs",
]
