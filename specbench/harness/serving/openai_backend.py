"""`backend: openai`: measure any OpenAI-compatible server (vLLM, SGLang, TensorRT-LLM, …).

specbench changes no speculation setting here: start one server per setting and say in the
config what each runs (`server.url` + `server.gamma` + `server.label`, or several under
`server.endpoints`); a later run with another server can be added to the same directory with
`--resume`. Each request is a streaming completion (`openai_request.py` builds it,
`openai_stream.py` reads and times it, `openai_http.py` retries it); `concurrency` threads keep
that many conversations in flight.

Prometheus `/metrics` is scraped before and after each batch (vLLM's current and V0 counter
names, SGLang's accept-length gauge; `metrics.py`) and around each conversation at concurrency 1.
A server without `/metrics` is still measured; acceptance is marked unavailable. Transient
failures (connection errors, timeouts, a stream cut off, HTTP 408/429/5xx) are retried
`server.retries` times; a request that still fails is recorded with kind "failed" and its error.

    specbench run configs/tiny-openai.yaml
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx2

from specbench.config import RunConfig
from specbench.data import conversation_messages
from specbench.errors import SpecbenchError
from specbench.harness.serving.base import (
    Conversation,
    ConversationResult,
    EngineSetting,
    OnResult,
    Snapshot,
    TurnResult,
)
from specbench.harness.serving.endpoints import (
    check_endpoints,
    endpoint_label,
    endpoint_method,
    endpoints_of,
)
from specbench.harness.serving.engine_memory import engine_memory, kv_capacity_from_samples
from specbench.harness.serving.metrics import (
    accept_length_gauge,
    parse_prometheus,
    spec_counters_from_samples,
)
from specbench.harness.serving.openai_http import (
    RequestFailed,
    get_text,
    make_client,
    split_url,
    with_retries,
)
from specbench.harness.serving.openai_request import request_body
from specbench.harness.serving.openai_stream import stream_turn


def run_threaded(
    work: Callable[[Conversation], ConversationResult],
    items: list[Conversation],
    workers: int,
) -> Iterator[tuple[int, ConversationResult]]:
    """Run `work` over `items` with `workers` in flight (closed loop), yielding (index, result) in
    the caller's thread as each completes.

    Daemon threads rather than a ThreadPoolExecutor: on Ctrl-C (a KeyboardInterrupt in the caller)
    no new item starts and the process exits at once, dropping only the requests in flight; an
    executor's threads would be joined at exit, holding the process until their requests end.
    """
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(items)):
        todo.put(i)
    done: queue.SimpleQueue[tuple[int, ConversationResult | BaseException]] = queue.SimpleQueue()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((i, work(items[i])))
            except BaseException as exc:  # a bug: re-raised in the caller's thread
                done.put((i, exc))
                return

    for _ in range(min(workers, len(items))):
        threading.Thread(target=worker, daemon=True).start()
    try:
        for _ in range(len(items)):
            while True:
                try:
                    i, res = done.get(timeout=0.1)  # short waits keep Ctrl-C responsive
                    break
                except queue.Empty:
                    continue
            if isinstance(res, BaseException):
                raise res
            yield i, res
    finally:
        stop.set()


class OpenAISession:
    """One server: stream requests, scrape its metrics."""

    def __init__(
        self,
        backend: OpenAIBackend,
        setting: EngineSetting,
        model: str,
        max_context: int | None,
        metrics_ok: bool,
        client: httpx2.Client,
    ) -> None:
        self.b = backend
        self.client = client
        self.cfg = backend.cfg
        self.api, _ = split_url(setting.endpoint)
        self.model = model
        self.max_context = max_context
        self.metrics_ok = metrics_ok

    def snapshot(self) -> Snapshot:
        if not self.metrics_ok:
            return Snapshot(False, None)
        try:
            text = self.b.get_text(self.client, self.b.metrics_url_for(self.api), timeout=10.0)
        except RequestFailed:
            return Snapshot(False, None)
        samples = parse_prometheus(text)
        return Snapshot(True, spec_counters_from_samples(samples), accept_length_gauge(samples))

    def _count_tokens(self, text: str) -> int | None:
        tok = self.b.tokenizer()
        return None if tok is None else len(tok(text, add_special_tokens=False)["input_ids"])

    def _turn(self, conv: Conversation, messages: list[dict[str, str]], seed: int) -> TurnResult:
        path, body, prompt_tokens, truncated = request_body(
            self.cfg,
            self.model,
            self.b.tokenizer,
            self.max_context,
            messages,
            conv.params,
            seed,
            conv.prompt.tools,
        )

        def once() -> TurnResult:
            res = stream_turn(
                self.client, self.api + path, body, self.b.headers(), self._count_tokens
            )
            res.prompt_tokens = res.prompt_tokens or prompt_tokens
            res.truncated = truncated
            return res

        return with_retries(once, self.cfg.server.retries)

    def _conversation(self, conv: Conversation, per_request: bool) -> ConversationResult:
        res = ConversationResult()
        before = self.snapshot().counters if per_request else None
        answers: list[str] = []
        try:
            for turn in range(len(conv.prompt.turns)):
                messages = conversation_messages(conv.prompt, answers, turn)
                t = self._turn(conv, messages, conv.seed + turn)
                res.turns.append(t)
                answers.append(t.text)
        except RequestFailed as exc:
            res.error = str(exc)
        if per_request and before is not None and res.error is None:
            time.sleep(0.02)  # the server records a step's stats right after sending its output
            after = self.snapshot().counters
            if after is not None:
                res.counters = after.minus(before)
        return res

    def run_batch(
        self,
        convs: list[Conversation],
        concurrency: int,
        on_result: OnResult | None = None,
    ) -> list[ConversationResult]:
        results: list[ConversationResult] = [ConversationResult() for _ in convs]

        def deliver(i: int, res: ConversationResult) -> None:
            results[i] = res
            if on_result is not None:  # its record goes to disk now, not when the batch ends
                on_result(i, res)

        if concurrency == 1:  # in this thread: per-request counters, Ctrl-C lands in the request
            for i, conv in enumerate(convs):
                deliver(i, self._conversation(conv, True))
        else:
            work = lambda c: self._conversation(c, False)  # noqa: E731
            for i, res in run_threaded(work, convs, concurrency):
                deliver(i, res)
        return results


class OpenAIBackend:
    """The servers of an openai run, one per setting."""

    name = "openai"

    def __init__(self, cfg: RunConfig, out_dir: Path) -> None:
        self.cfg = cfg
        s = cfg.server
        self.endpoints = endpoints_of(cfg)
        check_endpoints(self.endpoints)  # distinct labels, one server without speculation
        for ep in self.endpoints:
            split_url(ep.url)
        self.api_key: str | None = None
        if s.api_key_env:
            self.api_key = os.environ.get(s.api_key_env)
            if not self.api_key:
                raise SpecbenchError(
                    f"server.api_key_env names {s.api_key_env}, which is not set in the environment"
                )
        self._tokenizer: Any = None
        self._tokenizer_tried = False
        self.server_info: dict[str, Any] = {}
        self.kv_capacity: dict[str, dict[str, Any]] = {}  # endpoint → what its server reported
        if s.prompt_format == "tokens" and not s.chat and self.tokenizer() is None:
            raise SpecbenchError(
                "server.prompt_format: tokens needs the target's tokenizer: set target.model to a "
                "local model directory or a hub id"
            )

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def get_text(self, client: httpx2.Client, url: str, timeout: float) -> str:
        return get_text(client, url, self.headers(), timeout)

    def metrics_url_for(self, api: str) -> str:
        if self.cfg.server.metrics_url and len(self.endpoints) == 1:
            return self.cfg.server.metrics_url
        return api[: -len("/v1")] + "/metrics"

    def tokenizer(self) -> Any:
        """The target's tokenizer when one can be loaded (local dir or hub cache), else None."""
        if not self._tokenizer_tried:
            self._tokenizer_tried = True
            try:
                from transformers import AutoTokenizer

                from specbench.models import resolve_model_path

                t = self.cfg.target
                self._tokenizer = AutoTokenizer.from_pretrained(
                    resolve_model_path(t.model),
                    revision=t.revision,
                    trust_remote_code=t.trust_remote_code,
                    local_files_only=True,  # a local directory or the hub cache; never a download
                )
            except Exception:
                self._tokenizer = None
        return self._tokenizer

    def settings(self) -> list[EngineSetting]:
        eps = sorted(self.endpoints, key=lambda ep: ep.gamma)  # stable: config order within a γ
        return [
            EngineSetting(ep.gamma, endpoint_label(ep), ep.url, endpoint_method(ep)) for ep in eps
        ]

    def _preflight(
        self, client: httpx2.Client, setting: EngineSetting
    ) -> tuple[str, int | None, bool]:
        """Check the server answers; return (model, max context for prompts, /metrics present)."""
        api, origin = split_url(setting.endpoint)
        s = self.cfg.server
        try:
            text = self.get_text(client, api + "/models", timeout=min(s.timeout_s, 15.0))
        except RequestFailed as exc:
            if str(exc).startswith(("HTTP 401", "HTTP 403")):
                raise SpecbenchError(
                    f"the server at {setting.endpoint} refused the request ({exc}); set the API key "
                    "in the environment variable named by server.api_key_env"
                ) from None
            if not str(exc).startswith("HTTP "):  # no answer at all
                raise SpecbenchError(
                    f"cannot reach the server at {setting.endpoint} ({exc}); start it or fix "
                    "server.url"
                ) from None
            text = "{}"
        try:
            listing = json.loads(text)
        except ValueError:
            listing = {}
        if not isinstance(listing, dict):
            listing = {}
        served = [m for m in listing.get("data", []) if isinstance(m, dict)]
        names = [str(m.get("id")) for m in served]
        model = s.model or (names[0] if len(names) == 1 else self.cfg.target.model)
        if names and model not in names:
            raise SpecbenchError(
                f"the server at {setting.endpoint} serves {', '.join(names)}, not '{model}'; "
                "set server.model"
            )
        max_len = next((m.get("max_model_len") for m in served if m.get("id") == model), None)
        max_context = max(1, int(max_len) - self.cfg.max_new_tokens) if max_len else None
        kv_capacity = None
        try:
            metrics_text = self.get_text(client, self.metrics_url_for(api), timeout=10.0)
            metrics_ok = True
            kv_capacity = kv_capacity_from_samples(parse_prometheus(metrics_text))
        except RequestFailed:
            metrics_ok = False
        version = None
        with suppress(Exception):
            version = json.loads(self.get_text(client, origin + "/version", timeout=5.0)).get(
                "version"
            )
        self.server_info[setting.endpoint] = {
            "label": setting.label,
            "gamma": setting.gamma,
            "model": model,
            "max_model_len": max_len,
            "metrics": metrics_ok,
            "server_version": version,
        }
        # vLLM's cache_config_info, kept apart from server_info: `compare` lists server_info
        # differences, and the capacity varies a little from one start of a server to the next
        if kv_capacity is not None:
            self.kv_capacity[setting.endpoint] = {
                "gamma": setting.gamma,
                "label": setting.label,
                "endpoint": setting.endpoint,
                **kv_capacity,
            }
        return model, max_context, metrics_ok

    @contextmanager
    def open(self, setting: EngineSetting) -> Iterator[OpenAISession]:
        # room for the largest concurrency: a request never waits for a connection while timed
        with make_client(self.cfg.server.timeout_s, max(self.cfg.concurrency) + 2) as client:
            model, max_context, metrics_ok = self._preflight(client, setting)
            yield OpenAISession(self, setting, model, max_context, metrics_ok, client)

    def environment(self) -> dict[str, Any]:
        import transformers

        s = self.cfg.server
        return {
            "transformers": transformers.__version__,
            "device": "server",
            "dtype": None,
            "servers": [
                {
                    "url": ep.url,
                    "gamma": ep.gamma,
                    "label": endpoint_label(ep),
                    "method": endpoint_method(ep),
                }
                for ep in self.endpoints
            ],
            "chat": s.chat,
            "prompt_format": s.prompt_format,
            "server_info": self.server_info,
            "memory": self.memory(),
        }

    def memory(self) -> dict[str, Any] | None:
        """env.json's `memory`: the KV capacity each server reports, and the target's and draft's
        footprints computed from their files where they are on this machine."""
        d = self.cfg.draft
        return engine_memory(
            self.cfg.target.model,
            [d.model] if d.method == "model" and d.model else [],
            list(self.kv_capacity.values()),
            revision=self.cfg.target.revision,
        )
