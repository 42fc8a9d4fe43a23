"""`backend: vllm`: measure speculation inside vLLM itself (in-process `vllm.LLM`).

One engine per setting, one at a time: the baseline without speculation, then one per γ with
`speculative_config = {"method": speculative.method, "num_speculative_tokens": γ,
"model": speculative.model (draft_model: default draft.model), **speculative.options}`; engine
arguments come from `engine:` (`extra` passes any other EngineArgs field). Requests are driven
through the engine's step loop (`LLM.llm_engine.add_request` / `step`), `concurrency`
conversations in flight, so each request's TTFT (first step that returns a token), e2e latency
and tokens are timed here. Spec-decode counters come from `LLM.get_metrics()` (stat logging is
switched on), diffed per batch and, at concurrency 1, per request. Prompts are rendered with the
target's Hugging Face tokenizer exactly as the transformers backend renders them.

vLLM starts its engine core in a spawned process: code that calls this needs a
`if __name__ == "__main__":` guard (the `specbench` console script and `python -m specbench`
have one). vLLM's own log goes to DIR/engine.log; a failed start shows its last error lines.

    specbench run configs/tiny-vllm.yaml
"""

from __future__ import annotations

import dataclasses
import difflib
import gc
import json
import os
import sys
import time
import typing
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.config import RunConfig
from specbench.data import build_context_ids, conversation_messages
from specbench.errors import SpecbenchError
from specbench.harness.serving.driver import (
    Conversation,
    ConversationResult,
    OnResult,
    Setting,
    Snapshot,
    TurnResult,
)
from specbench.harness.serving.metrics import SpecCounters, spec_counters_from_vllm_metrics

INSTALL_HINT = "install it with `pip install -e '.[vllm]'` (on CPU: `make install-vllm`)"
CPU_DEFAULT_MEMORY_UTILIZATION = 0.3  # vLLM's default (0.92) refuses to start on a CPU


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


def _literal_values(tp: Any) -> set[str]:
    """Every string of a (nested) Literal type."""
    out: set[str] = set()
    for arg in typing.get_args(tp):
        if isinstance(arg, str):
            out.add(arg)
        else:
            out |= _literal_values(arg)
    return out


def _unknown(keys: list[str], known: set[str], where: str, version: str) -> None:
    for key in keys:
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise SpecbenchError(
                f"{where}.{key}: the installed vLLM {version} has no option '{key}'{hint}"
            )


def check_options(cfg: RunConfig, vllm: Any) -> None:
    """Name a config option the installed vLLM does not know, before starting anything."""
    from vllm.config import SpeculativeConfig
    from vllm.engine.arg_utils import EngineArgs

    version = getattr(vllm, "__version__", "?")
    _unknown(
        list(cfg.engine.extra),
        {f.name for f in dataclasses.fields(EngineArgs)},
        "engine.extra",
        version,
    )
    spec_fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    _unknown(list(cfg.speculative.options), spec_fields, "speculative.options", version)
    try:
        from vllm.config.speculative import SpeculativeMethod

        methods = _literal_values(SpeculativeMethod)
    except ImportError:  # older vLLM: no such alias; let vLLM judge the method
        methods = set()
    if methods and cfg.speculative.method not in methods:
        near = difflib.get_close_matches(cfg.speculative.method, sorted(methods), n=1)
        hint = f"; did you mean '{near[0]}'?" if near else f"; known: {', '.join(sorted(methods))}"
        raise SpecbenchError(
            f"speculative.method: the installed vLLM {version} has no method "
            f"'{cfg.speculative.method}'{hint}"
        )


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """Set an environment variable for the duration of a block (spawned processes inherit it)."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextmanager
def _stderr_to(log_path: Path) -> Iterator[None]:
    """Send file descriptor 2 to the engine log for a block: the engine's processes, spawned
    inside it, keep writing their warnings and progress bars there instead of the console."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _logging_config(log_path: Path) -> Path:
    """A Python logging config sending vLLM's log (this process and the engine's) to a file."""
    conf = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "filename": str(log_path),
                "formatter": "plain",
                "mode": "a",
            }
        },
        "loggers": {"vllm": {"handlers": ["file"], "level": "INFO", "propagate": False}},
    }
    path = log_path.with_name("engine-logging.json")
    path.write_text(json.dumps(conf))
    return path


