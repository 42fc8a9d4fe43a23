"""Reading a run configuration: YAML file(s) → dict (with `extends:`) → `RunConfig`.

Precedence: CLI flags > YAML file > defaults (`load_config(path, overrides)`). Validation errors
become one `SpecbenchError` line naming the key, with the nearest valid key for a typo.
YAML is read with `yaml.safe_load`; `trust_remote_code` is honoured only when a config sets it.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from specbench.config.run import RunConfig
from specbench.errors import SpecbenchError


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Valid keys of the (sub)model at a validation-error location, for 'did you mean'."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        ann = field.annotation
        for cand in getattr(ann, "__args__", ()) or (ann,):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                current = cand
                break
        else:
            return []
    return list(getattr(current, "model_fields", {}))


def _union_tag(part: Any) -> bool:
    """A union member's name in an error location ("SpeculativeSpec", "list[SpeculativeSpec]"):
    config keys are lower-case words, so these are not keys."""
    return isinstance(part, str) and (part[:1].isupper() or "[" in part)


_BRANCH_MISMATCH = ("model_type", "dict_type", "list_type")


def format_validation_error(err: ValidationError, source: str) -> str:
    """The first validation problem as one actionable line (for a key that takes one of several
    shapes, e.g. `speculative:` a mapping or a list, the problem within the shape given)."""
    errors = err.errors()
    first = next(
        (
            e
            for e in errors
            if not (any(_union_tag(p) for p in e["loc"]) and e["type"] in _BRANCH_MISMATCH)
        ),
        errors[0],
    )
    loc = tuple(p for p in first["loc"] if not _union_tag(p))
    key = ".".join(str(p) for p in loc) or "(top level)"
    if first["type"] == "extra_forbidden":
        valid = _fields_at(RunConfig, loc)
        near = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        hint = f"; did you mean '{near[0]}'?" if near else f"; valid keys: {', '.join(valid)}"
        return f"{source}: unknown key '{key}'{hint}"
    if first["type"] == "missing":
        return f"{source}: missing required key '{key}'"
    msg = str(first["msg"]).removeprefix("Value error, ")
    if not loc:  # a check across keys: its message names them, the whole config is no help
        return f"{source}: {msg}"
    got = first.get("input")
    if isinstance(got, bool) and first["type"] in ("string_type", "literal_error", "enum"):
        # YAML 1.1: unquoted yes/no/on/off/true/false are booleans, not words
        msg += "; YAML reads unquoted yes/no/on/off as true/false: quote the word"
    return f"{source}: {key}: {msg} (got {_short(got)})"


def _short(value: Any, limit: int = 80) -> str:
    """A value for a one-line message: its repr, cut to `limit` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


EXTENDS_KEY = "extends"


def _read_yaml_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SpecbenchError(f"config file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecbenchError(
            f"{path}: not UTF-8 text (byte {exc.start}); save the config as UTF-8"
        ) from None
    except OSError as exc:
        raise SpecbenchError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecbenchError(f"{path}: invalid YAML{where}") from None
    if not isinstance(data, dict):
        raise SpecbenchError(f"{path}: the config must be a YAML mapping of keys to values")
    return data


def read_yaml(path: Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A config file as a dict, with `extends: base.yaml` resolved: the base (a path relative to
    the file that names it) is read first and this file's keys are deep-merged over it, so a
    derived config states only its differences. Chains are followed; a cycle is refused."""
    data = _read_yaml_file(path)
    base_name = data.pop(EXTENDS_KEY, None)
    if base_name is None:
        return data
    if not isinstance(base_name, str) or not base_name.strip():
        raise SpecbenchError(f"{path}: extends: give the base config's path, e.g. tiny.yaml")
    here = path.resolve()
    base = (path.parent / base_name).resolve()
    chain = (*_chain, here)
    if base in chain:
        cycle = " → ".join(p.name for p in (*chain, base))
        raise SpecbenchError(f"{path}: extends: the configs extend each other in a cycle ({cycle})")
    if not base.is_file():
        raise SpecbenchError(f"{path}: extends: base config not found: {base}")
    return deep_merge(read_yaml(base, chain), data)


def parse_config(data: dict[str, Any], source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise SpecbenchError(format_validation_error(err, source)) from None


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read a YAML config and apply CLI overrides (nested dicts merge key by key)."""
    p = Path(path)
    data = deep_merge(read_yaml(p), overrides or {})
    return parse_config(data, str(p))


def dump_config(cfg: RunConfig) -> str:
    """The resolved config as YAML (what a run stores as DIR/config.yaml)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
