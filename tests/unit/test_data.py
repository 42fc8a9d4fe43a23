"""Tests for specbench.data: loaders on real files in tmp_path, sampling, errors, rendering."""

from __future__ import annotations

import importlib
import json
import random
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import specbench
from specbench.config import DatasetSpec, WorkloadSpec
from specbench.data import (
    Prompt,
    PromptTruncatedWarning,
    available_shipped_sets,
    build_context_ids,
    conversation_messages,
    load_dataset_rows,
    load_workload,
)
from specbench.data import loader as data_loader
from specbench.data.render import _as_id_list
from specbench.errors import SpecbenchError

REPO_DATASETS = Path(specbench.__file__).resolve().parents[1] / "datasets"
SHIPPED_FILES = sorted(REPO_DATASETS.glob("*.jsonl"))

# A small Spec-Bench question.jsonl: MT-bench categories, Spec-Bench's own ones, a reference list.
SPEC_BENCH_ROWS: list[dict[str, Any]] = [
    {"question_id": 81, "category": "writing", "turns": ["Write a blog post.", "Rewrite it."]},
    {
        "question_id": 111,
        "category": "math",
        "turns": ["What is 2+2?", "And 3+3?"],
        "reference": ["4", "6"],
    },
    {"question_id": 121, "category": "coding", "turns": ["Write a sort.", "Make it faster."]},
    {"question_id": 161, "category": "translation", "turns": ["Translate: Hallo Welt."]},
    {"question_id": 241, "category": "summarization", "turns": ["Summarize: a long text."]},
    {"question_id": 321, "category": "qa", "turns": ["Who wrote Hamlet?"]},
    {"question_id": 401, "category": "math_reasoning", "turns": ["Solve: x + 1 = 3."]},
    {"question_id": 481, "category": "rag", "turns": ["Given the passage, answer."]},
]


# ---------------------------------------------------------------------------------- helpers


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def workload(workload_name: str, n: int | None = None, **dataset: Any) -> WorkloadSpec:
    return WorkloadSpec(name=workload_name, n=n, dataset=DatasetSpec(**dataset))


def hf_datasets() -> Any:
    """The Hugging Face `datasets` module (by name: mypy run from the repo root would otherwise
    take the repo's datasets/ folder for it)."""
    return importlib.import_module("datasets")


