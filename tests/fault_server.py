"""A fault-injecting OpenAI-compatible server for the openai backend's tests.

It serves `/v1/models`, `/metrics` (unless `metrics=False`) and streaming `/v1/completions` /
`/v1/chat/completions` over HTTP/1.1 with chunked bodies (as vLLM does), and misbehaves on
request: each POST takes the next fault from `plan` (then `default`), or the fault a marker in
its prompt text contains (`faults_by_marker`: a fault, or a list of them taken one per matching
request; a test may change it between runs). Faults:

    ok            a well-formed stream: `max_tokens` one-character tokens, finish_reason, usage, [DONE]
    http_503      HTTP 503 with a JSON error body
    http_429      HTTP 429 with `Retry-After: 1`
    hang          headers sent, then nothing for `hang_s` (past the client's read timeout)
    disconnect    two chunks, then the connection is cut without ending the chunked body
    malformed     a chunk whose data is not JSON, then the rest of a normal stream
    bad_shape     a chunk that is JSON but not a completion chunk (`choices` a string)
    no_end        chunks without finish_reason or [DONE], then a cleanly ended body
    no_done       a normal stream whose [DONE] never comes (the body ends cleanly)

It binds 127.0.0.1 only and is bounded: after `max_requests` POSTs it answers 503 and stops
accepting, and it shuts itself down `lifetime_s` after starting (a test that forgets to close it
leaves nothing running). Every POST's arrival time, fault and body are kept in `log`.

    with FaultServer(plan=["http_503", "ok"]) as srv:
        ...  # point server.url at srv.url
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

from tests.local_server import JsonHandler, LocalServer

FAULTS = (
    "ok",
    "http_503",
    "http_429",
    "hang",
    "disconnect",
    "malformed",
    "bad_shape",
    "no_end",
    "no_done",
)


def _as_list(v: str | list[str]) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


class FaultServer(LocalServer):
    def __init__(
        self,
        plan: list[str] | None = None,
        default: str = "ok",
        faults_by_marker: dict[str, str | list[str]] | None = None,
        *,
        metrics: bool = True,
        step_s: float = 0.002,
        hang_s: float = 3.0,
        max_requests: int = 400,
        lifetime_s: float = 120.0,
        max_model_len: int = 4096,
    ) -> None:
        by_marker = [f for v in (faults_by_marker or {}).values() for f in _as_list(v)]
        for f in [*(plan or []), default, *by_marker]:
            if f not in FAULTS:
                raise ValueError(f"unknown fault '{f}'; known: {', '.join(FAULTS)}")
        self.plan = list(plan or [])
        self.default = default
        self.faults_by_marker = dict(faults_by_marker or {})
        self.metrics = metrics
        self.step_s = step_s
        self.hang_s = hang_s
        self.max_requests = max_requests
        self.max_model_len = max_model_len
        self.lock = threading.Lock()
        self.log: list[dict[str, Any]] = []
        self.closed = threading.Event()
        fs = self

        class Handler(JsonHandler):
            protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, as real servers

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._json(200, {"data": [{"id": "fault", "max_model_len": fs.max_model_len}]})
                elif self.path == "/metrics" and fs.metrics:
                    self._send(200, b'vllm:num_requests_running{engine="0"} 0\n', "text/plain")
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fault = fs._next_fault(body)
                if fault == "over_budget":
                    self._json(503, {"error": {"message": "fault server: request budget spent"}})
                    return
                if fault == "http_503":
                    self._json(503, {"error": {"message": "overloaded"}})
                elif fault == "http_429":
                    self._json(429, {"error": {"message": "rate limited"}}, {"Retry-After": "1"})
                else:
                    self._stream(fault, int(body.get("max_tokens", 8)))

            # --- responses
            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _event(self, payload: str) -> None:
                self._chunk(f"data: {payload}\n\n".encode())

            def _stream(self, fault: str, n: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                if fault == "hang":
                    fs.closed.wait(fs.hang_s)
                    self.close_connection = True
                    return
                for i in range(n):
                    if fs.closed.wait(fs.step_s):
                        return
                    if fault == "disconnect" and i == 2:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)  # no terminating chunk
                        return
                    if fault == "malformed" and i == 1:
                        self._event('{"choices": [{"text": "x", "finish_reason"')
                    if fault == "bad_shape" and i == 1:
                        self._event(json.dumps({"choices": "x"}))
                    last = i == n - 1 and fault != "no_end"
                    choice = {"index": 0, "text": "x", "finish_reason": "length" if last else None}
                    self._event(json.dumps({"choices": [choice]}))
                if fault != "no_end":
                    usage = {"prompt_tokens": 5, "completion_tokens": n}
                    self._event(json.dumps({"choices": [], "usage": usage}))
                if fault not in ("no_end", "no_done"):
                    self._event("[DONE]")
                self._chunk(b"")  # the end of the chunked body

        self.serve(Handler, lifetime_s)

    def _next_fault(self, body: dict[str, Any]) -> str:
        prompt = body.get("prompt", "")
        if not isinstance(prompt, str):  # token ids, or chat messages
            prompt = json.dumps(prompt if prompt else body.get("messages", ""))
        with self.lock:
            if len(self.log) >= self.max_requests:
                threading.Thread(target=self.close, daemon=True).start()
                return "over_budget"
            fault = None
            for marker, faults in self.faults_by_marker.items():
                if marker in prompt:
                    if isinstance(faults, str):
                        fault = faults
                    elif faults:
                        fault = faults.pop(0)
                    break
            if fault is None:
                fault = self.plan.pop(0) if self.plan else self.default
            self.log.append({"t": time.monotonic(), "fault": fault, "body": body})
            return fault

    def faults_served(self) -> list[str]:
        with self.lock:
            return [e["fault"] for e in self.log]
