"""`backend: openai`: measure any OpenAI-compatible server (vLLM, SGLang, TensorRT-LLM, …).

specbench changes no speculation setting here: start one server per setting and say in the
config what each runs (`server.url` + `server.gamma` + `server.label`, or several under
`server.endpoints`); a later run with another server can be added to the same directory with
`--resume`. Each request is a streaming completion (`openai_request.py` builds it,
`openai_stream.py` reads and times it, `openai_http.py` retries it); `concurrency` threads keep
that many conversations in flight.

Prometheus `/metrics` is scraped before and after each batch (vLLM's current and V0 counter
names, SGLang's accept-length gauge; `metrics.py`) and around each conversation at concurrency 1;
a server that returns each request's acceptance (`request_metrics.py`) is read per request too.
A server without `/metrics` is still measured; acceptance is marked unavailable. Transient
failures (connection errors, timeouts, a stream cut off, HTTP 408/429/5xx) are retried
`server.retries` times; a request that still fails is recorded with kind "failed" and its error.

    specbench run configs/tiny-openai.yaml
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

from specbench.config import EndpointSpec, RunConfig
from specbench.data import conversation_messages
from specbench.errors import SpecbenchError
from specbench.harness.serving.load.closed_loop import run_threaded
from specbench.harness.serving.load.open_loop import OpenBatch, run_open_threaded
from specbench.harness.serving.metrics.engine_memory import engine_memory, kv_capacity_from_samples
from specbench.harness.serving.metrics.metrics import (
    accept_length_gauge,
    parse_prometheus,
    spec_counters_from_samples,
)
from specbench.harness.serving.openai.endpoints import (
    check_endpoints,
    endpoint_headers,
    endpoint_label,
    endpoint_method,
    endpoints_of,
    metrics_url_of,
)
from specbench.harness.serving.openai.openai_http import (
    RequestFailed,
    get_text,
    make_client,
    split_url,
    with_retries,
)
from specbench.harness.serving.openai.openai_request import prompt_too_long, request_body
from specbench.harness.serving.openai.openai_stream import stream_turn
from specbench.harness.serving.openai.server_facts import served_model, server_facts
from specbench.harness.serving.protocol.base import (
    Conversation,
    ConversationResult,
    OnResult,
    Snapshot,
    TurnResult,
)
from specbench.setting import Setting


class OpenAISession:
    """One server: stream requests, scrape its metrics."""

    def __init__(
        self,
        backend: OpenAIBackend,
        setting: Setting,
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
        self.endpoint = setting.endpoint
        self.gamma = setting.gamma
        self.headers = backend.ep_headers[setting.endpoint]

    def snapshot(self) -> Snapshot:
        if not self.metrics_ok:
            return Snapshot(False, None)
        try:
            url = self.b.metrics_url_for(self.endpoint)
            text = self.b.get_text(self.client, url, timeout=10.0, endpoint=self.endpoint)
        except RequestFailed:
            return Snapshot(False, None)
        samples = parse_prometheus(text)
        return Snapshot(True, spec_counters_from_samples(samples), accept_length_gauge(samples))

    def _count_tokens(self, text: str) -> int | None:
        tok = self.b.tokenizer()
        return None if tok is None else len(tok(text, add_special_tokens=False)["input_ids"])

    def _turn(
        self,
        conv: Conversation,
        messages: list[dict[str, str]],
        seed: int,
        res: ConversationResult,
    ) -> TurnResult:
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

        too_long = prompt_too_long(body, self.b.tokenizer, self.max_context, prompt_tokens)
        if too_long is not None:  # checked before sending: a failed unit that says why
            raise RequestFailed(too_long, retry=False)

        def once() -> TurnResult:
            self.b.spend_request()
            res.attempts += 1
            url = self.api + path
            turn = stream_turn(self.client, url, body, self.headers, self._count_tokens, self.gamma)
            turn.prompt_tokens = turn.prompt_tokens or prompt_tokens
            turn.truncated = truncated
            return turn

        return with_retries(once, self.cfg.server.retries, self.cfg.server.max_retry_after_s)

    def _conversation(self, conv: Conversation, per_request: bool) -> ConversationResult:
        res = ConversationResult()
        before = self.snapshot().counters if per_request else None
        answers: list[str] = []
        try:
            for turn in range(len(conv.prompt.turns)):
                messages = conversation_messages(conv.prompt, answers, turn)
                t = self._turn(conv, messages, conv.seed + turn, res)
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

    def run_open(
        self,
        convs: list[Conversation],
        arrivals: list[float],
        max_in_flight: int,
        max_duration_s: float,
        on_result: OnResult | None = None,
        stop_s: float | None = None,
    ) -> OpenBatch:
        work = lambda c: self._conversation(c, False)  # noqa: E731
        return run_open_threaded(
            work, convs, arrivals, max_in_flight, max_duration_s, on_result, stop_s
        )


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
        # each server's request headers, read from the environment now (a missing one: exit 2)
        self.ep_headers = {ep.url: endpoint_headers(cfg, ep, self.api_key) for ep in self.endpoints}
        self.sent = 0  # completion requests sent, retries included (server.max_requests)
        self.sent_lock = threading.Lock()
        self._tokenizer: Any = None
        self._tokenizer_tried = False
        self.server_info: dict[str, Any] = {}
        self.kv_capacity: dict[str, dict[str, Any]] = {}  # endpoint → what its server reported
        if s.prompt_format == "tokens" and not s.chat and self.tokenizer() is None:
            raise SpecbenchError(
                "server.prompt_format: tokens needs the target's tokenizer: set target.model to a "
                "local model directory or a hub id"
            )

    def endpoint(self, url: str) -> EndpointSpec:
        return next(ep for ep in self.endpoints if ep.url == url)

    def get_text(self, client: httpx2.Client, url: str, timeout: float, endpoint: str) -> str:
        return get_text(client, url, self.ep_headers[endpoint], timeout)

    def metrics_url_for(self, endpoint: str) -> str:
        return metrics_url_of(self.cfg, self.endpoint(endpoint), split_url(endpoint)[1])

    def spend_request(self) -> None:
        """Count one completion request against `server.max_requests`; past it, stop the run."""
        budget = self.cfg.server.max_requests
        with self.sent_lock:
            if budget is not None and self.sent >= budget:
                raise SpecbenchError(
                    f"server.max_requests ({budget}) reached: no more requests are sent; the "
                    "records so far are kept (raise it and rerun with --resume to finish)"
                )
            self.sent += 1

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

    def settings(self) -> list[Setting]:
        eps = sorted(self.endpoints, key=lambda ep: ep.gamma)  # stable: config order within a γ
        return [
            Setting(ep.gamma, endpoint_label(ep), endpoint=ep.url, method=endpoint_method(ep))
            for ep in eps
        ]

    def _preflight(self, client: httpx2.Client, setting: Setting) -> tuple[str, int | None, bool]:
        """Check the server answers; return (model, max context for prompts, /metrics present)."""
        api, origin = split_url(setting.endpoint)
        s = self.cfg.server
        try:
            text = self.get_text(client, api + "/models", min(s.timeout_s, 15.0), setting.endpoint)
        except RequestFailed as exc:
            if str(exc).startswith(("HTTP 401", "HTTP 403")):
                raise SpecbenchError(
                    f"the server at {setting.endpoint} refused the request ({exc}); set the API key "
                    "in the environment variable named by server.api_key_env (or server.headers)"
                ) from None
            if not str(exc).startswith("HTTP "):  # no answer at all
                raise SpecbenchError(
                    f"cannot reach the server at {setting.endpoint} ({exc}); start it or fix "
                    "server.url"
                ) from None
            text = "{}"
        model, entry = served_model(text, s.model, self.cfg.target.model, setting.endpoint)
        max_len = entry.get("max_model_len")
        max_context = max(1, int(max_len) - self.cfg.max_new_tokens) if max_len else None
        kv_capacity = None
        try:
            metrics_url = self.metrics_url_for(setting.endpoint)
            metrics_text = self.get_text(client, metrics_url, 10.0, setting.endpoint)
            metrics_ok = True
            kv_capacity = kv_capacity_from_samples(parse_prometheus(metrics_text))
        except RequestFailed:
            metrics_ok = False
        self.server_info[setting.endpoint] = {
            "label": setting.drafter,
            "gamma": setting.gamma,
            "model": model,
            "max_model_len": max_len,
            "metrics": metrics_ok,
            **server_facts(
                lambda path: self.get_text(client, origin + path, 5.0, setting.endpoint),
                entry,
            ),
        }
        # vLLM's cache_config_info, kept apart from server_info: `compare` lists server_info
        # differences, and the capacity varies a little from one start of a server to the next
        if kv_capacity is not None:
            self.kv_capacity[setting.endpoint] = {
                "gamma": setting.gamma,
                "label": setting.drafter,
                "endpoint": setting.endpoint,
                **kv_capacity,
            }
        return model, max_context, metrics_ok

    @contextmanager
    def open(self, setting: Setting) -> Iterator[OpenAISession]:
        # room for the largest concurrency: a request never waits for a connection while timed
        load = self.cfg.load
        room = max(*self.cfg.concurrency, load.max_in_flight if load.open_loop else 0)
        with make_client(self.cfg.server.timeout_s, room + 2) as client:
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
