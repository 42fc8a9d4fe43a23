"""`backend: openai`: measure any OpenAI-compatible server (vLLM, SGLang, TensorRT-LLM, …).

specbench changes no speculation setting here: start one server per setting and say in the
config what each runs (`server.url` + `server.gamma` + `server.label`, or several under
`server.endpoints`); a later run with another server can be added to the same directory with
`--resume`. Each request is a streaming `/v1/completions` (or `/v1/chat/completions` with
`server.chat: true`, the server applying its chat template) with
`stream_options.include_usage`, timed here: TTFT = first chunk carrying text, e2e = end of the
stream, tokens = the usage block's completion_tokens (else the tokenizer's count of the text,
else the chunk count), TPOT = (e2e − TTFT) / (tokens − 1) (THEORY §6: chunk-to-chunk gaps
overstate it under speculation, when one chunk carries several tokens). `concurrency` threads
keep that many conversations in flight.

Prometheus `/metrics` is scraped before and after each batch (vLLM's current and V0 counter
names, SGLang's accept-length gauge; `engine_metrics.py`) and around each conversation at
concurrency 1. A server without `/metrics` is still measured; acceptance is marked unavailable.
Transient failures (connection errors, timeouts, HTTP 429/5xx) are retried `server.retries` times;
a request that still fails is recorded with kind "failed" and its error.

    specbench run configs/tiny-openai.yaml
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from specbench.config import RunConfig
from specbench.data import build_context_ids, conversation_messages
from specbench.data.render import plain_text
from specbench.engine.engine_metrics import (
    accept_length_gauge,
    parse_prometheus,
    spec_counters_from_samples,
)
from specbench.engine.engine_run import (
    Conversation,
    ConversationResult,
    Setting,
    Snapshot,
    TurnResult,
    endpoint_label,
    endpoints_of,
)
from specbench.errors import SpecbenchError

RETRY_HTTP = (408, 429, 500, 502, 503, 504)


def split_url(url: str) -> tuple[str, str]:
    """(API base ending in /v1, server origin) from a URL given with or without /v1."""
    base = url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise SpecbenchError(f"server URL must start with http:// or https://, got '{url}'")
    if base.endswith("/v1"):
        return base, base[: -len("/v1")]
    return base + "/v1", base


class RequestFailed(Exception):
    """A request that failed; `retry` says whether trying again may help."""

    def __init__(self, message: str, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


def _http_error(exc: urllib.error.HTTPError) -> RequestFailed:
    try:
        body = exc.read().decode(errors="replace")
        detail = json.loads(body).get("error", body) if body.startswith("{") else body
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
    except Exception:
        detail = ""
    text = " ".join(str(detail).split())[:200]
    return RequestFailed(f"HTTP {exc.code}: {text}", exc.code in RETRY_HTTP)


class OpenAISession:
    """One server: stream requests, scrape its metrics."""

    def __init__(
        self,
        backend: OpenAIBackend,
        setting: Setting,
        model: str,
        max_context: int | None,
        metrics_ok: bool,
    ) -> None:
        self.b = backend
        self.cfg = backend.cfg
        self.api, _ = split_url(setting.endpoint)
        self.model = model
        self.max_context = max_context
        self.metrics_ok = metrics_ok

    # --- metrics ---
    def snapshot(self) -> Snapshot:
        if not self.metrics_ok:
            return Snapshot(False, None)
        try:
            text = self.b.get_text(self.b.metrics_url_for(self.api), timeout=10.0)
        except (OSError, RequestFailed):
            return Snapshot(False, None)
        samples = parse_prometheus(text)
        return Snapshot(True, spec_counters_from_samples(samples), accept_length_gauge(samples))

    # --- requests ---
    def _body(
        self, messages: list[dict[str, str]], temperature: float, seed: int
    ) -> tuple[str, dict[str, Any], int, bool]:
        """(path, JSON body, prompt tokens if known here, truncated) for one turn."""
        cfg, s = self.cfg, self.cfg.server
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": cfg.max_new_tokens,
            "temperature": temperature,
            "top_p": cfg.sampling.top_p,
            "seed": seed,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if cfg.sampling.top_k > 0:
            body["top_k"] = cfg.sampling.top_k  # an extension vLLM and SGLang accept
        if cfg.stop:
            body["stop"] = list(cfg.stop)
        prompt_tokens, truncated = 0, False
        if s.chat:
            path = "/chat/completions"
            body["messages"] = messages
        else:
            path = "/completions"
            tok = self.b.tokenizer()
            if s.prompt_format == "tokens":
                ids, truncated = build_context_ids(
                    tok, messages, cfg.chat_template, self.max_context
                )
                body["prompt"], prompt_tokens = ids, len(ids)
            elif (
                tok is not None
                and cfg.chat_template != "off"
                and getattr(tok, "chat_template", None)
            ):
                body["prompt"] = tok.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=False
                )
            else:
                if cfg.chat_template == "on":
                    raise SpecbenchError(
                        "chat_template: on needs the target's tokenizer here, or server.chat: true"
                    )
                body["prompt"] = plain_text(messages)
        return path, {**body, **s.extra_body}, prompt_tokens, truncated

    def _stream_once(self, path: str, body: dict[str, Any]) -> TurnResult:
        req = urllib.request.Request(
            self.api + path,
            data=json.dumps(body).encode(),
            headers={**self.b.headers(), "Content-Type": "application/json"},
            method="POST",
        )
        text: list[str] = []
        ids: list[int] = []
        usage: dict[str, Any] = {}
        finish = ""
        chunks = 0
        first: float | None = None
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=self.cfg.server.timeout_s) as resp:
                for raw in resp:
                    line = raw.decode("utf-8", errors="replace").strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        break
                    try:
                        msg = json.loads(data)
                    except json.JSONDecodeError:
                        continue
                    if msg.get("error"):
                        raise RequestFailed(f"server error: {msg['error']}"[:300], False)
                    if msg.get("usage"):
                        usage = msg["usage"]
                    for choice in msg.get("choices") or []:
                        piece = choice.get("text")
                        if piece is None:
                            piece = (choice.get("delta") or {}).get("content") or ""
                        if choice.get("token_ids"):
                            ids.extend(choice["token_ids"])
                        if piece or choice.get("token_ids"):
                            chunks += 1
                            if first is None:
                                first = time.perf_counter()
                            text.append(piece)
                        if choice.get("finish_reason"):
                            finish = str(choice["finish_reason"])
        except urllib.error.HTTPError as exc:
            raise _http_error(exc) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RequestFailed(f"{type(exc).__name__}: {reason}"[:300], True) from None
        end = time.perf_counter()
        out = "".join(text)
        if usage.get("completion_tokens") is not None:
            n = int(usage["completion_tokens"])
        elif ids:
            n = len(ids)
        elif (tok := self.b.tokenizer()) is not None:
            n = len(tok(out, add_special_tokens=False)["input_ids"])
        else:
            n = chunks
        return TurnResult(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            new_tokens=n,
            ttft_ms=((first if first is not None else end) - t0) * 1000.0,
            e2e_ms=(end - t0) * 1000.0,
            text=out,
            stop_reason=finish,
            output_ids=ids or None,
            chunks=chunks,
        )

    def _turn(self, messages: list[dict[str, str]], temperature: float, seed: int) -> TurnResult:
        path, body, prompt_tokens, truncated = self._body(messages, temperature, seed)
        retries = self.cfg.server.retries
        for attempt in range(retries + 1):
            try:
                res = self._stream_once(path, body)
                res.prompt_tokens = res.prompt_tokens or prompt_tokens
                res.truncated = truncated
                return res
            except RequestFailed as exc:
                if not exc.retry or attempt == retries:
                    raise RequestFailed(
                        f"{exc} (after {attempt + 1} attempt{'s' if attempt else ''})", False
                    ) from None
                time.sleep(min(0.5 * 2**attempt, 5.0))
        raise AssertionError("unreachable")

    def _conversation(
        self, conv: Conversation, temperature: float, per_request: bool
    ) -> ConversationResult:
        res = ConversationResult()
        before = self.snapshot().counters if per_request else None
        answers: list[str] = []
        try:
            for turn in range(len(conv.prompt.turns)):
                messages = conversation_messages(conv.prompt, answers, turn)
                t = self._turn(messages, temperature, conv.seed + turn)
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
        self, convs: list[Conversation], temperature: float, concurrency: int
    ) -> list[ConversationResult]:
        per_request = concurrency == 1
        if concurrency == 1:
            return [self._conversation(c, temperature, True) for c in convs]
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return list(pool.map(lambda c: self._conversation(c, temperature, per_request), convs))


class OpenAIBackend:
    """The servers of an openai run, one per setting."""

    name = "openai"

    def __init__(self, cfg: RunConfig, out_dir: Path) -> None:
        self.cfg = cfg
        s = cfg.server
        self.endpoints = endpoints_of(cfg)
        gammas = [ep.gamma for ep in self.endpoints]
        if len(set(gammas)) != len(gammas):
            dup = next(g for g in gammas if gammas.count(g) > 1)
            raise SpecbenchError(
                f"server.endpoints: two servers run gamma {dup}; a run compares settings by γ, so "
                "measure another drafter at the same γ in its own run directory"
            )
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
        if s.prompt_format == "tokens" and not s.chat and self.tokenizer() is None:
            raise SpecbenchError(
                "server.prompt_format: tokens needs the target's tokenizer: set target.model to a "
                "local model directory or a hub id"
            )

    # --- HTTP helpers ---
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def get_text(self, url: str, timeout: float) -> str:
        req = urllib.request.Request(url, headers=self.headers())
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return str(resp.read().decode("utf-8", errors="replace"))
        except urllib.error.HTTPError as exc:
            raise _http_error(exc) from None

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

    # --- settings ---
    def settings(self) -> list[Setting]:
        eps = sorted(self.endpoints, key=lambda ep: ep.gamma)
        return [Setting(ep.gamma, endpoint_label(ep), ep.url) for ep in eps]

    def _preflight(self, setting: Setting) -> tuple[str, int | None, bool]:
        """Check the server answers; return (model, max context for prompts, /metrics present)."""
        api, origin = split_url(setting.endpoint)
        s = self.cfg.server
        try:
            listing = json.loads(self.get_text(api + "/models", timeout=min(s.timeout_s, 15.0)))
        except RequestFailed as exc:
            if str(exc).startswith(("HTTP 401", "HTTP 403")):
                raise SpecbenchError(
                    f"the server at {setting.endpoint} refused the request ({exc}); set the API key "
                    "in the environment variable named by server.api_key_env"
                ) from None
            listing = {}
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SpecbenchError(
                f"cannot reach the server at {setting.endpoint} ({reason}); start it or fix server.url"
            ) from None
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
        try:
            self.get_text(self.metrics_url_for(api), timeout=10.0)
            metrics_ok = True
        except (OSError, RequestFailed):
            metrics_ok = False
        version = None
        with suppress(Exception):
            version = json.loads(self.get_text(origin + "/version", timeout=5.0)).get("version")
        self.server_info[setting.endpoint] = {
            "label": setting.label,
            "gamma": setting.gamma,
            "model": model,
            "max_model_len": max_len,
            "metrics": metrics_ok,
            "server_version": version,
        }
        return model, max_context, metrics_ok

    @contextmanager
    def open(self, setting: Setting) -> Iterator[OpenAISession]:
        model, max_context, metrics_ok = self._preflight(setting)
        yield OpenAISession(self, setting, model, max_context, metrics_ok)

    def environment(self) -> dict[str, Any]:
        import transformers

        s = self.cfg.server
        return {
            "transformers": transformers.__version__,
            "device": "server",
            "dtype": None,
            "servers": [
                {"url": ep.url, "gamma": ep.gamma, "label": endpoint_label(ep)}
                for ep in self.endpoints
            ],
            "chat": s.chat,
            "prompt_format": s.prompt_format,
            "server_info": self.server_info,
        }
