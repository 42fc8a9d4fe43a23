"""An HTTP gate over `specbench canary --once`, for rollout controllers that call a URL rather
than run a command (docs/canary.md, "Argo Rollouts and Flagger"):

    GET /decision   the look's CanaryDecision as JSON (Argo Rollouts' web metric provider:
                    successCondition result.decision == "promote", failureCondition
                    result.decision == "rollback", anything else inconclusive)
    GET /rollout    200 unless the decision is roll back (503): Flagger's rollout webhook
    GET /promote    200 only when the decision is promote (409 otherwise): Flagger's
                    confirm-promotion webhook

Each request is one look (the state file makes looks idempotent: windows already saved are not
read again). Started by `python -m specbench.harness.canary.gate CONFIG --port 8080`.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from specbench.config.canary import CanaryConfig, load_canary_config
from specbench.errors import SpecbenchError
from specbench.harness.canary.look import look

ROUTES = {"/decision", "/rollout", "/promote"}


def answer(cfg: CanaryConfig, path: str, lock: threading.Lock) -> tuple[int, bytes]:
    """(HTTP status, JSON body) of one request to the gate."""
    if path not in ROUTES:
        return 404, b'{"error": "GET /decision, /rollout or /promote"}'
    try:
        with lock:  # one look at a time: the state file is appended by one writer
            d = look(cfg).decision
    except SpecbenchError as exc:
        return 500, json.dumps({"error": str(exc)}).encode()
    body = json.dumps(d.model_dump(mode="json")).encode()
    if path == "/rollout":
        return (503 if d.decision == "rollback" else 200), body
    if path == "/promote":
        return (200 if d.decision == "promote" else 409), body
    return 200, body


def server(cfg: CanaryConfig, host: str, port: int) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = answer(cfg, self.path.split("?", 1)[0], lock)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    return ThreadingHTTPServer((host, port), Handler)


def main() -> None:
    ap = argparse.ArgumentParser(description="HTTP gate over `specbench canary --once`")
    ap.add_argument("config", type=Path)
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=8080)
    args = ap.parse_args()
    server(load_canary_config(args.config), args.host, args.port).serve_forever()


if __name__ == "__main__":
    main()
