"""`specbench accept`'s settings: the model pair and the options, flags over the run config over
the defaults, and which drafters teacher forcing can score at all.

    model_specs(config, target, draft, device, dtype) → (target spec, draft spec, RunConfig)
    accept_options(cfg, …flags…)                      → AcceptOptions (the sampling grid too)
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from specbench import defaults
from specbench.config import ModelSpec, RunConfig
from specbench.errors import SpecbenchError
from specbench.harness.accept.accept import AcceptOptions
from specbench.sampling_params import SamplingParams

# Drafters that read the target's hidden states: no standalone forward to teacher-force.
UNSCORABLE_HINTS = ("eagle", "medusa", "mtp", "hydra")


def unscorable_drafter(kind: str) -> SpecbenchError:
    """Teacher forcing needs a standalone draft LM over the target's vocabulary; heads that read
    the target's hidden states (EAGLE, MTP, Medusa) or model-free drafters have no such forward."""
    return SpecbenchError(
        f"accept cannot score a '{kind}' drafter by teacher forcing: it is not a standalone model "
        "with the target's vocabulary (it drafts from the target's hidden states); measure it "
        "through the engine backend instead (backend: vllm with speculative.method "
        f"{kind}, `specbench run`), whose results report α from the engine's acceptance counters"
    )


def drafter_head(model: str | None) -> str | None:
    """The head kind ("eagle", "mtp", …) when a local draft folder's config.json says so."""
    if not model:
        return None
    cfg_path = Path(model).expanduser() / "config.json"
    if not cfg_path.is_file():
        return None
    try:
        info = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # load_model reports an unreadable model in its own words
    if not isinstance(info, dict):
        return None
    names = [str(info.get("model_type", ""))] + [str(a) for a in info.get("architectures") or []]
    for name in names:
        for hint in UNSCORABLE_HINTS:
            if hint in name.lower():
                return hint
    return None


def model_specs(
    config: Path | None,
    target: str | None,
    draft: str | None,
    device: str | None,
    dtype: str | None,
) -> tuple[ModelSpec, ModelSpec, RunConfig | None]:
    """The pair from --config and/or --target/--draft (flags win), with --device/--dtype."""
    from specbench.config import parse_config, read_yaml

    cfg = None
    if config is not None:
        cfg = parse_config(read_yaml(config), str(config))
        from specbench.config import speculative_specs

        methods = [s.method for s in speculative_specs(cfg.speculative)]
        method = methods[0] if cfg.backend == "vllm" else "draft_model"
        if method not in ("draft_model", "ngram") and draft is None:
            raise unscorable_drafter(method)
        if cfg.draft.method != "model" and draft is None:
            raise SpecbenchError(
                "accept needs a draft model; the config's draft.method is 'ngram' (pass --draft)"
            )
        t_spec: ModelSpec = cfg.target
        # the draft as a plain model spec (drafter-only keys such as method or name dropped)
        d_spec: ModelSpec = ModelSpec(
            **{k: v for k, v in cfg.draft.model_dump().items() if k in ModelSpec.model_fields}
        )
    elif target is None or draft is None:
        raise SpecbenchError(
            "give --config CONFIG, or both --target and --draft (model ids or directories)"
        )
    else:
        t_spec, d_spec = ModelSpec(model=target), ModelSpec(model=draft)
    over: dict[str, Any] = {}
    if device is not None:
        over["device"] = device
    if dtype is not None:
        over["dtype"] = dtype
    head = drafter_head(d_spec.model if draft is None else draft)
    if head is not None:
        raise unscorable_drafter(head)
    t_spec = t_spec.model_copy(update=over | ({"model": target} if target else {}))
    d_spec = d_spec.model_copy(update=over | ({"model": draft} if draft else {}))
    return t_spec, d_spec, cfg


def make_settings(
    temps: Sequence[float], top_ps: Sequence[float], top_k: int
) -> list[SamplingParams]:
    """The sampling grid: every temperature × top-p (greedy once), in the order given."""
    out: list[SamplingParams] = []
    for t, p in itertools.product(temps, top_ps):
        params = SamplingParams(0.0) if t == 0 else SamplingParams(t, top_k, p)
        if params not in out:
            out.append(params)
    return out


def accept_options(
    cfg: RunConfig | None,
    draft: ModelSpec,
    *,
    temperatures: list[float] | None,
    top_ps: list[float] | None,
    top_k: int | None,
    chat_template: str | None,
    margin: float | None,
    seed: int | None,
    logged_params: bool,
    max_context: int | None,
    overflow: Literal["window", "truncate"],
    batch_tokens: int | None,
    chunk_tokens: int,
    position_bin: int,
    target_halfwidth: float,
    gamma_max: int,
    skip_bad_rows: bool,
) -> AcceptOptions:
    """Flags (not None) over the config's sampling, decision, chat template and seed, over the
    defaults (temperature 1, top-p 1, no top-k)."""
    sampling = cfg.sampling if cfg is not None else None
    decision = cfg.decision if cfg is not None else None
    k = top_k if top_k is not None else (sampling.top_k if sampling else 0)
    settings = make_settings(
        temperatures or (sampling.temperatures if sampling else [1.0]),
        top_ps or ([sampling.top_p] if sampling else [1.0]),
        k,
    )
    return AcceptOptions(
        settings=settings,
        logged_params=logged_params,
        chat_template=chat_template or (cfg.chat_template if cfg else "auto"),
        max_context=max_context,
        overflow=overflow,
        batch_tokens=batch_tokens,
        chunk_tokens=chunk_tokens,
        position_bin=position_bin,
        n_boot=decision.bootstrap if decision else 2000,
        level=decision.ci_level if decision else 0.95,
        target_halfwidth=target_halfwidth,
        gamma_max=gamma_max,
        margin=margin if margin is not None else (decision.margin if decision else defaults.MARGIN),
        seed=seed if seed is not None else (cfg.seed if cfg else 0),
        draft_logit_noise=draft.logit_noise,
        skip_bad_rows=skip_bad_rows,
        top_k=k,
    )