def last_error_lines(log_path: Path, n: int = 3) -> str:
    """The last lines of an engine log that look like errors, joined into one line."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    marks = ("Error", "error", "Exception", "Traceback", "failed", "CRITICAL")
    picked = [ln.strip() for ln in lines if any(m in ln for m in marks)]
    picked = [ln for ln in picked if not ln.startswith("Traceback")]
    return " | ".join(dict.fromkeys(picked[-n:]))


@dataclass
class _Inflight:
    conv: int
    turn: int
    prompt_tokens: int
    truncated: bool
    submitted: float
    first: float | None = None
    chunks: int = 0


class VllmSession:
    """One started engine: run batches through its step loop, read its counters."""

    def __init__(self, llm: Any, tokenizer: Any, cfg: RunConfig, max_context: int | None) -> None:
        self.llm = llm
        self.engine = llm.llm_engine
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.max_context = max_context
        self._ids = 0

    def counters(self) -> SpecCounters | None:
        return spec_counters_from_vllm_metrics(self.llm.get_metrics())

    def snapshot(self) -> Snapshot:
        return Snapshot(True, self.counters())

    def _params(self, temperature: float, seed: int) -> Any:
        from vllm import SamplingParams

        s = self.cfg.sampling
        return SamplingParams(
            temperature=temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            max_tokens=self.cfg.max_new_tokens,
            seed=seed,
            stop=list(self.cfg.stop) or None,
        )

    def run_batch(
        self,
        convs: list[Conversation],
        temperature: float,
        concurrency: int,
        on_result: OnResult | None = None,
    ) -> list[ConversationResult]:
        results = [ConversationResult() for _ in convs]
        answers: list[list[str]] = [[] for _ in convs]
        pending = deque(range(len(convs)))
        inflight: dict[str, _Inflight] = {}
        start: dict[int, SpecCounters | None] = {}
        per_request = concurrency == 1
        active = 0

        def submit(i: int, turn: int) -> None:
            conv = convs[i]
            messages = conversation_messages(conv.prompt, answers[i], turn)
            ids, truncated = build_context_ids(
                self.tokenizer, messages, self.cfg.chat_template, self.max_context
            )
            self._ids += 1
            rid = f"sb-{self._ids}"
            params = self._params(temperature, conv.seed + turn)
            self.engine.add_request(rid, {"prompt_token_ids": ids}, params)
            inflight[rid] = _Inflight(i, turn, len(ids), truncated, time.perf_counter())

        def finish(i: int) -> None:
            nonlocal active
            active -= 1
            if per_request:
                after, before = self.counters(), start.get(i)
                if after is not None and before is not None:
                    results[i].counters = after.minus(before)
            if on_result is not None:  # its record goes to disk now, not when the batch ends
                on_result(i, results[i])

        while pending or inflight:
            while pending and active < concurrency:
                i = pending.popleft()
                active += 1
                if per_request:
                    start[i] = self.counters()
                try:
                    submit(i, 0)
                except SpecbenchError:
                    raise
                except Exception as exc:  # e.g. a prompt longer than the model's context
                    results[i].error = f"{type(exc).__name__}: {_first_line(exc)}"
                    finish(i)
            if not inflight:
                continue
            outputs = self.engine.step()
            now = time.perf_counter()
            for out in outputs:
                req = inflight.get(out.request_id)
                if req is None:
                    continue
                comp = out.outputs[0]
                if len(comp.token_ids) > 0 and req.first is None:
                    req.first = now
                req.chunks += 1
                if not out.finished:
                    continue
                del inflight[out.request_id]
                first = req.first if req.first is not None else now
                results[req.conv].turns.append(
                    TurnResult(
                        prompt_tokens=req.prompt_tokens,
                        new_tokens=len(comp.token_ids),
                        ttft_ms=(first - req.submitted) * 1000.0,
                        e2e_ms=(now - req.submitted) * 1000.0,
                        text=comp.text,
                        stop_reason=str(comp.finish_reason or ""),
                        output_ids=list(comp.token_ids),
                        chunks=req.chunks,
                        truncated=req.truncated,
                    )
                )
                answers[req.conv].append(comp.text)
                if req.turn + 1 < len(convs[req.conv].prompt.turns):
                    submit(req.conv, req.turn + 1)
                else:
                    finish(req.conv)
        return results


def _first_line(exc: BaseException) -> str:
    """An exception's first line; for a pydantic validation error, with the error itself."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if len(lines) > 1 and "validation error" in lines[0]:
        detail = lines[1].removeprefix("Value error, ").split(" [type=")[0]
        return f"{lines[0]}: {detail}"[:400]
    return (lines or [""])[0][:300]


