"""`backend: openai`: measure any OpenAI-compatible server (vLLM, SGLang, TensorRT-LLM, …).

specbench changes no speculation setting here: start one server per setting and say in the
config what each runs (`server.url` + `server.gamma` + `server.label`, or several under
`server.endpoints`); a later run with another server can be added to the same directory with
`--resume`. Each request is a streaming `/v1/completions` (or `/v1/chat/completions` with
`server.chat: true`, the server applying its chat template) with
`stream_options.include_usage`, timed here: TTFT = first chunk carrying text, e2e = end of the
stream, tokens = the usage block's completion_tokens (else the tokenizer's count of the text,
else the chunk count), TPOT = (e2e − TTFT) / (tokens − 1) (docs/theory.md §6: chunk-to-chunk gaps
overstate it under speculation, when one chunk carries several tokens). `concurrency` threads
keep that many conversations in flight.

Prometheus `/metrics` is scraped before and after each batch (vLLM's current and V0 counter
names, SGLang's accept-length gauge; `engine_metrics.py`) and around each conversation at
concurrency 1. A server without `/metrics` is still measured; acceptance is marked unavailable.

Every stream is validated: each server-sent event must parse as a completion chunk (pydantic
models below), and the stream must end with a chunk carrying `finish_reason` and then `[DONE]`;
anything else fails the request with the reason (a malformed chunk is not skipped, a stream cut
short is not measured as a short answer). Transient failures (connection errors, timeouts, a
stream cut off, HTTP 408/429/5xx) are retried `server.retries` times, after the server's
`Retry-After` when it sends one; a request that still fails is recorded with kind "failed" and
its error. HTTP is httpx2 (the maintained httpx, already installed with huggingface_hub) and its
SSE parser: one connection pool per server, so requests reuse connections as a serving client
does, and TTFT does not include a TCP handshake per request.

    specbench run configs/tiny-openai.yaml
"""

from __future__ import annotations

import email.utils
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
from pydantic import BaseModel, ValidationError

