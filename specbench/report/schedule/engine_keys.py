"""The engines' recorded configuration keys (`specbench/assets/engine-keys.json`) as one typed model,
read once: every key `specbench schedule --format vllm|sglang|trtllm` writes is one of these, each
list copied from the engine's published source at the commit (or installed version) it names
(docs/serving.md names them; tests/unit/test_engine_exports.py and test_engine_args.py check every
written key against them)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, JsonValue

KEYS_FILE = "engine-keys.json"


class _Recorded(BaseModel):
    # a key the file gains without a field here is an error, not silently ignored
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class _Source(_Recorded):
    """Where a list was copied from: a repository file at a commit."""

    repository: str
    path: str
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    class_: str = Field(alias="class")
    command: str


class VllmKeys(_Source):
    """vLLM's SpeculativeConfig fields and methods (the `--speculative-config` JSON)."""

    keys: list[str]
    methods: list[str]


class VllmEngineArgs(_Recorded):
    """The EngineArgs specbench passes to `vllm.LLM`, and the `vllm serve` option of each
    parallel / execution-mode field with vLLM's default (read from the installed package)."""

    package: str
    version: str
    path: str
    class_: str = Field(alias="class")
    read: str
    keys: list[str]
    distributed_executor_backends: list[str]
    serve_flags_source: str
    serve_flags: dict[str, str]
    serve_bool_flags: list[str]
    serve_flag_defaults: dict[str, JsonValue]
    serve_only_flags_source: str
    serve_only_flags: dict[str, str]


class ParallelKeys(_Recorded):
    """An engine's own keys for a parallel layout and execution mode, where they were read."""

    source: str
    keys: list[str]
    bool_keys: list[str] = Field(default_factory=list)  # written as a bare flag when true
    multi_node: str


class SglangKeys(_Source):
    """SGLang's ServerArgs fields (`python -m sglang.launch_server` flags: `flag_rule`)."""

    keys: list[str]
    flag_rule: str
    algorithms: list[str]
    parallel: ParallelKeys

    def known(self) -> set[str]:
        return set(self.keys) | set(self.parallel.keys)


class TrtllmKeys(_Source):
    """TensorRT-LLM's LLM API keys: the speculative_config classes, and the top-level keys of a
    parallel layout (BaseLlmArgs / TorchLlmArgs) in the `--extra_llm_api_options` file."""

    draft_len_schedule: str
    base_keys: list[str]
    decoding_types: dict[str, list[str]]
    parallel: ParallelKeys

    def known(self, decoding_type: str | None = None) -> set[str]:
        """The speculative_config keys (of `decoding_type`'s class, when given)."""
        extra = self.decoding_types.get(decoding_type, []) if decoding_type else []
        return set(self.base_keys) | set(extra)


class EngineKeys(_Recorded):
    about: str
    vllm: VllmKeys
    vllm_engine_args: VllmEngineArgs
    sglang: SglangKeys
    trtllm: TrtllmKeys


@cache
def engine_keys() -> EngineKeys:
    """The recorded key lists, validated once."""
    text = resources.files("specbench").joinpath("assets", KEYS_FILE).read_text("utf-8")
    return EngineKeys.model_validate_json(text)
