"""A logged conversation rendered by a real chat template: the shipped tiny pair's tokenizer with a
template set here renders exactly what `apply_chat_template` gives."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.data import build_context_ids
from specbench.data.logged_rows import FieldNames, parse_row
from specbench.data.sources import Row
from specbench.models.tinypair import TINY_PAIR_DIR
from tests.unit.test_conversations import EXPECTED, LOGGED, TOOLS

# The tiny pair's tokenizer has no chat template; this one renders roles, tool calls, tool
# results and tool definitions the way real templates do (tojson of arguments / tools). Newlines
# are written as {{ '\\n' }}: transformers renders templates with trim_blocks.
TEMPLATE = (
    "{% if tools %}<|tools|>{{ tools | tojson }}{{ '\\n' }}{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
    "{% for c in m.get('tool_calls', []) %}<call>{{ c['function']['name'] }}"
    "{{ c['function']['arguments'] | tojson }}</call>{% endfor %}"
    "{% if m.get('tool_call_id') %}[{{ m['tool_call_id'] }}]{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def chat_tokenizer() -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(TINY_PAIR_DIR / "target"))
    assert not tok.chat_template  # the shipped pair has none: the test sets its own
    tok.chat_template = TEMPLATE
    return tok


def test_logged_conversation_renders_as_the_chat_template_does(chat_tokenizer: Any) -> None:
    row = Row("line 1", {"messages": LOGGED, "response": "It is sunny.", "tools": TOOLS})
    req = parse_row(row, FieldNames(), 0)
    ids, truncated = build_context_ids(chat_tokenizer, req.messages, "auto", None, req.tools)
    want = chat_tokenizer.apply_chat_template(
        EXPECTED, tools=TOOLS, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert ids == list(want) and not truncated
    text = chat_tokenizer.decode(ids)
    assert text.startswith('<|tools|>[{"type": "function"')
    assert "<|system|>Be brief.\n" in text
    assert '<call>weather{"city": "Paris"}</call>' in text and "[call_1]" in text
    assert text.endswith("<|tool|>18 C, sunny[call_1]\n<|assistant|>")
    assert req.dropped_parts == {"image_url": 1} and req.response == "It is sunny."
