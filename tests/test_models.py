"""Tests for specbench.models on real tiny Llama models and BPE tokenizers built in tmp dirs."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from specbench.config import ModelSpec
from specbench.errors import SpecbenchError
from specbench.models import (
    LoadedModel,
    check_pair_compatible,
    load_model,
    resolve_model_path,
)
from specbench.models import resolve as resolve_module

CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "The quick brown fox jumps over the lazy dog.",
    "Speculative decoding drafts tokens with a small model and verifies them with a large one.",
    "for i in range(10):\n    print(i * i)\n",
    "A draft model must share the target's vocabulary.",
]
VOCAB_SIZE = 300
EOS = "<|endoftext|>"
PAD = "<|pad|>"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO_ROOT = Path(__file__).resolve().parents[1]
TINY_TARGET_CONFIG = REPO_ROOT / "specbench" / "assets" / "tiny-pair" / "target" / "config.json"


def _train_tokenizer() -> PreTrainedTokenizerFast:
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS, pad_token=PAD)


def _tiny_llama(vocab_size: int, eos_token_id: int) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        eos_token_id=eos_token_id,
        bos_token_id=eos_token_id,
        pad_token_id=None,
    )
    return LlamaForCausalLM(config)


def _save_pair(
    directory: Path, model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerBase
) -> Path:
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    return _train_tokenizer()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: PreTrainedTokenizerFast) -> Path:
    model = _tiny_llama(len(tokenizer), tokenizer.eos_token_id)
    return _save_pair(tmp_path_factory.mktemp("tiny-llama"), model, tokenizer)


@pytest.fixture(scope="module")
def loaded(model_dir: Path) -> LoadedModel:
    return load_model(ModelSpec(model=str(model_dir), dtype="float32", device="cpu"))


def _cpu_spec(path: Path | str) -> ModelSpec:
    return ModelSpec(model=str(path), dtype="float32", device="cpu")


def _copy_with_tokenizer_edit(src: Path, dst: Path, old_token: str, new_token: str) -> Path:
    """A copy of a model dir whose tokenizer.json renames one vocabulary entry."""
    shutil.copytree(src, dst)
    tokenizer_file = dst / "tokenizer.json"
    data = json.loads(tokenizer_file.read_text())
    vocab = data["model"]["vocab"]
    vocab[new_token] = vocab.pop(old_token)
    tokenizer_file.write_text(json.dumps(data))
    return dst


def _populate_hub_cache(cache: Path, repo_id: str, model_dir: Path) -> None:
    """Lay out a Hugging Face hub cache entry (refs/main → snapshot) holding model_dir's files."""
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / COMMIT
    shutil.copytree(model_dir, snapshot)
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(COMMIT)


# --- resolve_model_path, pick_device, pick_dtype ------------------------------------------------


def test_resolve_existing_dir_and_hub_ids(model_dir: Path) -> None:
    assert resolve_model_path(str(model_dir)) == str(model_dir)
    assert resolve_model_path("Qwen/Qwen2.5-0.5B") == "Qwen/Qwen2.5-0.5B"
    assert resolve_model_path("gpt2") == "gpt2"


def test_resolve_file_is_not_a_model_dir(tmp_path: Path) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    with pytest.raises(SpecbenchError, match="is a file, not a model directory"):
        resolve_model_path(str(weights))


def test_resolve_tiny_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(resolve_module, "tiny_model_dir", lambda which: tmp_path / which)
    with pytest.raises(SpecbenchError, match="has not been built yet"):
        resolve_model_path("tiny-draft")
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "config.json").write_text("{}")
    assert resolve_model_path("tiny-target") == str(tmp_path / "target")


# --- load_model ----------------------------------------------------------------------------------


