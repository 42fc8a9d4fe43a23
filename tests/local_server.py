"""What the local test servers (fault_server, spec_server, load_server) share: an HTTP server on
127.0.0.1 at an ephemeral port, in a daemon thread, that stops by itself after `lifetime_s`
(a test that forgets it cannot hang the suite), and a handler's JSON replies."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


class JsonHandler(BaseHTTPRequestHandler):
    """A handler that replies with a whole body (`_send`) or a JSON object (`_json`)."""

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(
        self, code: int, data: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, code: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(code, json.dumps(obj).encode(), "application/json", headers)


class LocalServer:
    """Start with `serve(Handler, lifetime_s)` at the end of `__init__`; a context manager."""

    closed: threading.Event

    def serve(self, handler: type[BaseHTTPRequestHandler], lifetime_s: float) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.timer = threading.Timer(lifetime_s, self.close)  # stops by itself
        self.timer.daemon = True
        self.timer.start()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()  # wakes hanging and streaming handlers
        self.timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
