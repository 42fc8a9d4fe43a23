"""Small engine stand-ins for the canary integration test: each serves vLLM-style metrics (or
SGLang-style: SGLang 0.5.23's names, types and label names, sglang/srt/observability/
metrics_collector.py) on `/metrics` (prometheus_client's own registry and exposition) and its
request log on `/logs.jsonl`, on 127.0.0.1 at a free port. A traffic thread feeds a canary and its control side by side (one
load factor per tick, shared), with the differences a scenario plants."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0)
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)


@dataclass(frozen=True)
class Plant:
    tpot_factor: float = 1.0
    error_rate: float = 0.01
    length_factor: float = 1.0
    acceptance: float = 0.7
    speculative: bool = False


class Engine:
    """One server: its metrics registry and its request log."""

    def __init__(self, plant: Plant, engine: str = "vllm") -> None:
        self.plant = plant
        self.registry = CollectorRegistry()
        r = self.registry
        self.sglang = engine == "sglang"
        if self.sglang:
            self._sglang_metrics(r)
        else:
            self._vllm_metrics(r)
        self.lock = threading.Lock()
        self.rows: list[str] = []  # the request log, one JSON object per request
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _sglang_metrics(self, r: CollectorRegistry) -> None:
        # SGLang counts a request it aborted among the finished ones and has no errors counter;
        # it exports the mean accept length as a gauge
        stream = ["model_name", "is_streaming"]
        self.finished = Counter("sglang:num_requests_total", "", stream, registry=r)
        self.tpot = Histogram(
            "sglang:request_time_per_output_token_seconds",
            "",
            stream,
            buckets=TPOT_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "sglang:e2e_request_latency_seconds", "", stream, buckets=E2E_BUCKETS, registry=r
        )
        self.tokens = Histogram(
            "sglang:generation_tokens_histogram",
            "",
            ["model_name"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        if self.plant.speculative:
            self.accept_length = Gauge("sglang:spec_accept_length", "", ["model_name"], registry=r)

    def _vllm_metrics(self, r: CollectorRegistry) -> None:
        plant = self.plant
        self.success = Counter("vllm:request_success", "", ["finished_reason"], registry=r)
        self.http = Counter("http_requests", "", ["status"], registry=r)
        self.tpot = Histogram(
            "vllm:request_time_per_output_token_seconds", "", buckets=TPOT_BUCKETS, registry=r
        )
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds", "", buckets=E2E_BUCKETS, registry=r
        )
        self.tokens = Histogram(
            "vllm:request_generation_tokens", "", buckets=TOKEN_BUCKETS, registry=r
        )
        if plant.speculative:
            self.accepted = Counter("vllm:spec_decode_num_accepted_tokens", "", registry=r)
            self.proposed = Counter("vllm:spec_decode_num_draft_tokens", "", registry=r)
            self.drafts = Counter("vllm:spec_decode_num_drafts", "", registry=r)

    @property
    def address(self) -> str:
        port = self.server.server_address[1]
        return f"127.0.0.1:{port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self._send(head=True)

            def do_GET(self) -> None:
                self._send(head=False)

            def _send(self, head: bool) -> None:
                with engine.lock:
                    if self.path == "/metrics":
                        body = generate_latest(engine.registry)
                    elif self.path == "/logs.jsonl":
                        body = "".join(engine.rows).encode()
                    else:
                        self.send_error(404)
                        return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        return Handler

    def serve(self, rng: np.random.Generator, n: int, load: float) -> None:
        if self.sglang:
            self._serve_sglang(rng, n, load)
            return
        p = self.plant
        now = time.time()
        with self.lock:
            for _ in range(n):
                if rng.random() < p.error_rate:
                    self.http.labels(status="5xx").inc()
                    self.rows.append(json.dumps({"timestamp": now, "status": 500}) + "\n")
                    continue
                self.http.labels(status="2xx").inc()
                tpot = 0.03 * load * p.tpot_factor * rng.lognormal(0, 0.25)
                out = int(min(max(round(150 * p.length_factor * rng.lognormal(0, 0.5)), 1), 1000))
                self.success.labels(finished_reason="length" if out >= 1000 else "stop").inc()
                self.tpot.observe(tpot)
                self.e2e.observe(0.2 * load + tpot * out)
                self.tokens.observe(out)
                row = {
                    "timestamp": now,
                    "status": 200,
                    "tpot_ms": tpot * 1000,
                    "output_tokens": out,
                }
                self.rows.append(
                    json.dumps(row | {"e2e_ms": (0.2 * load + tpot * out) * 1000}) + "\n"
                )
                if p.speculative:
                    drafts = int(np.ceil(out / (1 + 4 * p.acceptance)))
                    self.drafts.inc(drafts)
                    self.proposed.inc(4 * drafts)
                    self.accepted.inc(int(rng.binomial(4 * drafts, p.acceptance)))

    def _serve_sglang(self, rng: np.random.Generator, n: int, load: float) -> None:
        p = self.plant
        with self.lock:
            for i in range(n):
                s = "true" if i % 2 else "false"
                self.finished.labels("m", s).inc()
                tpot = 0.03 * load * p.tpot_factor * rng.lognormal(0, 0.25)
                out = int(min(max(round(150 * p.length_factor * rng.lognormal(0, 0.5)), 1), 1000))
                self.e2e.labels("m", s).observe(0.2 * load + tpot * out)
                self.tokens.labels("m").observe(out)
                if rng.random() >= p.error_rate:  # an abort has no TPOT observation
                    self.tpot.labels("m", s).observe(tpot)
            if p.speculative:
                self.accept_length.labels("m").set(1 + 4 * p.acceptance)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Traffic:
    """Feeds pairs of engines every `tick_s`: Poisson arrivals, one shared load factor."""

    def __init__(
        self, pairs: list[tuple[Engine, Engine]], rate_per_s: float, tick_s: float = 0.05
    ) -> None:
        self.pairs, self.rate, self.tick = pairs, rate_per_s, tick_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = np.random.default_rng(7)
        while not self.stop.wait(self.tick):
            load = float(rng.lognormal(0, 0.2))
            for canary, control in self.pairs:
                canary.serve(rng, int(rng.poisson(self.rate * self.tick)), load)
                control.serve(rng, int(rng.poisson(self.rate * self.tick)), load)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


class Files:
    """Static files over HTTP (request logs where a gateway publishes them)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        files_ = files

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self._send(head=True)

            def do_GET(self) -> None:
                self._send(head=False)

            def _send(self, head: bool) -> None:
                body = files_.get(self.path.lstrip("/"))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
