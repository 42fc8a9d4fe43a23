"""Check that a draft can speculate for a target: the same vocabulary, id for id, and logits that
cover it; and how the two line up (`VocabInfo`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specbench.errors import SpecbenchError
from specbench.models.load import LoadedModel

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VocabInfo:
    """How a compatible pair's vocabularies line up.

    Both tokenizers map the same token to the same id for every id below `real_vocab_size`. The
    models' logits may be wider (embeddings padded for efficiency), so the engine compares and
    samples over `logits[..., :real_vocab_size]` only.
    """

    real_vocab_size: int
    target_logits_size: int
    draft_logits_size: int
    eos_token_ids: tuple[int, ...] = ()  # the target's EOS ids: decoding stops on these
    notes: tuple[str, ...] = ()  # non-fatal findings (e.g. the draft's EOS ids differ)


def logits_size(model: PreTrainedModel) -> int:
    """How many logits the model emits per position (its lm_head rows, padding included)."""
    output_embeddings = model.get_output_embeddings()
    weight = getattr(output_embeddings, "weight", None)
    if isinstance(weight, torch.Tensor):
        return int(weight.shape[0])
    return int(model.config.get_text_config().vocab_size)


def eos_token_ids(loaded: LoadedModel) -> tuple[int, ...]:
    """The EOS ids of a model: its tokenizer's plus its generation config's, sorted."""
    ids: set[int] = set()
    tokenizer_eos = loaded.tokenizer.eos_token_id
    if isinstance(tokenizer_eos, int):
        ids.add(tokenizer_eos)
    generation_config = getattr(loaded.model, "generation_config", None)
    generation_eos = getattr(generation_config, "eos_token_id", None)
    if isinstance(generation_eos, int):
        ids.add(generation_eos)
    elif isinstance(generation_eos, list | tuple):
        ids.update(token_id for token_id in generation_eos if isinstance(token_id, int))
    return tuple(sorted(ids))


def _ids_to_tokens(tokenizer: PreTrainedTokenizerBase) -> dict[int, str]:
    return {token_id: token for token, token_id in tokenizer.get_vocab().items()}


def _show_token(token: str | None) -> str:
    return repr(token) if token is not None else "(no token)"


def check_pair_compatible(target: LoadedModel, draft: LoadedModel) -> VocabInfo:
    """Check that the draft shares the target's vocabulary and return how the logits line up.

    The real vocabulary is every id the tokenizer can produce (added tokens included). It must map
    id → token identically in both; logits wider than it (padded embeddings) are fine. EOS ids
    that differ only produce a warning (logged and kept in `VocabInfo.notes`): the target
    verifies every token, so outputs are unchanged and decoding stops on the target's EOS ids; a
    draft with other EOS ids merely drafts less usefully near the end of an answer.
    """
    family_hint = "use a draft from the same model family"
    target_tokens = _ids_to_tokens(target.tokenizer)
    draft_tokens = _ids_to_tokens(draft.tokenizer)
    target_vocab_size = max(target_tokens, default=-1) + 1
    draft_vocab_size = max(draft_tokens, default=-1) + 1
    if target_vocab_size != draft_vocab_size:
        raise SpecbenchError(
            f"draft and target vocabularies differ in size: target has {target_vocab_size} "
            f"tokens, draft has {draft_vocab_size}; {family_hint}"
        )
    for token_id in range(target_vocab_size):
        target_token = target_tokens.get(token_id)
        draft_token = draft_tokens.get(token_id)
        if target_token != draft_token:
            raise SpecbenchError(
                f"draft and target tokenizers differ at id {token_id}: target "
                f"{_show_token(target_token)} vs draft {_show_token(draft_token)}; {family_hint}"
            )

    sizes = {"target": logits_size(target.model), "draft": logits_size(draft.model)}
    for role, size in sizes.items():
        if size < target_vocab_size:
            raise SpecbenchError(
                f"the {role} model emits {size} logits but its tokenizer has {target_vocab_size} "
                "tokens; its output layer does not cover the vocabulary"
            )

    notes: list[str] = []
    target_eos = eos_token_ids(target)
    draft_eos = eos_token_ids(draft)
    if target_eos != draft_eos:
        notes.append(
            f"draft EOS ids {list(draft_eos)} differ from target EOS ids {list(target_eos)}; "
            "decoding stops on the target's"
        )
    if not target_eos:
        notes.append("the target has no EOS token; generation stops only at max_new_tokens")
    for note in notes:
        logger.warning(note)
    return VocabInfo(
        real_vocab_size=target_vocab_size,
        target_logits_size=sizes["target"],
        draft_logits_size=sizes["draft"],
        eos_token_ids=target_eos,
        notes=tuple(notes),
    )
