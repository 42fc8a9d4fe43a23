"""HTTP for `backend: openai`: server URLs, request failures (which are worth retrying, how long
the server asked to wait), plain GETs, and the retry loop.

The client is httpx2 (the maintained httpx; a dependency of huggingface_hub): one connection
pool per server, so requests reuse connections as a serving client does and TTFT does not include
a TCP handshake per request. Backoff is the few lines of `with_retries`, not a library (tenacity,
backoff): the policy is a server's `Retry-After` when it sends one, else 0.5 s doubling to 5 s,
decided per failure by `RequestFailed.retry`; no dependency is needed for that.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx2

from specbench.errors import SpecbenchError

RETRY_HTTP = (408, 429, 500, 502, 503, 504)
MAX_RETRY_AFTER_S = 3600.0  # parsed up to this; waited up to server.max_retry_after_s

T = TypeVar("T")


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


def retry_after(value: str | None) -> float | None:
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


def status_error(resp: httpx2.Response) -> RequestFailed:
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
        f"HTTP {code}: {text}", code in RETRY_HTTP, retry_after(resp.headers.get("retry-after"))
    )


def transport_error(exc: httpx2.HTTPError) -> RequestFailed:
    """A connection failure, timeout or stream cut off as a RequestFailed worth retrying."""
    if isinstance(exc, httpx2.TimeoutException):
        return RequestFailed(f"timed out ({type(exc).__name__})", True)
    first = (str(exc).strip().splitlines() or [""])[0]
    return RequestFailed(f"{type(exc).__name__}: {first}"[:300], True)


def make_client(timeout_s: float, max_connections: int) -> httpx2.Client:
    """A connection pool for one server: room for `max_connections` (a request never waits for a
    connection while the clock runs), `timeout_s` on each connect and read."""
    return httpx2.Client(
        timeout=httpx2.Timeout(timeout_s), limits=httpx2.Limits(max_connections=max_connections)
    )


def get_text(client: httpx2.Client, url: str, headers: dict[str, str], timeout: float) -> str:
    """GET a URL's text; RequestFailed on a transport error or a non-2xx status."""
    try:
        resp = client.get(url, headers=headers, timeout=timeout)
    except httpx2.HTTPError as exc:
        raise transport_error(exc) from None
    if resp.status_code >= 300:
        raise status_error(resp)
    return resp.text


def with_retries(attempt_once: Callable[[], T], retries: int, max_retry_after_s: float = 60.0) -> T:
    """`attempt_once()`, tried again up to `retries` times while its failure is worth retrying,
    after the server's Retry-After (what it asked for, at most `max_retry_after_s`: the config's
    `server.max_retry_after_s`) or an exponential backoff; the last failure names how many
    attempts were made. So a request is sent at most retries + 1 times and waits at most
    retries × max(max_retry_after_s, 5 s) in all."""
    for attempt in range(retries + 1):
        try:
            return attempt_once()
        except RequestFailed as exc:
            if not exc.retry or attempt == retries:
                raise RequestFailed(
                    f"{exc} (after {attempt + 1} attempt{'s' if attempt else ''})", False
                ) from None
            backoff = min(0.5 * 2**attempt, 5.0)
            wait = backoff
            if exc.retry_after_s is not None:
                wait = min(exc.retry_after_s, max_retry_after_s)
            time.sleep(wait)
    raise AssertionError("unreachable")
