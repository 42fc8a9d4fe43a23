"""The configuration reference (docs/config-reference.md), generated from the config models so it
cannot drift from what `specbench validate` accepts: every key of a run config, a canary config
and a compare thresholds file, with its type, default, bounds and one line of meaning.

The meaning is the field's `description` where the model gives one, else the comment the model's
source puts on the field's line or on the lines just above it (the models are documented by
comments, which stay next to the code they explain). Regenerate with
`python scripts/config_reference.py`; tests/unit/test_config_reference.py fails when the page is
out of date.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Iterator
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

FIELD_LINE = re.compile(r"^\s+(\w+)\s*:\s*(?P<rest>.*)$")
COMMENT = re.compile(r"\s#\s?(?P<text>.*)$")


def _source_comments(model: type[BaseModel]) -> dict[str, str]:
    """Field name → the comment on its line, or the comment lines right above it."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            lines = inspect.getsource(cls).splitlines()
        except (OSError, TypeError):
            continue
        above: list[str] = []
        for line in lines[1:]:
            stripped = line.strip()
            if stripped.startswith("#"):
                above.append(stripped.lstrip("#").strip())
                continue
            m = FIELD_LINE.match(line)
            if m and m.group(1) in cls.__annotations__:
                trailing = COMMENT.search(m.group("rest"))
                text = trailing.group("text").strip() if trailing else " ".join(above)
                if text:
                    found[m.group(1)] = text
            above = []
    return found


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin in (list, tuple, set, frozenset):
        inner = ", ".join(_type_name(a) for a in args if a is not Ellipsis)
        return f"list of {inner}" if inner else "list"
    if origin is dict:
        return f"map {_type_name(args[0])} → {_type_name(args[1])}" if args else "map"
    if origin is typing.Annotated:
        return _type_name(args[0])
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation)).replace("|", "\\|")


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "**required**"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section defaults)"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value) if isinstance(value, str) else str(value)
    return f"`{text}`" if len(text) <= 40 else f"`{text[:37]}…`"


def _number(value: Any) -> str:
    if isinstance(value, int) and value > 2**20 and value & (value - 1) == 0:
        return f"2^{value.bit_length() - 1}"
    return str(value)


def _bounds(field: FieldInfo) -> str:
    parts = []
    for m in field.metadata:
        for cls, attr, sign in (
            (annotated_types.Ge, "ge", "≥"),
            (annotated_types.Gt, "gt", ">"),
            (annotated_types.Le, "le", "≤"),
            (annotated_types.Lt, "lt", "<"),
        ):
            if isinstance(m, cls):
                parts.append(f"{sign} {_number(getattr(m, attr))}")
        if isinstance(m, annotated_types.MinLen):
            parts.append(f"length ≥ {m.min_length}")
        if isinstance(m, annotated_types.MaxLen):
            parts.append(f"length ≤ {m.max_length}")
    return ", ".join(parts)


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _section(model: type[BaseModel]) -> list[str]:
    comments = _source_comments(model)
    own = model.__dict__.get("__doc__") or ""  # not the docstring a base class lends it
    doc = inspect.cleandoc(own).split("\n\n")[0].replace("\n", " ")
    out = [f"### {model.__name__}", ""]
    if doc:
        out += [doc, ""]
    out += ["| key | type | default | bounds | meaning |", "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        key = field.alias or name
        meaning = (field.description or comments.get(name, "")).replace("|", "\\|")
        out.append(
            f"| `{key}` | {_type_name(field.annotation)} | {_default(field)} | "
            f"{_bounds(field)} | {meaning} |"
        )
    return [*out, ""]


def _all_models(root: type[BaseModel]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []
    todo = [root]
    while todo:
        model = todo.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            todo += [m for m in _models_in(field.annotation) if m not in seen]
    return seen


def files() -> list[tuple[str, str, type[BaseModel]]]:
    """The files specbench reads: (title, what it is, root model)."""
    from specbench.analysis.compare.metrics import Thresholds
    from specbench.config.canary import CanaryConfig
    from specbench.config.run import RunConfig

    return [
        (
            "Run config (`specbench run`, `validate`)",
            "One YAML file, e.g. configs/tiny.yaml.",
            RunConfig,
        ),
        (
            "Canary config (`specbench canary`)",
            "One YAML file ([canary.md](canary.md)).",
            CanaryConfig,
        ),
        (
            "Compare thresholds (`specbench compare --thresholds`)",
            "One YAML file, e.g. ci/specbench-thresholds.yaml ([compare.md](compare.md), "
            "[ci.md](ci.md)).",
            Thresholds,
        ),
    ]


def reference(files: list[tuple[str, str, type[BaseModel]]]) -> str:
    """The Markdown page: for each (title, what it is, root model), every model it reaches."""
    out = [
        "# Configuration reference",
        "",
        "<!-- generated by scripts/config_reference.py from the config models; do not edit -->",
        "",
        "Every key specbench reads from a file, generated from the models that validate it "
        "(`specbench validate FILE` checks a file against them; an unknown key is an error). "
        "How to use them: [configuration.md](configuration.md).",
        "",
    ]
    for title, what, root in files:
        out += [f"## {title}", "", what, ""]
        for model in _all_models(root):
            out += _section(model)
    return "\n".join(out).rstrip() + "\n"
