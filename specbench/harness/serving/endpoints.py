"""The servers of an openai run (`backend: openai`): read from the config, labelled, and merged
when `--resume` adds the next server of a one-server-per-setting series to a run directory."""

from __future__ import annotations

import os
from collections.abc import Mapping

import yaml

from specbench.config import EndpointSpec, RunConfig, parse_config
from specbench.errors import SpecbenchError


def endpoints_of(cfg: RunConfig) -> list[EndpointSpec]:
    """The servers of an openai run: `server.endpoints`, else the single `server.url`."""
    s = cfg.server
    return list(s.endpoints) or [EndpointSpec(url=s.url, gamma=s.gamma, label=s.label)]


def header_values(names: Mapping[str, str], where: str) -> dict[str, str]:
    """`headers` (header → environment variable name) with the values read from the
    environment; a variable that is not set is one clear error."""
    out = {}
    for header, env in names.items():
        value = os.environ.get(env)
        if not value:
            raise SpecbenchError(
                f"{where}.headers.{header} names the environment variable {env}, which is not set"
            )
        out[header] = value
    return out


def endpoint_headers(cfg: RunConfig, ep: EndpointSpec, api_key: str | None) -> dict[str, str]:
    """What every request to `ep` carries: the API key as a bearer token, the server's
    `headers`, then the endpoint's own (which win)."""
    out = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    out.update(header_values(cfg.server.headers, "server"))
    out.update(header_values(ep.headers, f"server.endpoints[{ep.url}]"))
    return out


def metrics_url_of(cfg: RunConfig, ep: EndpointSpec, origin: str) -> str:
    """Where `ep`'s counters are read: its own `metrics_url`, else `server.metrics_url` (one
    server only), else <its origin>/metrics."""
    if ep.metrics_url:
        return ep.metrics_url
    if cfg.server.metrics_url and len(endpoints_of(cfg)) == 1:
        return cfg.server.metrics_url
    return origin + "/metrics"


def endpoint_label(ep: EndpointSpec) -> str:
    return str(ep.label) if ep.label else ("" if ep.gamma == 0 else f"server γ={ep.gamma}")


def without_server(cfg_yaml: str) -> str:
    """A stored config without what differs from one server of a series to the next."""
    data = yaml.safe_load(cfg_yaml) or {}
    data.pop("server", None)
    data.pop("gammas", None)  # openai: the γ the servers run
    return yaml.safe_dump(data, sort_keys=True)


def merged_server_config(cfg: RunConfig, stored_yaml: str) -> RunConfig:
    """`cfg` with the endpoints already measured in the stored run added."""
    old = parse_config(yaml.safe_load(stored_yaml), "stored config")
    seen: dict[int, EndpointSpec] = {}
    for ep in [*endpoints_of(old), *endpoints_of(cfg)]:
        seen[ep.gamma] = ep  # one server per γ; the newer config's wins
    server = cfg.server.model_copy(update={"endpoints": list(seen.values())})
    grid = sorted({g for g in seen if g > 0}) or cfg.gammas
    return cfg.model_copy(update={"server": server, "gammas": grid})
