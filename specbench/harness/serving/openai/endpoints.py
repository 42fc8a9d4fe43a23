"""The servers of an openai run (`backend: openai`): read from the config, labelled, checked
(distinct labels, one server without speculation), and merged when `--resume` adds the next
server of a one-server-per-setting series to a run directory.

A setting is method × γ × endpoint: several servers may run the same γ (EAGLE-3 γ=4, a 1B draft
γ=4, n-gram γ=4), told apart by their labels (default "<method> γ=<γ>").
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import yaml

from specbench.config import EndpointSpec, RunConfig, parse_config
from specbench.errors import SpecbenchError

NO_SPECULATION = "none"


def endpoints_of(cfg: RunConfig) -> list[EndpointSpec]:
    """The servers of an openai run: `server.endpoints`, else the single `server.url`."""
    s = cfg.server
    return list(s.endpoints) or [
        EndpointSpec(url=s.url, gamma=s.gamma, label=s.label, method=s.method)
    ]


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
    """The setting's name (the records' `drafter`): "" for the baseline, else the label given,
    else "<method> γ=<γ>" ("server γ=<γ>" when no method is stated, as older runs were named)."""
    if ep.gamma == 0:
        return ""
    if ep.label:
        return str(ep.label)
    return f"{ep.method or 'server'} γ={ep.gamma}"


def endpoint_method(ep: EndpointSpec) -> str:
    return NO_SPECULATION if ep.gamma == 0 else (ep.method or "")


def check_endpoints(eps: list[EndpointSpec]) -> None:
    """One clear error when the servers cannot make a run: labels must be distinct, `method:
    none` means γ 0 (and a speculative method γ > 0), and exactly one server runs without
    speculation (the baseline every setting is paired with)."""
    for ep in eps:
        if ep.method == NO_SPECULATION and ep.gamma != 0:
            raise SpecbenchError(
                f"server.endpoints: {ep.url} has method none but gamma {ep.gamma}; a server "
                "without speculation has gamma 0"
            )
        if ep.method not in (None, NO_SPECULATION) and ep.gamma == 0:
            raise SpecbenchError(
                f"server.endpoints: {ep.url} has method {ep.method} but gamma 0; give the "
                "γ it was started with (gamma 0 is the server without speculation)"
            )
    base = [ep for ep in eps if ep.gamma == 0]
    if not base:
        raise SpecbenchError(
            "server.endpoints: no server without speculation; add one (gamma: 0, method: none): "
            "every setting is measured against it"
        )
    if len(base) > 1:
        raise SpecbenchError(
            f"server.endpoints: {len(base)} servers run without speculation "
            f"({', '.join(ep.url for ep in base)}); keep one baseline"
        )
    labels = [endpoint_label(ep) for ep in eps if ep.gamma > 0]
    if len(set(labels)) != len(labels):
        dup = next(x for x in labels if labels.count(x) > 1)
        raise SpecbenchError(
            f"server.endpoints: two servers are labelled '{dup}'; give each a distinct `label` "
            "(or its `method`)"
        )


def without_server(cfg_yaml: str) -> str:
    """A stored config without what differs from one server of a series to the next."""
    data = yaml.safe_load(cfg_yaml) or {}
    data.pop("server", None)
    data.pop("gammas", None)  # openai: the γ the servers run
    return yaml.safe_dump(data, sort_keys=True)


def merged_server_config(cfg: RunConfig, stored_yaml: str) -> RunConfig:
    """`cfg` with the endpoints already measured in the stored run added (one per setting:
    the baseline, and each label; the newer config's wins)."""
    old = parse_config(yaml.safe_load(stored_yaml), "stored config")
    seen: dict[str, EndpointSpec] = {}
    for ep in [*endpoints_of(old), *endpoints_of(cfg)]:
        seen[endpoint_label(ep)] = ep
    server = cfg.server.model_copy(update={"endpoints": list(seen.values())})
    grid = sorted({ep.gamma for ep in seen.values() if ep.gamma > 0}) or cfg.gammas
    return cfg.model_copy(update={"server": server, "gammas": grid})
