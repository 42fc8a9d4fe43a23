"""Turn raw rows into `Prompt`s: which column holds the text, id, reference and workload.

Three schemas:

- "specbench" (shipped sets in datasets/): `id`, `workload`, `turns` or `prompt`, optional
  `reference` and `meta`.
- "spec_bench" (Spec-Bench's question.jsonl): `question_id`, `category`, `turns`, optional
  `reference` list; categories become workloads. With `group_mt_bench` the eight MT-bench
  categories become one "conversation" workload; `category_map` wins over both.
- "generic" (any file): text from `turns` if present else `prompt`, id from `id` else the row
  number, `reference` if present, and a workload only when `workload_field` names a column.

A field the user names in the config must exist in every row; a default one is used when present.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from specbench.config import DatasetSpec
from specbench.data.conversation import (
    BadConversation,
    normalize_messages,
    normalize_tools,
    plain_content,
)
from specbench.data.paths import MISSING, get_path
from specbench.data.prompt import Prompt, generation_points
from specbench.data.sources import RawRows, Row
from specbench.errors import SpecbenchError

MT_BENCH_CATEGORIES = frozenset(
    {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}
)
CONVERSATION_WORKLOAD = "conversation"
SPEC_BENCH_KEYS = ("question_id", "category", "turns")


@dataclass(frozen=True)
class Column:
    """A column a value is read from; `config_key` is named in errors so the user knows what to
    change. `required` columns must exist in every row; optional ones are used when present."""

    name: str
    config_key: str
    required: bool


@dataclass(frozen=True)
class FieldMapping:
    """Where each part of a `Prompt` comes from in a row."""

    turns: Column | None  # None with prompt None = default: "turns" if present else "prompt"
    prompt: Column | None
    id: Column
    reference: Column
    workload: Column | None  # None = the source has no workload information
    category_map: dict[str, str] = field(default_factory=dict)
    group_mt_bench: bool = False
    workload_is_category: bool = False  # keep the raw value in meta["category"]
    messages: Column | None = None  # a logged conversation (default: "messages" when present)
    tools: Column | None = None
    replay: bool = True  # dataset.assistant_turns


def looks_like_spec_bench(raw: RawRows) -> bool:
    """True when the first row has Spec-Bench's question_id, category and turns fields."""
    return all(key in raw.rows[0].values for key in SPEC_BENCH_KEYS)


def field_mapping(spec: DatasetSpec, schema: str) -> FieldMapping:
    """The mapping for `schema` ("specbench", "spec_bench" or "generic") with the config's
    explicit fields taking precedence over the schema's defaults."""
    given = [k for k in ("prompt_field", "turns_field", "messages_field") if getattr(spec, k)]
    if len(given) > 1:
        raise SpecbenchError(
            f"dataset.{given[0]} and dataset.{given[1]} are both set; keep only one of them"
        )

    def pick(explicit: str | None, default: str | None, key: str) -> Column | None:
        if explicit:
            return Column(explicit, f"dataset.{key}", required=True)
        return Column(default, f"dataset.{key}", required=False) if default else None

    defaults = {
        "specbench": ("id", "workload"),
        "spec_bench": ("question_id", "category"),
        "generic": ("id", None),
    }[schema]
    id_column = pick(spec.id_field, defaults[0], "id_field")
    reference = pick(spec.reference_field, "reference", "reference_field")
    assert id_column is not None and reference is not None
    return FieldMapping(
        turns=pick(spec.turns_field, None, "turns_field"),
        prompt=pick(spec.prompt_field, None, "prompt_field"),
        id=id_column,
        reference=reference,
        workload=pick(spec.workload_field, defaults[1], "workload_field"),
        category_map=dict(spec.category_map),
        group_mt_bench=schema == "spec_bench" and spec.group_mt_bench,
        workload_is_category=schema == "spec_bench" or spec.workload_field is not None,
        messages=pick(spec.messages_field, None, "messages_field"),
        tools=pick(spec.tools_field, "tools", "tools_field"),
        replay=spec.assistant_turns == "replay",
    )


def rows_to_prompts(raw: RawRows, mapping: FieldMapping) -> list[Prompt]:
    """Every row as a `Prompt`, in source order; ids must be unique within the source."""
    prompts: list[Prompt] = []
    seen: dict[str, str] = {}
    for position, row in enumerate(raw.rows, start=1):
        prompt = _row_to_prompt(row, position, raw.source, mapping)
        if prompt.id in seen:
            raise SpecbenchError(
                f"{raw.source} {row.location}: id '{prompt.id}' already used at "
                f"{seen[prompt.id]}; make the ids unique or set dataset.id_field to another column"
            )
        seen[prompt.id] = row.location
        prompts.append(prompt)
    return prompts


def _logged_value(row: Row, where: str, mapping: FieldMapping) -> Any:
    """The row's logged conversation, or None when the prompt is text / turns."""
    if mapping.messages is not None:
        return _value(row, mapping.messages, where)
    defaults = mapping.turns is None and mapping.prompt is None
    if defaults and "turns" not in row.values and "prompt" not in row.values:
        return row.values.get("messages")
    return None


