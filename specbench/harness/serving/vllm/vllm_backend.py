"""`backend: vllm`: measure speculation inside vLLM itself (in-process `vllm.LLM`).

One engine per setting, one at a time: the baseline without speculation, then one per method × γ
with `speculative_config = {"method": speculative.method, "num_speculative_tokens": γ,
"model": speculative.model (draft_model: default draft.model), **speculative.options}`
(`speculative:` may list several methods, each over its own γ grid; records name each setting by
the entry's label, default its method); engine arguments come from `engine:` (`vllm_args.py`
builds them, the parallel layout included, and checks the options against the installed vLLM).
This module starts each engine; `vllm_session.py` drives requests through a started engine's
step loop and reads its spec-decode counters (`LLM.get_metrics()`: stat logging is switched on
here).

vLLM starts its engine core in a spawned process: code that calls this needs a
`if __name__ == "__main__":` guard (the `specbench` console script and `python -m specbench`
have one). vLLM's own log goes to DIR/engine.log; a failed start shows its last error lines.

    specbench run configs/tiny-vllm.yaml
"""

from __future__ import annotations

import dataclasses
import gc
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from specbench.config import RunConfig, SpeculativeSpec, speculative_label, speculative_specs
from specbench.config.backends import check_schedule
from specbench.errors import SpecbenchError
from specbench.harness.env.gpu_env import gpu_environment
from specbench.harness.serving.metrics.engine_memory import engine_memory, kv_capacity_from_engine
from specbench.harness.serving.vllm.vllm_args import check_options, engine_args
from specbench.harness.serving.vllm.vllm_log import (
    env_var,
    first_line,
    last_error_lines,
    logging_config,
    stderr_to,
)
from specbench.harness.serving.vllm.vllm_session import VllmSession
from specbench.setting import Setting

INSTALL_HINT = "install it with `pip install -e '.[vllm]'` (on CPU: `make install-vllm`)"


def import_vllm() -> Any:
    """The vllm module, or one clear line saying how to install it."""
    try:
        import vllm
    except ImportError:
        raise SpecbenchError(
            f"backend 'vllm' needs vLLM, which is not installed; {INSTALL_HINT}"
        ) from None
    except Exception as exc:  # a broken install (e.g. CUDA torchvision beside a CPU torch)
        first = (str(exc).strip().splitlines() or [""])[0]
        raise SpecbenchError(
            f"vLLM is installed but fails to import ({type(exc).__name__}: {first[:200]}); "
            "on CPU `make install-vllm` removes the torchvision/torchaudio/torchcodec wheels "
            "that break it"
        ) from None
    return vllm


SCHEDULE_LABEL = "schedule"


