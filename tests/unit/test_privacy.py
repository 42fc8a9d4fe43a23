"""Private prompts (data/privacy.py): hashed ids, their key, answer digests, withheld errors, which
workloads are private by default, and the identical-answer check on digests."""

from __future__ import annotations

import re
from typing import Any

import pytest

from specbench.analysis.decide.validity import identical_across_prompts
from specbench.config import parse_config
from specbench.data.privacy import (
    ID_SALT_ENV,
    answer_digest,
    answer_fields,
    privacy_note,
    private_prompts,
    withhold,
)
from specbench.data.prompt import Prompt


def prompts(*texts: str) -> list[Prompt]:
    return [Prompt(id=f"req-{i}", workload="w", turns=[t]) for i, t in enumerate(texts)]


def test_ids_are_hashed_with_a_key_from_the_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ID_SALT_ENV, raising=False)
    a = private_prompts(prompts("one", "two"))
    assert all(re.fullmatch(r"h[0-9a-f]{16}", p.id) for p in a)
    assert len({p.id for p in a}) == 2 and all(p.private_key for p in a)
    assert [p.id for p in private_prompts(prompts("one", "two"))] == [p.id for p in a]  # resume
    # a prompt keeps its id whatever else a run sampled (compare pairs by prompt) ...
    other = private_prompts(prompts("one", "three"))
    assert other[0].id == a[0].id and other[1].id != a[1].id
    # ... but the answer digests' key is the workload's, and another text is another id
    assert other[0].private_key != a[0].private_key
    assert private_prompts(prompts("uno", "two"))[0].id != a[0].id
    assert a[0].turns == ["one"]  # the text stays in memory for the run


def test_an_env_salt_gives_the_same_ids_whatever_the_prompts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ID_SALT_ENV, raising=False)
    unsalted = private_prompts(prompts("one", "two"))[0].id
    monkeypatch.setenv(ID_SALT_ENV, "s3cret")
    a, b = private_prompts(prompts("one", "two")), private_prompts(prompts("one", "three"))
    assert a[0].id == b[0].id != unsalted
    monkeypatch.setenv(ID_SALT_ENV, "other")
    assert private_prompts(prompts("one", "two"))[0].id != a[0].id
    assert "SPECBENCH_ID_SALT" in privacy_note({"w": a})["ids"]


def test_answer_fields_keep_text_or_a_digest() -> None:
    public = prompts("x")[0]
    assert answer_fields(public, ["hi there"], [[1, 2]]) == {
        "answers": ["hi there"],
        "output_ids": [[1, 2]],
    }
    (private,) = private_prompts([public])
    fields = answer_fields(private, ["hi there"], [[1, 2]])
    assert list(fields) == ["answer_digest"] and "hi" not in fields["answer_digest"]
    key = private.private_key
    assert key is not None
    assert fields["answer_digest"] == answer_digest(key, ["hi there"])
    assert answer_digest(key, ["hi there"]) != answer_digest(key, ["hi", "there"])
    assert privacy_note({"w": [public]})["text"] == "kept"


def test_an_error_quoting_the_prompt_is_withheld() -> None:
    text = "def transfer(account_number_998877, amount):"
    quoted = "ValueError: cannot tokenize 'account_number_998877, amo'"
    assert "998877" not in withhold(quoted, [text])
    plain = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert withhold(plain, [text]) == plain


@pytest.mark.parametrize(
    ("dataset", "keep", "kept"),
    [
        ({"name": "tiny_code"}, None, True),  # a shipped set: public text
        ({"generate": "long_context"}, None, True),
        ({"path": "logs.jsonl"}, None, False),  # the user's data: private by default
        ({"hf_id": "org/logs"}, None, False),
        ({"path": "logs.jsonl"}, True, True),
        ({"name": "tiny_code"}, False, False),
    ],
)
def test_which_workloads_keep_text(dataset: dict[str, Any], keep: bool | None, kept: bool) -> None:
    cfg = {
        "target": {"model": "tiny-target"},
        "draft": {"model": "tiny-draft"},
        "workloads": [{"name": "w", "dataset": dataset}],
    }
    if keep is not None:
        cfg["keep_text"] = keep
    parsed = parse_config(cfg, "test")
    assert parsed.keeps_text(parsed.workloads[0]) is kept


def _rec(pid: str, digest: str, tokens: int = 12, empty: bool = False) -> dict[str, Any]:
    return {
        "kind": "baseline",
        "gamma": 0,
        "prompt_id": pid,
        "answer_digest": digest,
        "content": [{"tokens": tokens, "empty": empty, "degenerate": False}],
    }


def test_identical_answers_are_found_from_their_digests() -> None:
    recs = [_rec("a", "d1"), _rec("b", "d1"), _rec("c", "d2"), _rec("d", "d3", tokens=4)]
    recs.append(_rec("e", "d3", tokens=4))  # short answers: identical by chance, not flagged
    flagged = identical_across_prompts(recs)
    assert sorted(r["prompt_id"] for r in recs if id(r) in flagged) == ["a", "b"]
    assert flagged[id(recs[0])] == "identical to the answer to 1 other prompt(s)"
