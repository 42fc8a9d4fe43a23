"""Why a source cannot be read: missing, or on a server that does not answer.

fsspec's HTTP reader says "not found" for a closed port too (it swallows the connection error),
so an http(s) URL is asked once more, with httpx, to tell the two apart.
"""

from __future__ import annotations


def not_found(location: str, http: bool) -> str:
    """The one-line reason `location` does not exist (for a SpecbenchError)."""
    if not http:
        return f"file not found: {location}"
    import httpx2

    try:
        status = httpx2.head(location, timeout=10.0, follow_redirects=True).status_code
    except httpx2.HTTPError as exc:
        why = " ".join(str(exc).split())[:160]
        return (
            f"cannot reach {location} ({type(exc).__name__}: {why}); check that the server is "
            "up and the host and port are right"
        )
    if status == 404:
        return f"file not found: {location} (the server answered HTTP 404)"
    return f"{location} answered HTTP {status}; check the URL"