def error_of(spec: DatasetSpec, base_dir: Path | None = None) -> str:
    with pytest.raises(SpecbenchError) as info:
        load_dataset_rows(spec, base_dir)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep `datasets.load_dataset`'s Arrow cache inside the test's tmp_path."""
    datasets = hf_datasets()

    cache = tmp_path / "hf_cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    return cache


# ---------------------------------------------------------------------------------- JSONL


def test_jsonl_prompt_becomes_one_turn_with_reference_and_no_workload(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "a", "prompt": "Say hi.", "reference": "hi"},
            {"id": "b", "turns": ["First?", "Second?"], "meta": {"lang": "en"}},
        ],
    )
    groups = load_dataset_rows(DatasetSpec(path=str(path)), None)
    assert list(groups) == [""]
    first, second = groups[""]
    assert first == Prompt(id="a", workload="", turns=["Say hi."], reference="hi", meta={})
    assert second.turns == ["First?", "Second?"]
    assert second.reference is None
    assert second.meta == {"lang": "en"}


def test_jsonl_relative_path_resolves_from_base_dir_and_numbers_rows(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    write_jsonl(tmp_path / "cfg" / "q.jsonl", [{"prompt": "one"}, {"prompt": "two"}])
    text = (tmp_path / "cfg" / "q.jsonl").read_text()
    (tmp_path / "cfg" / "q.jsonl").write_text("\n" + text.replace("\n", "\n\n"))  # blank lines
    prompts = load_dataset_rows(DatasetSpec(path="q.jsonl"), tmp_path / "cfg")[""]
    assert [(p.id, p.turns) for p in prompts] == [("1", ["one"]), ("2", ["two"])]


def test_specbench_format_reads_workload_column_from_a_path(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"id": "c1", "workload": "code", "prompt": "def f():"},
            {"id": "t1", "workload": "chat", "prompt": "Hello!"},
            {"id": "c2", "workload": "code", "prompt": "class A:"},
        ],
    )
    groups = load_dataset_rows(DatasetSpec(path=str(path), format="specbench"), None)
    assert {k: [p.id for p in v] for k, v in groups.items()} == {
        "code": ["c1", "c2"],
        "chat": ["t1"],
    }
    # without format: specbench a generic file's workload column is ignored
    assert list(load_dataset_rows(DatasetSpec(path=str(path)), None)) == [""]


# ---------------------------------------------------------------------------------- CSV


def test_csv_field_mapping_with_workload_field_and_category_map(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "data.csv",
        "qid,question,answer,kind\n"
        'q1,"Add 1, 2",3,arith\n'
        "q2,Name a colour,red,trivia\n"
        "q3,Add 5 and 6,,arith\n",
    )
    spec = DatasetSpec(
        path=str(path),
        prompt_field="question",
        id_field="qid",
        reference_field="answer",
        workload_field="kind",
        category_map={"arith": "math"},
    )
    groups = load_dataset_rows(spec, None)
    assert list(groups) == ["math", "trivia"]
    assert [p.id for p in groups["math"]] == ["q1", "q3"]
    q1, q3 = groups["math"]
    assert q1.turns == ["Add 1, 2"]
    assert q1.reference == "3"
    assert q3.reference is None  # an empty cell is no reference
    assert q1.meta == {"category": "arith"}
    assert groups["trivia"][0].meta == {"category": "trivia"}


def test_csv_turns_column_holding_a_json_list_is_split_into_turns(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "t.csv",
        'id,turns\nx,"[""Hi there"", ""And then?""]"\ny,[INST] not a list\n',
    )
    x, y = load_dataset_rows(DatasetSpec(path=str(path)), None)[""]
    assert x.turns == ["Hi there", "And then?"]
    assert y.turns == ["[INST] not a list"]


# ---------------------------------------------------------------------------------- Parquet / HF


def test_parquet_with_list_turns_and_integer_ids(tmp_path: Path) -> None:
    path = write_parquet(
        tmp_path / "d.parquet",
        [{"id": 7, "turns": ["a?", "b?"], "cat": "x"}, {"id": 9, "turns": ["c?"], "cat": "y"}],
    )
    groups = load_dataset_rows(DatasetSpec(path=str(path), workload_field="cat"), None)
    assert [(p.id, p.turns) for p in groups["x"]] == [("7", ["a?", "b?"])]
    assert [(p.id, p.turns) for p in groups["y"]] == [("9", ["c?"])]


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_save_to_disk_dataset_and_dataset_dict_split(tmp_path: Path) -> None:
    Dataset, DatasetDict = hf_datasets().Dataset, hf_datasets().DatasetDict
    Dataset.from_list([{"text": "disk one"}, {"text": "disk two"}]).save_to_disk(tmp_path / "ds")
    spec = DatasetSpec(path=str(tmp_path / "ds"), prompt_field="text")  # a directory: hf_disk
    assert [p.turns for p in load_dataset_rows(spec, None)[""]] == [["disk one"], ["disk two"]]

    DatasetDict(
        {
            "train": Dataset.from_list([{"prompt": "from train"}]),
            "test": Dataset.from_list([{"prompt": "from test"}]),
        }
    ).save_to_disk(tmp_path / "dd")
    spec = DatasetSpec(path=str(tmp_path / "dd"), format="hf_disk", split="test")
    assert [p.turns for p in load_dataset_rows(spec, None)[""]] == [["from test"]]
    message = error_of(DatasetSpec(path=str(tmp_path / "dd"), split="validation"))
    assert "no split 'validation'" in message
    assert "test, train" in message


def test_hf_id_local_folder_of_parquet_matches_the_path_loader(
    tmp_path: Path, hf_cache: Path
) -> None:
    folder = tmp_path / "hub_like"
    folder.mkdir()
    rows = [{"id": "p1", "prompt": "alpha", "group": "g"}, {"id": "p2", "prompt": "beta"}]
    write_parquet(folder / "train.parquet", rows)
    via_hf = load_dataset_rows(DatasetSpec(hf_id=str(folder)), None)
    via_path = load_dataset_rows(DatasetSpec(path=str(folder / "train.parquet")), None)
    assert via_hf == via_path
    assert [(p.id, p.turns) for p in via_hf[""]] == [("p1", ["alpha"]), ("p2", ["beta"])]
    assert hf_cache.is_dir()  # the parquet builder ran (and cached inside tmp_path)


def test_hf_id_relative_folder_of_jsonl_and_unknown_split(tmp_path: Path, hf_cache: Path) -> None:
    folder = tmp_path / "hub_jsonl"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", [{"id": "j1", "prompt": "from json", "reference": "r"}])
    prompts = load_dataset_rows(DatasetSpec(hf_id="hub_jsonl"), tmp_path)[""]
    assert [(p.id, p.turns, p.reference) for p in prompts] == [("j1", ["from json"], "r")]
    message = error_of(DatasetSpec(hf_id="hub_jsonl", split="test"), tmp_path)
    assert "could not load Hugging Face dataset 'hub_jsonl'" in message
    assert 'Unknown split "test"' in message


# ---------------------------------------------------------------------------------- Spec-Bench


@pytest.mark.parametrize("fmt", ["auto", "spec_bench"])
def test_spec_bench_groups_mt_bench_categories_into_conversation(tmp_path: Path, fmt: str) -> None:
    path = write_jsonl(tmp_path / "question.jsonl", SPEC_BENCH_ROWS)
    groups = load_dataset_rows(DatasetSpec(path=str(path), format=fmt), None)  # type: ignore[arg-type]
    assert {k: [p.id for p in v] for k, v in groups.items()} == {
        "conversation": ["81", "111", "121"],
        "translation": ["161"],
        "summarization": ["241"],
        "qa": ["321"],
        "math_reasoning": ["401"],
        "rag": ["481"],
    }
    math = groups["conversation"][1]
    assert math.turns == ["What is 2+2?", "And 3+3?"]
    assert math.reference == "4"  # the first element of Spec-Bench's reference list
    assert math.meta == {"category": "math", "references": ["4", "6"]}


def test_spec_bench_without_grouping_and_with_category_map(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "question.jsonl", SPEC_BENCH_ROWS)
    ungrouped = load_dataset_rows(DatasetSpec(path=str(path), group_mt_bench=False), None)
    assert list(ungrouped) == [r["category"] for r in SPEC_BENCH_ROWS]
    assert [p.id for p in ungrouped["math"]] == ["111"]
    assert [p.id for p in ungrouped["math_reasoning"]] == ["401"]

    mapped = load_dataset_rows(
        DatasetSpec(path=str(path), category_map={"coding": "code", "qa": "chat"}), None
    )
    assert [p.id for p in mapped["code"]] == ["121"]  # the map wins over MT-bench grouping
    assert [p.id for p in mapped["chat"]] == ["321"]
    assert [p.id for p in mapped["conversation"]] == ["81", "111"]


def test_load_workload_picks_one_spec_bench_workload(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "question.jsonl", SPEC_BENCH_ROWS)
    prompts = load_workload(workload("conversation", path=str(path)), seed=0)
    assert [p.id for p in prompts] == ["81", "111", "121"]
    assert {p.workload for p in prompts} == {"conversation"}
    assert prompts[0].meta["category"] == "writing"


# ---------------------------------------------------------------------------------- sampling


def test_sampling_is_reproducible_in_file_order_and_seed_dependent(tmp_path: Path) -> None:
    rows = [{"id": f"p{i:02d}", "prompt": f"prompt {i}"} for i in range(30)]
    path = write_jsonl(tmp_path / "many.jsonl", rows)
    spec = workload("chat", n=5, path=str(path))
    first = [p.id for p in load_workload(spec, seed=1)]
    assert first == [p.id for p in load_workload(spec, seed=1)]
    assert first == sorted(first)  # file order is kept
    expected = [f"p{i:02d}" for i in sorted(random.Random(1).sample(range(30), 5))]
    assert first == expected
    assert first != [p.id for p in load_workload(spec, seed=2)]
    assert {p.workload for p in load_workload(spec, seed=1)} == {"chat"}


def test_n_larger_than_the_dataset_warns_and_uses_all(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "few.jsonl", [{"prompt": "a"}, {"prompt": "b"}])
    with pytest.warns(UserWarning, match="asks for n=5 prompts but its dataset has 2"):
        prompts = load_workload(workload("w", n=5, path=str(path)), seed=0)
    assert [p.turns for p in prompts] == [["a"], ["b"]]


def test_load_workload_filters_by_workload_field(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "w.csv", "prompt,topic\nA,code\nB,chat\nC,code\n")
    prompts = load_workload(workload("code", path=str(path), workload_field="topic"), seed=0)
    assert [p.turns[0] for p in prompts] == ["A", "C"]


def test_no_prompts_for_workload_names_existing_workloads(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "w.csv", "prompt,topic\nA,code\nB,chat\n")
    with pytest.raises(SpecbenchError) as info:
        load_workload(workload("math", path=str(path), workload_field="topic"), seed=0)
    assert "workload 'math' has no prompts" in str(info.value)
    assert "code, chat" in str(info.value)


# ---------------------------------------------------------------------------------- shipped sets


def test_shipped_set_keeps_all_rows_and_takes_the_workload_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_jsonl(
        tmp_path / "mini.jsonl",
        [
            {"id": "m1", "workload": "code", "turns": ["x"]},
            {"id": "m2", "workload": "chat", "prompt": "y"},
        ],
    )
    monkeypatch.setattr(data_loader, "shipped_dataset_dirs", lambda: [tmp_path])
    assert available_shipped_sets() == ["mini"]
    groups = load_dataset_rows(DatasetSpec(name="mini"), None)
    assert list(groups) == ["code", "chat"]
    prompts = load_workload(workload("mine", name="mini"), seed=0)
    assert [(p.id, p.workload) for p in prompts] == [("m1", "mine"), ("m2", "mine")]
    assert prompts[0].meta == {"source_workload": "code"}


def test_shipped_set_falls_back_to_cwd_datasets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "datasets").mkdir()
    write_jsonl(tmp_path / "datasets" / "zz_local_only.jsonl", [{"id": "z", "prompt": "zed"}])
    monkeypatch.chdir(tmp_path)
    assert "zz_local_only" in available_shipped_sets()
    prompts = load_dataset_rows(DatasetSpec(name="zz_local_only"), None)[""]
    assert [p.turns for p in prompts] == [["zed"]]


def test_unknown_shipped_set_lists_available_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_jsonl(tmp_path / "alpha.jsonl", [{"prompt": "a"}])
    write_jsonl(tmp_path / "beta.jsonl", [{"prompt": "b"}])
    monkeypatch.setattr(data_loader, "shipped_dataset_dirs", lambda: [tmp_path])
    message = error_of(DatasetSpec(name="gamma"))
    assert "unknown shipped dataset 'gamma'" in message
    assert "alpha, beta" in message


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=[p.stem for p in SHIPPED_FILES])
def test_every_shipped_set_loads_cleanly(path: Path) -> None:
    groups = load_dataset_rows(DatasetSpec(name=path.stem), None)
    prompts = [p for group in groups.values() for p in group]
    assert len(prompts) == sum(1 for line in path.read_text().splitlines() if line.strip())
    assert "" not in groups  # every shipped row names its workload
    assert all(p.turns and all(t.strip() for t in p.turns) for p in prompts)


# ---------------------------------------------------------------------------------- errors


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    message = error_of(DatasetSpec(path="nope.jsonl"), tmp_path)
    assert f"dataset file not found: {tmp_path / 'nope.jsonl'}" in message


def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok"}\n\n{"prompt": "broken"\n')
    message = error_of(DatasetSpec(path=str(path)))
    assert "bad.jsonl line 3: invalid JSON" in message
    path.write_text('{"prompt": "ok"}\n["a list"]\n')
    assert "bad.jsonl line 2: expected a JSON object, got list" in error_of(
        DatasetSpec(path=str(path))
    )


def test_unreadable_csv_and_parquet(tmp_path: Path) -> None:
    ragged = write_csv(tmp_path / "ragged.csv", "id,prompt\n1,hello, world\n")
    assert "ragged.csv row 1 does not have one value per header column" in error_of(
        DatasetSpec(path=str(ragged))
    )
    quoted = write_csv(tmp_path / "quote.csv", 'id,prompt\n1,"never closed\n')
    assert "quote.csv is not a readable CSV file" in error_of(DatasetSpec(path=str(quoted)))
    latin = tmp_path / "latin.csv"
    latin.write_bytes("id,prompt\n1,caf\xe9\n".encode("latin-1"))
    assert "latin.csv is not UTF-8 text" in error_of(DatasetSpec(path=str(latin)))
    fake = tmp_path / "fake.parquet"
    fake.write_text("not parquet at all")
    assert "fake.parquet is not a readable Parquet file" in error_of(DatasetSpec(path=str(fake)))


def test_field_mapping_to_missing_column_lists_available_columns(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "cols.csv", "qid,question\n1,Hi\n")
    message = error_of(DatasetSpec(path=str(path), prompt_field="text"))
    assert "row 1 has no column 'text' (dataset.prompt_field)" in message
    assert "available columns: qid, question" in message
    message = error_of(DatasetSpec(path=str(path), prompt_field="question", workload_field="topic"))
    assert "no column 'topic' (dataset.workload_field)" in message
    message = error_of(DatasetSpec(path=str(path)))  # neither turns nor prompt
    assert "neither a 'turns' nor a 'prompt' column" in message
    assert "qid, question" in message


def test_empty_prompt_names_the_row(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "blank.csv", "prompt\nfine\n   \n")
    assert "blank.csv row 2: the prompt is empty" in error_of(DatasetSpec(path=str(path)))
    path = write_jsonl(tmp_path / "turn.jsonl", [{"turns": ["ok", ""]}])
    assert "turn.jsonl line 1: turn 2 of the prompt is empty" in error_of(
        DatasetSpec(path=str(path))
    )
    path = write_jsonl(tmp_path / "num.jsonl", [{"prompt": 42}])
    assert "the prompt must be text or a list of texts, got int" in error_of(
        DatasetSpec(path=str(path))
    )


@pytest.mark.parametrize("name,content", [("e.jsonl", "\n\n"), ("e.csv", "id,prompt\n")])
def test_empty_file(tmp_path: Path, name: str, content: str) -> None:
    (tmp_path / name).write_text(content)
    assert f"{tmp_path / name} is empty" in error_of(DatasetSpec(path=str(tmp_path / name)))


def test_duplicate_ids_and_conflicting_settings(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "dup.jsonl", [{"id": "a", "prompt": "x"}] * 2)
    assert "line 2: id 'a' already used at line 1" in error_of(DatasetSpec(path=str(path)))
    both = DatasetSpec(path=str(path), prompt_field="prompt", turns_field="turns")
    assert "keep only one of them" in error_of(both)
    assert "applies to dataset.path, not hf_id" in error_of(DatasetSpec(hf_id="x", format="csv"))
    odd = write_jsonl(tmp_path / "data.txt", [{"prompt": "x"}])
    assert "set dataset.format" in error_of(DatasetSpec(path=str(odd)))
    as_jsonl = load_dataset_rows(DatasetSpec(path=str(odd), format="jsonl"), None)
    assert as_jsonl[""][0].turns == ["x"]


# ---------------------------------------------------------------------------------- rendering

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """A tiny byte-level BPE with a BOS post-processor, trained here on a few sentences."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    sentences = [
        "the quick brown fox jumps over the lazy dog",
        "hello world, how are you today?",
        "write a python function that sorts a list",
        "answer the question in one short sentence",
    ]
    backend.train_from_iterator(sentences, trainer)
    bos_id = backend.token_to_id("<s>")
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