def test_load_by_local_path(loaded: LoadedModel, model_dir: Path) -> None:
    assert loaded.path == str(model_dir)
    assert loaded.name == str(model_dir)
    assert loaded.device == torch.device("cpu")
    assert loaded.dtype == torch.float32
    assert not loaded.model.training
    assert next(loaded.model.parameters()).dtype == torch.float32
    assert not any(p.requires_grad for p in loaded.model.parameters())
    assert loaded.n_params == sum(p.numel() for p in loaded.model.parameters()) > 0
    assert loaded.tokenizer.eos_token == EOS
    ids = loaded.tokenizer("def add(a, b):")["input_ids"]
    with torch.inference_mode():
        logits = loaded.model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), len(loaded.tokenizer))


def test_load_by_hub_id_from_offline_cache(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "hub-cache"
    _populate_hub_cache(cache, "specbench/tiny", model_dir)
    # huggingface_hub reads HF_HUB_CACHE at import time, so the cache is also passed explicitly;
    # HF_HUB_OFFLINE is re-read by load_model on every call.
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub = load_model(
        ModelSpec(model="specbench/tiny", dtype="float32", device="cpu"), cache_dir=cache
    )
    assert hub.path == "specbench/tiny"
    assert hub.dtype == torch.float32
    assert len(hub.tokenizer) == VOCAB_SIZE
    assert check_pair_compatible(hub, hub).real_vocab_size == VOCAB_SIZE


def test_unreachable_hub_falls_back_to_cache_fast(
    model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without HF_HUB_OFFLINE, one failed probe switches the load to the cache (no retries)."""
    import huggingface_hub
    from huggingface_hub import constants

    cache = tmp_path / "hub-cache"
    _populate_hub_cache(cache, "specbench/tiny", model_dir)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    probed_urls: list[str] = []

    def unreachable(url: str, **kwargs: object) -> None:
        probed_urls.append(url)
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", unreachable)
    with caplog.at_level(logging.WARNING, logger="specbench.models"):
        hub = load_model(_cpu_spec("specbench/tiny"), cache_dir=cache)
    assert len(probed_urls) == 1
    assert "hub is unreachable" in caplog.text
    assert len(hub.tokenizer) == VOCAB_SIZE


def test_dir_without_config_json(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(SpecbenchError, match=r"has no config\.json"):
        load_model(_cpu_spec(tmp_path))


def test_unknown_architecture(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "made-up-arch"}))
    with pytest.raises(SpecbenchError, match="made-up-arch") as excinfo:
        load_model(_cpu_spec(tmp_path))
    assert "trust_remote_code" not in str(excinfo.value)


def test_remote_code_architecture_suggests_trust_remote_code(tmp_path: Path) -> None:
    config = {
        "model_type": "made-up-arch",
        "auto_map": {"AutoModelForCausalLM": "modeling_made_up.MadeUpForCausalLM"},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpecbenchError, match="set trust_remote_code: true"):
        load_model(_cpu_spec(tmp_path))


# --- check_pair_compatible -----------------------------------------------------------------------


def test_padded_embeddings_are_compatible(
    loaded: LoadedModel, model_dir: Path, tmp_path: Path
) -> None:
    padded_model = LlamaForCausalLM.from_pretrained(model_dir)
    padded_model.resize_token_embeddings(VOCAB_SIZE + 20)
    padded_dir = _save_pair(tmp_path / "padded", padded_model, loaded.tokenizer)
    padded_target = load_model(_cpu_spec(padded_dir))
    info = check_pair_compatible(padded_target, loaded)
    assert info.real_vocab_size == VOCAB_SIZE
    assert info.target_logits_size == VOCAB_SIZE + 20
    assert info.draft_logits_size == VOCAB_SIZE
    assert info.eos_token_ids == (loaded.tokenizer.eos_token_id,)
    assert info.notes == ()


def test_changed_token_names_id_and_both_tokens(
    loaded: LoadedModel, model_dir: Path, tmp_path: Path
) -> None:
    # A byte-level base token that no merge uses (the corpus is plain ASCII).
    old_token = "Ā"
    token_id = loaded.tokenizer.get_vocab()[old_token]
    draft_dir = _copy_with_tokenizer_edit(model_dir, tmp_path / "changed", old_token, "Ā-x")
    draft = load_model(_cpu_spec(draft_dir))
    with pytest.raises(SpecbenchError) as excinfo:
        check_pair_compatible(loaded, draft)
    message = str(excinfo.value)
    assert message == (
        f"draft and target tokenizers differ at id {token_id}: target 'Ā' vs draft 'Ā-x'; "
        "use a draft from the same model family"
    )


def test_different_vocab_sizes(loaded: LoadedModel, model_dir: Path, tmp_path: Path) -> None:
    bigger_tokenizer = _train_tokenizer()
    bigger_tokenizer.add_tokens(["<extra-token>"])
    bigger_model = _tiny_llama(len(bigger_tokenizer), bigger_tokenizer.eos_token_id)
    draft = load_model(_cpu_spec(_save_pair(tmp_path / "bigger", bigger_model, bigger_tokenizer)))
    with pytest.raises(SpecbenchError, match="target has 300 tokens, draft has 301"):
        check_pair_compatible(loaded, draft)


def test_logits_narrower_than_vocab(loaded: LoadedModel, tmp_path: Path) -> None:
    narrow_model = _tiny_llama(VOCAB_SIZE - 10, loaded.tokenizer.eos_token_id)
    draft = load_model(_cpu_spec(_save_pair(tmp_path / "narrow", narrow_model, loaded.tokenizer)))
    with pytest.raises(SpecbenchError, match="draft model emits 290 logits"):
        check_pair_compatible(loaded, draft)


def test_eos_mismatch_warns(
    loaded: LoadedModel, model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pad_id = loaded.tokenizer.pad_token_id
    eos_id = loaded.tokenizer.eos_token_id
    shutil.copytree(model_dir, tmp_path / "other-eos")
    config_file = tmp_path / "other-eos" / "tokenizer_config.json"
    tokenizer_config = json.loads(config_file.read_text())
    tokenizer_config["eos_token"] = PAD
    config_file.write_text(json.dumps(tokenizer_config))
    generation_file = tmp_path / "other-eos" / "generation_config.json"
    generation_file.write_text(json.dumps({"eos_token_id": pad_id}))
    draft = load_model(_cpu_spec(tmp_path / "other-eos"))
    assert draft.tokenizer.eos_token_id == pad_id
    with caplog.at_level(logging.WARNING, logger="specbench.models"):
        info = check_pair_compatible(loaded, draft)
    assert info.eos_token_ids == (eos_id,)
    assert len(info.notes) == 1
    assert f"draft EOS ids [{pad_id}] differ from target EOS ids [{eos_id}]" in info.notes[0]
    assert info.notes[0] in caplog.text


@pytest.mark.skipif(
    not TINY_TARGET_CONFIG.is_file(),
    reason="the shipped tiny pair is not trained yet (specbench/assets/tiny-pair/target missing)",
)
def test_shipped_tiny_pair_is_compatible() -> None:
    target = load_model(ModelSpec(model="tiny-target", dtype="float32", device="cpu"))
    draft = load_model(ModelSpec(model="tiny-draft", dtype="float32", device="cpu"))
    info = check_pair_compatible(target, draft)
    assert info.real_vocab_size == len(target.tokenizer)
    assert target.n_params > draft.n_params


def test_memory_profile_of_the_tiny_pair_matches_its_config() -> None:
    """KV bytes per token = 2 (K, V) × layers × KV heads × head_dim × 4 (fp32), from config.json."""
    from specbench.models import memory_profile

    target = load_model(ModelSpec(model="tiny-target", dtype="float32", device="cpu"))
    draft = load_model(ModelSpec(model="tiny-draft", dtype="float32", device="cpu"))
    t, d = memory_profile(target.model), memory_profile(draft.model)
    assert t["kv_bytes_per_token"] == 2 * 10 * 5 * 32 * 4
    assert d["kv_bytes_per_token"] == 2 * 1 * 3 * 32 * 4
    assert t["weight_bytes"] == 4 * target.n_params
    assert d["weight_bytes"] == 4 * draft.n_params