from specbench.config import RunConfig
from specbench.data import build_context_ids, conversation_messages
from specbench.data.render import plain_text
from specbench.errors import SpecbenchError
from specbench.harness.serving.driver import (
    Conversation,
    ConversationResult,
    OnResult,
    Setting,
    Snapshot,
    TurnResult,
    endpoint_label,
    endpoints_of,
)
from specbench.harness.serving.metrics import (
    accept_length_gauge,
    parse_prometheus,
    spec_counters_from_samples,
)

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
    """A request that failed; `retry` says whether trying again may help, `retry_after_s` how long
    the server asked to wait first (HTTP Retry-After)."""

    def __init__(self, message: str, retry: bool, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry = retry
        self.retry_after_s = retry_after_s


MAX_RETRY_AFTER_S = 60.0  # a server asking for longer is not waited for past this


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delay-seconds or an HTTP date, RFC 9110 §10.2.3)."""
    if not value:
        return None
    try:
        secs = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        secs = when.timestamp() - time.time()
    return min(max(secs, 0.0), MAX_RETRY_AFTER_S) if secs == secs else None  # NaN: ignored


def _status_error(resp: httpx2.Response) -> RequestFailed:
    """A non-2xx response as a RequestFailed (its body's error message, Retry-After kept)."""
    try:
        resp.read()
        body = resp.text
        detail: Any = json.loads(body).get("error", body) if body.startswith("{") else body
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
    except Exception:
        detail = ""
    text = " ".join(str(detail).split())[:200]
    code = resp.status_code
    return RequestFailed(
        f"HTTP {code}: {text}", code in RETRY_HTTP, _retry_after(resp.headers.get("retry-after"))
    )


# --- the completion-chunk schema (OpenAI streaming; extra fields any server adds are ignored)


class _Delta(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    text: str | None = None  # /v1/completions
    delta: _Delta | None = None  # /v1/chat/completions
    token_ids: list[int] | None = None  # vLLM with return_token_ids
    finish_reason: str | None = None


class _Usage(BaseModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class StreamChunk(BaseModel):
    choices: list[_Choice] = []
    usage: _Usage | None = None
    error: Any = None


def parse_chunk(data: str, index: int) -> StreamChunk:
    """One event's data as a completion chunk, or RequestFailed naming what is wrong with it."""
    try:
        return StreamChunk.model_validate_json(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err.get("loc", ())) or "chunk"
        raise RequestFailed(
            f"malformed stream chunk {index} ({where}: {err.get('msg', '')}): {data[:80]!r}"[:300],
            False,  # a server that sends malformed JSON sends it again
        ) from None


def _transport_error(exc: httpx2.HTTPError) -> RequestFailed:
    if isinstance(exc, httpx2.TimeoutException):
        return RequestFailed(f"timed out ({type(exc).__name__})", True)
    first = (str(exc).strip().splitlines() or [""])[0]
    return RequestFailed(f"{type(exc).__name__}: {first}"[:300], True)


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

    # --- metrics ---
    def snapshot(self) -> Snapshot:
        if not self.metrics_ok:
            return Snapshot(False, None)
        try:
            text = self.b.get_text(self.client, self.b.metrics_url_for(self.api), timeout=10.0)
        except RequestFailed:
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
        text: list[str] = []
        ids: list[int] = []
        usage = _Usage()
        finish = ""
        chunks = 0
        ended = False
        first: float | None = None
        t0 = time.perf_counter()
        try:
            with self.client.sse(
                self.api + path, method="POST", json=body, headers=self.b.headers()
            ) as source:
                if source.response.status_code >= 300:
                    raise _status_error(source.response)
                for index, event in enumerate(source):
                    data = event.data.strip()
                    if not data:
                        continue
                    if data == "[DONE]":
                        ended = True
                        break
                    msg = parse_chunk(data, index)
                    if msg.error:
                        raise RequestFailed(f"server error: {msg.error}"[:300], False)
                    if msg.usage is not None:
                        usage = msg.usage
                    for choice in msg.choices:
                        piece = choice.text
                        if piece is None:
                            piece = (choice.delta.content if choice.delta else None) or ""
                        if choice.token_ids:
                            ids.extend(choice.token_ids)
                        if piece or choice.token_ids:
                            chunks += 1
                            if first is None:
                                first = time.perf_counter()
                            text.append(piece)
                        if choice.finish_reason:
                            finish = choice.finish_reason
        except httpx2.HTTPError as exc:  # connect/read timeouts, a connection cut mid-stream
            raise _transport_error(exc) from None
        end = time.perf_counter()
        if not ended or not finish:
            # a stream cut short would be measured as a short answer, skewing TPOT and tokens/s
            missing = " and ".join(
                m for m, ok in (("a finish_reason", bool(finish)), ("[DONE]", ended)) if not ok
            )
            raise RequestFailed(f"stream ended without {missing} after {chunks} chunks", True)
        out = "".join(text)
        if usage.completion_tokens is not None:
            n = int(usage.completion_tokens)
        elif ids:
            n = len(ids)
        elif (tok := self.b.tokenizer()) is not None:
            n = len(tok(out, add_special_tokens=False)["input_ids"])
        else:
            n = chunks
        return TurnResult(
            prompt_tokens=int(usage.prompt_tokens or 0),
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
                backoff = min(0.5 * 2**attempt, 5.0)
                time.sleep(exc.retry_after_s if exc.retry_after_s is not None else backoff)
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
        self,
        convs: list[Conversation],
        temperature: float,
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
                deliver(i, self._conversation(conv, temperature, True))
        else:
            work = lambda c: self._conversation(c, temperature, False)  # noqa: E731
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

    def get_text(self, client: httpx2.Client, url: str, timeout: float) -> str:
        try:
            resp = client.get(url, headers=self.headers(), timeout=timeout)
        except httpx2.HTTPError as exc:
            raise _transport_error(exc) from None
        if resp.status_code >= 300:
            raise _status_error(resp)
        return resp.text

    def client(self) -> httpx2.Client:
        """A connection pool for one server: room for the largest concurrency (a request never
        waits for a connection while the clock runs), `timeout_s` on each connect and read."""
        s = self.cfg.server
        return httpx2.Client(
            timeout=httpx2.Timeout(s.timeout_s),
            limits=httpx2.Limits(max_connections=max(self.cfg.concurrency) + 2),
        )

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

    def _preflight(self, client: httpx2.Client, setting: Setting) -> tuple[str, int | None, bool]:
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
        try:
            self.get_text(client, self.metrics_url_for(api), timeout=10.0)
            metrics_ok = True
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
        return model, max_context, metrics_ok

    @contextmanager
    def open(self, setting: Setting) -> Iterator[OpenAISession]:
        with self.client() as client:
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
                {"url": ep.url, "gamma": ep.gamma, "label": endpoint_label(ep)}
                for ep in self.endpoints
            ],
            "chat": s.chat,
            "prompt_format": s.prompt_format,
            "server_info": self.server_info,
        }
