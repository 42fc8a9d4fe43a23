"""A simulated speculative OpenAI-compatible server for the openai backend's tests: it drafts and
accepts like a real engine, so its `/metrics` counters and its per-request metrics obey the
identity specbench reconciles (docs/theory.md §17), and it can misbehave the ways a shared
deployment does.

Each streaming `/v1/completions` or `/v1/chat/completions` request is decoded as vLLM would: the
first token at prefill, then steps that draft `gamma` tokens, accept a prefix of them (each with
probability `alpha`, from a generator seeded by the request's `seed`), and emit the accepted
tokens plus one; the last step may accept past `max_tokens` (counted, not returned). A request
ends at `max_tokens` ("length") or, with probability `p_stop` per step, earlier ("stop").

- `/metrics`: vLLM's cumulative counters (`vllm:spec_decode_num_drafts_total`, …, per position),
  shared by everything the server decodes, foreign traffic included;
- `per_request_metrics=True`: vLLM's `metrics.speculative_decoding` on the final usage chunk
  (only when the request asked for `stream_options.include_usage`), as
  `--per-request-spec-decode-metrics summary` does;
- `foreign_every=k`: with every k-th request, another client's request of `foreign_tokens`
  tokens is decoded too (counted before that request's stream ends) (its counters land on `/metrics`, nothing is returned to specbench);
- `rate_limit=[…]`: the first requests are answered 429 with `Retry-After: <value>`;
- `required_headers={name: value}`: a request without them is answered 401;
- `/version` and `/v1/models` (with `root`, `owned_by`, `max_model_len`).

Bounded like tests/fault_server.py: 127.0.0.1 on an ephemeral port, a daemon thread, at most
`max_requests` POSTs, shut down `lifetime_s` after starting. `log` keeps each POST's arrival time,
headers and body.

    with SpecServer(gamma=3, alpha=0.7, per_request_metrics=True) as srv:
        ...  # point server.url at srv.url
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import numpy as np

from tests.local_server import JsonHandler, LocalServer


class SpecServer(LocalServer):
    def __init__(
        self,
        *,
        gamma: int = 3,
        alpha: float = 0.7,
        p_stop: float = 0.0,
        per_request_metrics: bool = False,
        foreign_every: int = 0,
        foreign_tokens: int = 64,
        rate_limit: list[str] | None = None,
        required_headers: dict[str, str] | None = None,
        step_s: float = 0.0005,
        max_requests: int = 400,
        lifetime_s: float = 120.0,
    ) -> None:
        self.gamma, self.alpha, self.p_stop = gamma, alpha, p_stop
        self.per_request_metrics = per_request_metrics
        self.foreign_every, self.foreign_tokens = foreign_every, foreign_tokens
        self.rate_limit = list(rate_limit or [])
        self.required_headers = dict(required_headers or {})
        self.step_s = step_s
        self.max_requests = max_requests
        self.lock = threading.Lock()
        self.log: list[dict[str, Any]] = []
        self.drafts = self.draft_tokens = self.accepted = 0
        self.per_pos = [0] * gamma
        self.foreign_requests = 0
        self.metrics_reads = 0
        self.closed = threading.Event()
        self.foreign_rng = np.random.default_rng(12345)
        self.foreign_lock = threading.Lock()
        srv = self

        class Handler(JsonHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    model = {"id": "sim", "root": "/models/sim", "owned_by": "vllm"}
                    self._json(200, {"data": [{**model, "max_model_len": 4096}]})
                elif self.path == "/version":
                    self._json(200, {"version": "0.0.sim"})
                elif self.path == "/metrics":
                    srv.metrics_reads += 1
                    self._send(200, srv.metrics_text().encode(), "text/plain")
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with srv.lock:
                    if len(srv.log) >= srv.max_requests:
                        self._json(503, {"error": {"message": "sim server: budget spent"}})
                        return
                    srv.log.append(
                        {"t": time.monotonic(), "headers": dict(self.headers), "body": body}
                    )
                    number = len(srv.log)  # this POST's 1-based number
                    limited = srv.rate_limit.pop(0) if srv.rate_limit else None
                for name, value in srv.required_headers.items():
                    if self.headers.get(name) != value:
                        self._json(401, {"error": {"message": f"missing header {name}"}})
                        return
                if limited is not None:
                    self._json(429, {"error": {"message": "slow down"}}, {"Retry-After": limited})
                    return
                self._stream(body, number)

            def _event(self, obj: Any) -> None:
                data = f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _stream(self, body: dict[str, Any], number: int) -> None:
                n_max = int(body.get("max_tokens", 16))
                rng = np.random.default_rng(int(body.get("seed") or 0))
                steps, n, finish = srv.decode(rng, n_max)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chat = "messages" in body
                emitted = 0
                for k in [1] + [j + 1 for j in steps]:  # tokens per engine step
                    k = min(k, n - emitted)
                    if k <= 0 or srv.closed.wait(srv.step_s):
                        break
                    emitted += k
                    text = "x" * k
                    last = emitted >= n
                    choice: dict[str, Any] = {"index": 0, "finish_reason": finish if last else None}
                    choice.update({"delta": {"content": text}} if chat else {"text": text})
                    self._event({"choices": [choice]})
                srv.count(steps, foreign=False)
                srv.foreign(number)  # foreign traffic decoded in the same window
                if (body.get("stream_options") or {}).get("include_usage"):
                    final: dict[str, Any] = {
                        "choices": [],
                        "usage": {"prompt_tokens": 5, "completion_tokens": n},
                    }
                    if srv.per_request_metrics:
                        final["metrics"] = {"speculative_decoding": srv.spec_metrics(steps)}
                    self._event(final)
                self._event("[DONE]")
                self.wfile.write(b"0\r\n\r\n")

        self.serve(Handler, lifetime_s)

    # --- the simulated engine
    def decode(self, rng: np.random.Generator, n_max: int) -> tuple[list[int], int, str]:
        """(accepted draft tokens per step, tokens returned, finish reason) of one request."""
        steps: list[int] = []
        n = 1  # the prefill's token
        while n < n_max:
            if self.p_stop and rng.random() < self.p_stop:
                return steps, n, "stop"
            j = 0
            while j < self.gamma and rng.random() < self.alpha:
                j += 1
            steps.append(j)
            n += j + 1  # may pass n_max: the overflow is counted, not returned
        return steps, min(n, n_max), "length"

    def count(self, steps: list[int], foreign: bool) -> None:
        with self.lock:
            self.drafts += len(steps)
            self.draft_tokens += self.gamma * len(steps)
            self.accepted += sum(steps)
            for j in steps:
                for i in range(j):
                    self.per_pos[i] += 1
            self.foreign_requests += foreign

    def spec_metrics(self, steps: list[int]) -> dict[str, Any]:
        hist = [0] * (self.gamma + 1)
        for j in steps:
            hist[j] += 1
        acc = sum(steps)
        return {
            "mean_acceptance_length": 1 + acc / len(steps) if steps else 1.0,
            "draft_acceptance_rate": acc / (self.gamma * len(steps)) if steps else 0.0,
            "acceptance_histogram": hist,
            "num_spec_steps": len(steps),
            "num_accepted_draft_tokens": acc,
            "num_draft_tokens": self.gamma * len(steps),
            "num_spec_tokens": self.gamma,
        }

    def foreign(self, number: int) -> None:
        if self.foreign_every and number % self.foreign_every == 0:
            with self.foreign_lock:  # one generator shared by the handler threads
                steps, _, _ = self.decode(self.foreign_rng, self.foreign_tokens)
            self.count(steps, foreign=True)

    def metrics_text(self) -> str:
        p = "vllm:spec_decode_"
        with self.lock:
            lines = [
                f"# TYPE {p}num_drafts counter",
                f'{p}num_drafts_total{{engine="0"}} {self.drafts}',
                f"# TYPE {p}num_draft_tokens counter",
                f'{p}num_draft_tokens_total{{engine="0"}} {self.draft_tokens}',
                f"# TYPE {p}num_accepted_tokens counter",
                f'{p}num_accepted_tokens_total{{engine="0"}} {self.accepted}',
                f"# TYPE {p}num_accepted_tokens_per_pos counter",
            ]
            lines += [
                f'{p}num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {v}'
                for i, v in enumerate(self.per_pos)
            ]
        return "\n".join(lines) + "\n"