class VllmBackend:
    """The settings of a vLLM run and how to start each."""

    name = "vllm"

    def __init__(self, cfg: RunConfig, out_dir: Path) -> None:
        self.cfg = cfg
        self.log_path = out_dir / "engine.log"
        out_dir.mkdir(parents=True, exist_ok=True)
        self.logging_config = str(_logging_config(self.log_path))
        with (
            _env("VLLM_LOGGING_CONFIG_PATH", self.logging_config),  # read when vLLM is imported
            _stderr_to(self.log_path),
        ):
            self.vllm = import_vllm()
            check_options(cfg, self.vllm)
            from vllm.platforms import current_platform

            self.on_cpu = bool(current_platform.is_cpu())
        from specbench.models import resolve_model_path

        self.target_path = resolve_model_path(cfg.target.model)
        spec = cfg.speculative
        self.spec_model = spec.model
        if self.spec_model is None and spec.method == "draft_model":
            if cfg.draft.method != "model" or not cfg.draft.model:
                raise SpecbenchError(
                    "speculative.method draft_model needs a draft: set speculative.model or draft.model"
                )
            self.spec_model = cfg.draft.model
        if self.spec_model is not None:
            self.spec_model = resolve_model_path(self.spec_model)
        self._tokenizer: Any = None

    def settings(self) -> list[Setting]:
        return [Setting(0, ""), *(Setting(g, self.cfg.speculative.method) for g in self.cfg.gammas)]

    def speculative_config(self, gamma: int) -> dict[str, Any]:
        spec = self.cfg.speculative
        conf: dict[str, Any] = {"method": spec.method, "num_speculative_tokens": gamma}
        if self.spec_model is not None:
            conf["model"] = self.spec_model
        if spec.method == "ngram" and self.cfg.draft.method == "ngram":
            conf["prompt_lookup_min"] = self.cfg.draft.prompt_lookup_min
            conf["prompt_lookup_max"] = self.cfg.draft.prompt_lookup_max
        return {**conf, **spec.options}

    def engine_kwargs(self, gamma: int) -> dict[str, Any]:
        e, t = self.cfg.engine, self.cfg.target
        kw: dict[str, Any] = {
            "model": self.target_path,
            "dtype": e.dtype or t.dtype,
            "tensor_parallel_size": e.tensor_parallel_size,
            "pipeline_parallel_size": e.pipeline_parallel_size,
            "enforce_eager": e.enforce_eager,
            "seed": self.cfg.seed,
            "trust_remote_code": t.trust_remote_code,
            "disable_log_stats": False,  # get_metrics() needs the stat loggers
            "log_config_file": self.logging_config,
        }
        if t.revision is not None:
            kw["revision"] = t.revision
        if e.max_model_len is not None:
            kw["max_model_len"] = e.max_model_len
        util = e.gpu_memory_utilization
        if util is None and self.on_cpu:
            util = CPU_DEFAULT_MEMORY_UTILIZATION
        if util is not None:
            kw["gpu_memory_utilization"] = util
        kw.update(e.extra)
        if gamma > 0:
            kw["speculative_config"] = self.speculative_config(gamma)
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
        what = f"γ={setting.gamma} {setting.label}" if setting.gamma else "baseline"
        kwargs = self.engine_kwargs(setting.gamma)
        with self.log_path.open("a") as fh:
            fh.write(f"\n===== specbench: starting the {what} engine: {kwargs}\n")
        try:
            with (
                _env("VLLM_LOGGING_CONFIG_PATH", self.logging_config),  # the engine's processes
                _stderr_to(self.log_path),
            ):
                llm = self.vllm.LLM(**kwargs)
        except Exception as exc:
            time.sleep(0.5)  # let the engine process flush its log
            tail = last_error_lines(self.log_path)
            raise SpecbenchError(
                f"vLLM failed to start the {what} engine: {type(exc).__name__}: "
                f"{_first_line(exc)}"
                + (f"; last log lines: {tail}" if tail else "")
                + f" (full log: {self.log_path})"
            ) from None
        try:
            max_len = int(llm.llm_engine.model_config.max_model_len)
            max_context = max(1, max_len - self.cfg.max_new_tokens)
            yield VllmSession(llm, self.tokenizer(), self.cfg, max_context)
        finally:
            with suppress(Exception):  # shutting down is best effort; the records are kept
                llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()

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
            "speculative_config": {
                **self.speculative_config(self.cfg.gammas[-1]),
                "num_speculative_tokens": self.cfg.gammas,
            },
        }
