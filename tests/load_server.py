"""A small OpenAI-compatible streaming server for the load tests (open-loop arrivals, tails,
SLO goodput, buffered streams).

`mode="stream"`: each of `max_tokens` one-character tokens is its own server-sent event, sent
`step_s` after the previous one (an honest stream). `mode="buffered"`: the same events are
produced at the same pace but held back and written in one piece at the end, as a buffering
gateway delivers them. It records each POST's arrival time and the most requests it had in flight
at once. Bounded like tests/fault_server.py: 127.0.0.1 only, `max_requests` POSTs (then 503),
and it shuts itself down `lifetime_s` after starting.
"""

from __future__ import annotations

import json
import socket
import threading
import time

from tests.local_server import JsonHandler, LocalServer


class LoadServer(LocalServer):
    def __init__(
        self,
        mode: str = "stream",
        *,
        step_s: float = 0.003,
        max_requests: int = 400,
        lifetime_s: float = 120.0,
    ) -> None:
        if mode not in ("stream", "buffered"):
            raise ValueError(f"unknown mode '{mode}'")
        self.mode = mode
        self.step_s = step_s
        self.max_requests = max_requests
        self.lock = threading.Lock()
        self.arrivals: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.closed = threading.Event()
        srv = self

        class Handler(JsonHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # each event leaves at once, as uvicorn sends it (without this, Nagle's algorithm
                # and the client's delayed ACK hold the second small write ~40 ms: a buffered
                # delivery, and the rule rightly flags it)
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._json(200, {"data": [{"id": "load", "max_model_len": 4096}]})
                elif self.path == "/metrics":
                    body = b'vllm:num_requests_running{engine="0"} 0\n'
                    self._send(200, body, "text/plain")
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with srv.lock:
                    if len(srv.arrivals) >= srv.max_requests:
                        over = True
                    else:
                        over = False
                        srv.arrivals.append(time.monotonic())
                        srv.in_flight += 1
                        srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
                if over:
                    self._json(503, {"error": {"message": "load server: budget spent"}})
                    return
                try:
                    self._stream(int(body.get("max_tokens", 8)))
                finally:
                    with srv.lock:
                        srv.in_flight -= 1

            def _chunk(self, data: bytes) -> bytes:
                return f"{len(data):x}\r\n".encode() + data + b"\r\n"

            def _stream(self, n: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                held: list[bytes] = []
                for i in range(n):
                    if srv.closed.wait(srv.step_s):
                        return
                    choice = {
                        "index": 0,
                        "text": "x",
                        "finish_reason": "length" if i == n - 1 else None,
                    }
                    event = self._chunk(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
                    if srv.mode == "buffered":
                        held.append(event)
                    else:
                        self.wfile.write(event)
                        self.wfile.flush()
                usage = {"prompt_tokens": 5, "completion_tokens": n}
                tail = [
                    self._chunk(
                        f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
                    ),
                    self._chunk(b"data: [DONE]\n\n"),
                    self._chunk(b""),
                ]
                self.wfile.write(b"".join(held + tail))
                self.wfile.flush()

        self.serve(Handler, lifetime_s)