def _logged_prompt(
    row: Row, where: str, mapping: FieldMapping, value: Any
) -> tuple[list[str], dict[str, Any]]:
    """(turns, Prompt fields) of a logged conversation: the model answers at each generation
    point; a turn's text is the message before that point."""
    name = mapping.messages.name if mapping.messages else "messages"
    try:
        conv = normalize_messages(value, name)
        tools_value = _value(row, mapping.tools, where) if mapping.tools else None
        tools = normalize_tools(tools_value, mapping.tools.name if mapping.tools else "tools")
    except BadConversation as exc:
        raise SpecbenchError(f"{where}: {exc}; fix the row or remove it") from None
    points = generation_points(conv.messages)
    if not points:
        raise SpecbenchError(
            f"{where}: the conversation has no turn for the model to answer (it starts with the "
            "assistant and holds nothing else); fix the row or remove it"
        )
    turns = [plain_content(conv.messages[p - 1]) or conv.messages[p - 1]["role"] for p in points]
    extra: dict[str, Any] = {"logged": conv.messages, "tools": tools, "replay": mapping.replay}
    if conv.dropped_parts:
        extra["dropped_parts"] = conv.dropped_parts
    return turns, extra


def _row_to_prompt(row: Row, position: int, source: str, mapping: FieldMapping) -> Prompt:
    where = f"{source} {row.location}"
    logged_value = _logged_value(row, where, mapping)
    extra: dict[str, Any] = {}
    if logged_value is not None:
        turns, extra = _logged_prompt(row, where, mapping, logged_value)
    else:
        turns = _read_turns(row, where, mapping)
    prompt_id = _read_id(row, position, where, mapping.id)
    meta = _read_meta(row.values.get("meta"))
    reference, all_references = _read_reference(_value(row, mapping.reference, where))
    if all_references is not None:
        meta.setdefault("references", all_references)
    workload = ""
    if mapping.workload is not None:
        workload = _read_workload(row, where, mapping, meta)
    if "dropped_parts" in extra:  # non-text parts a text-only pair never sees, for the report
        meta.setdefault("dropped_parts", extra.pop("dropped_parts"))
    return Prompt(
        id=prompt_id, workload=workload, turns=turns, reference=reference, meta=meta, **extra
    )


def _value(row: Row, column: Column, where: str) -> Any:
    """The row's value at `column` (a column name or a field path such as
    `request.messages[-1].content`, see `data.paths`); None when an optional one is absent."""
    value = get_path(row.values, column.name)
    if value is not MISSING:
        return value
    if column.required:
        raise SpecbenchError(
            f"{where} has no column '{column.name}' ({column.config_key}); available columns: "
            f"{', '.join(str(k) for k in row.values)}"
        )
    return None


def _is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _read_turns(row: Row, where: str, mapping: FieldMapping) -> list[str]:
    if mapping.turns is not None:
        return _as_turns(_value(row, mapping.turns, where), where, parse_json_list=True)
    if mapping.prompt is not None:
        return _as_turns(_value(row, mapping.prompt, where), where, parse_json_list=False)
    values = row.values
    if not _is_blank(values.get("turns")) or ("turns" in values and "prompt" not in values):
        return _as_turns(values["turns"], where, parse_json_list=True)
    if "prompt" in values:
        return _as_turns(values["prompt"], where, parse_json_list=False)
    raise SpecbenchError(
        f"{where} has neither a 'turns' nor a 'prompt' column; set dataset.prompt_field or "
        f"dataset.turns_field to one of: {', '.join(str(k) for k in values)}"
    )


def _as_turns(value: Any, where: str, parse_json_list: bool) -> list[str]:
    """A text becomes one turn; a list of texts is the turns. A turns column read from CSV may
    hold a JSON list as text ('["a", "b"]'), which is parsed."""
    if isinstance(value, str) and parse_json_list and value.lstrip().startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list):
            value = parsed
    turns = [value] if isinstance(value, str) else value
    if value is None or (isinstance(turns, list | tuple) and not turns):
        turns = [""]
    if not isinstance(turns, list | tuple) or not all(isinstance(t, str) for t in turns):
        raise SpecbenchError(
            f"{where}: the prompt must be text or a list of texts, got {type(value).__name__}; "
            "fix the row or point dataset.prompt_field / turns_field at a text column"
        )
    for number, turn in enumerate(turns, start=1):
        if not turn.strip():
            which = f"turn {number} of the prompt" if len(turns) > 1 else "the prompt"
            raise SpecbenchError(f"{where}: {which} is empty; fill in the text or remove the row")
    return list(turns)


def _read_id(row: Row, position: int, where: str, column: Column) -> str:
    value = _value(row, column, where)
    if _is_blank(value):
        if column.required:
            raise SpecbenchError(
                f"{where}: the id column '{column.name}' is empty; fill it in or unset "
                f"{column.config_key} to number the rows"
            )
        return str(position)
    return str(value).strip()


def _read_reference(value: Any) -> tuple[str | None, list[Any] | None]:
    """(reference, full list): a list (Spec-Bench: one per turn) gives its first element."""
    if isinstance(value, list | tuple):
        items = list(value)
        first = items[0] if items else None
        return (None if _is_blank(first) else str(first)), items
    return (None if _is_blank(value) else str(value)), None


def _read_meta(value: Any) -> dict[str, Any]:
    """A `meta` column: an object (or its JSON text, as CSV stores it) is copied; anything else
    is kept under meta["meta"]."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
    if isinstance(value, dict):
        return dict(value)
    return {} if _is_blank(value) else {"meta": value}


def _read_workload(row: Row, where: str, mapping: FieldMapping, meta: dict[str, Any]) -> str:
    assert mapping.workload is not None
    column = mapping.workload
    value = _value(row, column, where)
    if _is_blank(value):
        if not column.required and get_path(row.values, column.name) is MISSING:
            return ""
        raise SpecbenchError(
            f"{where}: the workload column '{column.name}' is empty; fill it in or remove the row"
        )
    category = str(value).strip()
    if mapping.workload_is_category:
        meta.setdefault("category", category)
    if category in mapping.category_map:
        return mapping.category_map[category]
    if mapping.group_mt_bench and category in MT_BENCH_CATEGORIES:
        return CONVERSATION_WORKLOAD
    return category