def read_schedule_file(path: Path) -> list[Any]:
    """The [[lo, hi, k], …] of a schedule file: a JSON list of triples, or an object holding one
    under `num_speculative_tokens_per_batch_size` (top level or in `speculative_config`) or
    `schedule` (the forms `specbench schedule` and vLLM's own config write)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecbenchError(f"speculative.schedule_from: cannot read {path}: {exc}") from None
    key = "num_speculative_tokens_per_batch_size"
    for candidate in (
        doc,
        doc.get(key) if isinstance(doc, dict) else None,
        (doc.get("speculative_config") or {}).get(key) if isinstance(doc, dict) else None,
        doc.get("schedule") if isinstance(doc, dict) else None,
    ):
        if isinstance(candidate, list):
            return candidate
    raise SpecbenchError(
        f"speculative.schedule_from: {path} holds no schedule (a list of [lo, hi, k], or an "
        f"object with '{key}' or 'schedule')"
    )


def engine_schedule(
    cfg: RunConfig, vllm: Any
) -> tuple[str | None, tuple[tuple[int, int, int], ...] | None]:
    """The schedule setting's [[lo, hi, k], …] (config or file), checked by specbench's rules
    and against the installed vLLM: it must know num_speculative_tokens_per_batch_size. Returns
    the label of the speculative entry that gives it (its method runs the schedule) with it."""
    given = [s for s in speculative_specs(cfg.speculative) if s.schedule or s.schedule_from]
    if len(given) > 1:
        raise SpecbenchError("speculative: give a schedule in one entry only")
    if not given:
        return None, None
    spec = given[0]
    entries: Any = spec.schedule
    if spec.schedule_from:
        entries = read_schedule_file(Path(spec.schedule_from))
    if entries is None:
        return None, None
    try:
        checked = check_schedule([tuple(e) for e in entries])  # [lo, hi, k] each
    except (ValueError, TypeError) as exc:
        raise SpecbenchError(f"speculative.schedule_from: {exc}") from None
    from vllm.config import SpeculativeConfig

    if "num_speculative_tokens_per_batch_size" not in {
        f.name for f in dataclasses.fields(SpeculativeConfig)
    }:
        raise SpecbenchError(
            f"speculative.schedule: the installed vLLM {getattr(vllm, '__version__', '?')} has "
            "no num_speculative_tokens_per_batch_size (dynamic speculation); remove the schedule "
            "or upgrade vLLM"
        )
    return speculative_label(spec), tuple(checked)


class VllmBackend:
    """The settings of a vLLM run and how to start each."""

    name = "vllm"

    def __init__(self, cfg: RunConfig, out_dir: Path) -> None:
        self.cfg = cfg
        self.log_path = out_dir / "engine.log"
        out_dir.mkdir(parents=True, exist_ok=True)
        self.logging_config = str(logging_config(self.log_path))
        with (
            env_var("VLLM_LOGGING_CONFIG_PATH", self.logging_config),  # read when vLLM is imported
            stderr_to(self.log_path),
        ):
            self.vllm = import_vllm()
            check_options(cfg, self.vllm)
            from vllm.platforms import current_platform

            self.on_cpu = bool(current_platform.is_cpu())
        from specbench.models import resolve_model_path

        self.target_path = resolve_model_path(cfg.target.model)
        self.specs = {speculative_label(s): s for s in speculative_specs(cfg.speculative)}
        self.spec_models: dict[str, str | None] = {}  # label → the drafter's weights (resolved)
        for label, spec in self.specs.items():
            model = spec.model
            if model is None and spec.method == "draft_model":
                if cfg.draft.method != "model" or not cfg.draft.model:
                    raise SpecbenchError(
                        "speculative.method draft_model needs a draft: set speculative.model or "
                        "draft.model"
                    )
                model = cfg.draft.model
            self.spec_models[label] = resolve_model_path(model) if model is not None else None
        # the schedule setting runs the method of the speculative entry that gives it
        self.schedule_of, self.schedule = engine_schedule(cfg, vllm=self.vllm)
        self._tokenizer: Any = None
        self.kv_capacity: dict[tuple[str, int], dict[str, Any]] = {}  # setting → its engine's
        self.served_dtype: str | None = None  # what "auto" became (vLLM downcasts float32)

    def grid(self, spec: SpeculativeSpec) -> list[int]:
        return sorted(set(spec.num_speculative_tokens or self.cfg.gammas))

    def settings(self) -> list[Setting]:
        fixed = [
            Setting(g, label, method=spec.method)
            for label, spec in self.specs.items()
            for g in self.grid(spec)
        ]
        if self.schedule is not None:  # γ by batch size, beside the fixed γ values
            top = max(k for _, _, k in self.schedule)
            method = self.specs[self.schedule_of or next(iter(self.specs))].method
            fixed.append(Setting(top, SCHEDULE_LABEL, method=method, schedule=self.schedule))
        return [Setting(0, "", method="none"), *fixed]

    def speculative_config(
        self,
        gamma: int,
        label: str | None = None,
        schedule: tuple[tuple[int, int, int], ...] | None = None,
    ) -> dict[str, Any]:
        """vLLM's speculative_config of the setting `label` (default: the first method) at γ;
        with a schedule, γ is its largest k (vLLM caps each step's k at num_speculative_tokens)
        and the schedule goes in as num_speculative_tokens_per_batch_size."""
        label = label if label is not None else next(iter(self.specs))
        spec = self.specs[label]
        conf: dict[str, Any] = {"method": spec.method, "num_speculative_tokens": gamma}
        if schedule is not None:
            conf["num_speculative_tokens_per_batch_size"] = [list(e) for e in schedule]
        if self.spec_models[label] is not None:
            conf["model"] = self.spec_models[label]
        if spec.method == "ngram" and self.cfg.draft.method == "ngram":
            conf["prompt_lookup_min"] = self.cfg.draft.prompt_lookup_min
            conf["prompt_lookup_max"] = self.cfg.draft.prompt_lookup_max
        return {**conf, **spec.options}

    def engine_kwargs(
        self,
        gamma: int,
        label: str | None = None,
        schedule: tuple[tuple[int, int, int], ...] | None = None,
    ) -> dict[str, Any]:
        kw = engine_args(self.cfg, self.target_path, on_cpu=self.on_cpu)
        kw["log_config_file"] = self.logging_config
        if gamma > 0:
            kw["speculative_config"] = self.speculative_config(gamma, label, schedule)
        return kw

    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            t = self.cfg.target
            self._tokenizer = AutoTokenizer.from_pretrained(
                self.target_path, revision=t.revision, trust_remote_code=t.trust_remote_code
            )
        return self._tokenizer

    @contextmanager
    def open(self, setting: Setting) -> Iterator[VllmSession]:
        what = f"γ={setting.gamma} {setting.drafter}" if setting.gamma else "baseline"
        label = setting.drafter or None
        if setting.schedule is not None:
            what, label = f"schedule {[list(e) for e in setting.schedule]}", self.schedule_of
        kwargs = self.engine_kwargs(setting.gamma, label, setting.schedule)
        with self.log_path.open("a") as fh:
            fh.write(f"\n===== specbench: starting the {what} engine: {kwargs}\n")
        try:
            with (
                env_var("VLLM_LOGGING_CONFIG_PATH", self.logging_config),  # the engine's processes
                stderr_to(self.log_path),
            ):
                llm = self.vllm.LLM(**kwargs)
        except Exception as exc:
            time.sleep(0.5)  # let the engine process flush its log
            tail = last_error_lines(self.log_path)
            raise SpecbenchError(
                f"vLLM failed to start the {what} engine: {type(exc).__name__}: "
                f"{first_line(exc)}"
                + (f"; last log lines: {tail}" if tail else "")
                + f" (full log: {self.log_path})"
            ) from None
        self._note_memory(setting, llm)
        try:
            max_len = int(llm.llm_engine.model_config.max_model_len)
            max_context = max(1, max_len - self.cfg.max_new_tokens)
            yield VllmSession(llm, self.tokenizer(), self.cfg, max_context)
        finally:
            with suppress(Exception):  # shutting down is best effort; the records are kept
                llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()

    def _note_memory(self, setting: Setting, llm: Any) -> None:
        """Keep what a started engine says about its memory: the dtype it serves in and its KV
        capacity. Best effort: an engine that exposes neither is still measured."""
        with suppress(Exception):
            self.served_dtype = str(llm.llm_engine.model_config.dtype).removeprefix("torch.")
        with suppress(Exception):
            cap = kv_capacity_from_engine(llm)
            if cap is not None and setting.schedule is None:  # keyed by fixed γ
                self.kv_capacity[(setting.drafter, setting.gamma)] = {
                    "gamma": setting.gamma,
                    "label": setting.drafter,
                    "endpoint": None,
                    **cap,
                }

    def environment(self) -> dict[str, Any]:
        import torch
        import transformers

        kw = self.engine_kwargs(0)
        kw.pop("log_config_file", None)
        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        return {
            "vllm": getattr(self.vllm, "__version__", None),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": "cpu" if self.on_cpu else "cuda",
            "gpu": gpu,
            "cuda": torch.version.cuda,
            "dtype": kw["dtype"],
            "engine_args": kw,
            "speculative_config": self.speculative_configs(),
            "memory": self.memory(self.served_dtype or kw["dtype"]),
            **({} if self.on_cpu else gpu_environment()),  # the engine's GPUs, from nvidia-smi
        }

    def speculative_configs(self) -> dict[str, Any] | list[dict[str, Any]]:
        """env.json's `speculative_config`: each method's, with its γ grid (one mapping when the
        run measures one method, as before)."""
        confs = [
            {
                **self.speculative_config(self.grid(s)[-1], label),
                "num_speculative_tokens": self.grid(s),
            }
            for label, s in self.specs.items()
        ]
        return confs[0] if len(confs) == 1 else confs

    def memory(self, dtype: str | None) -> dict[str, Any] | None:
        """env.json's `memory`: each engine's KV capacity and the models' computed footprints."""
        models = []
        for label, spec in self.specs.items():
            m = spec.model
            if m is None and self.spec_models[label] is not None:
                m = self.cfg.draft.model  # draft_model defaults to draft.model
            if m and m not in models:
                models.append(m)
        return engine_memory(
            self.cfg.target.model,
            models,
            list(self.kv_capacity.values()),
            revision=self.cfg.target.revision,
            dtype=dtype,
            kv_dtype=self.cfg.engine.extra.get("kv_cache_dtype"),
        )