@pytest.fixture
def chat_tokenizer(tokenizer: Any) -> Any:
    tokenizer.chat_template = CHAT_TEMPLATE
    yield tokenizer
    tokenizer.chat_template = None


USER_ONLY = [{"role": "user", "content": "hello world"}]


def test_plain_single_turn_is_the_raw_text_with_bos(tokenizer: Any) -> None:
    ids, truncated = build_context_ids(tokenizer, USER_ONLY, "auto", None)
    assert not truncated
    assert ids[0] == tokenizer.bos_token_id
    assert ids == tokenizer("hello world")["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "hello world"


def test_plain_multi_turn_joins_messages_with_blank_lines(tokenizer: Any) -> None:
    messages = [
        {"role": "user", "content": "write a list"},
        {"role": "assistant", "content": "a, b"},
        {"role": "user", "content": "sort it"},
    ]
    ids, _ = build_context_ids(tokenizer, messages, "off", None)
    assert tokenizer.decode(ids, skip_special_tokens=True) == "write a list\n\na, b\n\nsort it"


@pytest.mark.parametrize("mode", ["auto", "on"])
def test_chat_template_is_used_with_a_generation_prompt(chat_tokenizer: Any, mode: str) -> None:
    ids, truncated = build_context_ids(chat_tokenizer, USER_ONLY, mode, None)
    assert not truncated
    assert chat_tokenizer.decode(ids) == "<|user|>hello world\n<|assistant|>"
    assert ids[-1] == chat_tokenizer.convert_tokens_to_ids("<|assistant|>")
    assert ids[0] != chat_tokenizer.bos_token_id  # the template decides, no extra BOS


def test_off_ignores_a_template_and_on_needs_one(chat_tokenizer: Any) -> None:
    ids, _ = build_context_ids(chat_tokenizer, USER_ONLY, "off", None)
    assert chat_tokenizer.decode(ids) == "<s>hello world"
    chat_tokenizer.chat_template = None
    with pytest.raises(SpecbenchError, match="chat_template is 'on' but the tokenizer has no"):
        build_context_ids(chat_tokenizer, USER_ONLY, "on", None)


def test_chat_template_errors_become_specbench_errors(chat_tokenizer: Any) -> None:
    chat_tokenizer.chat_template = "{{ raise_exception('roles must alternate') }}"
    with pytest.raises(SpecbenchError, match="roles must alternate"):
        build_context_ids(chat_tokenizer, USER_ONLY, "auto", None)


def test_truncation_keeps_bos_and_the_last_tokens_and_warns(tokenizer: Any) -> None:
    messages = [{"role": "user", "content": "the quick brown fox jumps over the lazy dog"}]
    full, _ = build_context_ids(tokenizer, messages, "off", None)
    assert len(full) > 6
    with pytest.warns(PromptTruncatedWarning, match=f"prompt of {len(full)} tokens"):
        ids, truncated = build_context_ids(tokenizer, messages, "off", 6)
    assert truncated
    assert ids == [full[0], *full[-5:]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same, truncated = build_context_ids(tokenizer, messages, "off", len(full))
    assert (same, truncated) == (full, False)


def test_truncation_without_bos_keeps_the_last_tokens(chat_tokenizer: Any) -> None:
    full, _ = build_context_ids(chat_tokenizer, USER_ONLY, "on", None)
    with pytest.warns(PromptTruncatedWarning):
        ids, truncated = build_context_ids(chat_tokenizer, USER_ONLY, "on", 3)
    assert truncated
    assert ids == full[-3:]


def test_id_list_normalisation_handles_transformers_return_types() -> None:
    import torch
    from transformers import BatchEncoding

    assert _as_id_list(BatchEncoding({"input_ids": [4, 5]})) == [4, 5]
    assert _as_id_list({"input_ids": [[6, 7]]}) == [6, 7]
    assert _as_id_list(torch.tensor([[8, 9]])) == [8, 9]


# ---------------------------------------------------------------------------------- conversation


def test_conversation_messages_interleave_turns_and_answers() -> None:
    prompt = Prompt(id="c", workload="w", turns=["q1", "q2", "q3"])
    assert conversation_messages(prompt, [], 0) == [{"role": "user", "content": "q1"}]
    assert conversation_messages(prompt, ["a1", "a2", "a3"], 2) == [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    with pytest.raises(ValueError, match="needs 1 earlier answer"):
        conversation_messages(prompt, [], 1)
    with pytest.raises(ValueError, match="turn 3 does not exist"):
        conversation_messages(prompt, ["a1", "a2", "a3"], 3)
