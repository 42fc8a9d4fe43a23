"""What a run keeps of the text it reads and writes: private by default for the user's own data.

Prompts from the user's data (a `path` or `hf_id` dataset: logged traffic, private prompt sets)
are **private** unless the config says `keep_text: true` (or `run --keep-text`): the run's files
then hold token counts, acceptance, timings and the answer checks' results (docs/theory.md §13),
never a prompt, an answer or the answers' token ids. The shipped sets (`name`) and generated
sets (`generate`) are public text and are kept as before (`keep_text: false` makes them private
too). docs/privacy.md lists what each file holds.

In a private workload:
- each prompt's id is written as a salted hash, "h" + 16 hex digits of HMAC-SHA256(key, id), so
  a request id from the logs (which may name a user or a session) never reaches a file. The key
  is the environment variable SPECBENCH_ID_SALT when set (the same ids across runs and data
  sets), else a digest of the prompt's own text (turns, logged conversation, tools), which is
  never stored: whoever can recompute it already holds the prompt; the same prompt gets the same
  id in a resumed run and in any other run that samples it (so `--resume` and `compare`'s
  pairing by prompt work, whatever else each run sampled), and the hash cannot be reversed from
  the run's files alone;
- each answer is replaced by a digest (`answer_digest`) under a key of the workload (the env
  salt, else a digest of all its prompts): what "identical across prompts"
  (analysis/decide/validity.py) compares within the run;
- an error message that quotes the prompt or an answer is withheld (`withhold`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from specbench.data.prompt import Prompt

ID_SALT_ENV = "SPECBENCH_ID_SALT"
MAX_SALT_CHARS = 4096
QUOTE_CHARS = 16  # an error message sharing this many characters with a text quotes it


def salt_from_env() -> bytes | None:
    """SPECBENCH_ID_SALT as bytes, or None when unset or empty."""
    value = os.environ.get(ID_SALT_ENV, "")
    return value[:MAX_SALT_CHARS].encode("utf-8", "surrogatepass") if value else None


def _text_of(p: Prompt) -> bytes:
    item = [p.turns, p.logged, p.tools]
    return json.dumps(item, sort_keys=True, default=str).encode("utf-8", "surrogatepass")


def id_key(prompt: Prompt) -> bytes:
    """The key of a private prompt's id hash (module docstring): the env salt, else a digest of
    the prompt's text."""
    salt = salt_from_env()
    if salt is not None:
        return hashlib.sha256(b"specbench-ids\0" + salt).digest()
    return hashlib.sha256(b"specbench-id-from-prompt\0" + _text_of(prompt)).digest()


def workload_key(prompts: Sequence[Prompt]) -> bytes:
    """The key of a private workload's answer digests: the env salt, else a digest of the
    prompts as loaded (ids and text), the same whenever the run is resumed."""
    salt = salt_from_env()
    if salt is not None:
        return hashlib.sha256(b"specbench-answers\0" + salt).digest()
    h = hashlib.sha256(b"specbench-answers-from-prompts\0")
    for p in prompts:
        h.update(p.id.encode("utf-8", "surrogatepass") + b"\0" + _text_of(p) + b"\0")
    return h.digest()


def hashed_id(key: bytes, raw: str) -> str:
    """ "h" + the first 16 hex digits of HMAC-SHA256(key, raw id)."""
    return (
        "h" + hmac.new(key, raw.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:16]
    )


def answer_digest(key: bytes, answers: Sequence[str]) -> str:
    """A keyed digest of a record's answers (turns joined by \\x1e, as validity compares them)."""
    text = "\x1e".join(answers).encode("utf-8", "surrogatepass")
    return hmac.new(key, b"answer\0" + text, hashlib.sha256).hexdigest()[:24]


def private_prompts(prompts: Sequence[Prompt]) -> list[Prompt]:
    """The prompts with hashed ids, each carrying its workload's answer key
    (`Prompt.private_key`): the harness then writes no text for them."""
    key = workload_key(prompts)
    return [replace(p, id=hashed_id(id_key(p), p.id), private_key=key) for p in prompts]


def withhold(message: str, texts: Iterable[str]) -> str:
    """`message`, or a placeholder when it shares QUOTE_CHARS consecutive characters with one of
    `texts` (an error that quotes the prompt or an answer)."""
    pool = [t for t in texts if len(t) >= QUOTE_CHARS]
    windows = {message[i : i + QUOTE_CHARS] for i in range(len(message) - QUOTE_CHARS + 1)}
    if any(w in t for t in pool for w in windows):
        return "(message withheld: it quotes the prompt or an answer; --keep-text shows it)"
    return message


def prompt_texts(prompt: Prompt) -> list[str]:
    """Every text of a prompt an error message could quote."""
    out = list(prompt.turns)
    for m in prompt.logged or []:
        content = m.get("content")
        out.append(content if isinstance(content, str) else json.dumps(content, default=str))
    return out


def answer_fields(
    prompt: Prompt, answers: list[str], output_ids: list[list[int]] | None
) -> dict[str, Any]:
    """The text fields of a record: the answers and their token ids, or for a private prompt
    their digest only."""
    if prompt.private_key is None:
        out: dict[str, Any] = {"answers": answers}
        if output_ids is not None:
            out["output_ids"] = output_ids
        return out
    return {"answer_digest": answer_digest(prompt.private_key, answers)}


def privacy_note(prompts: dict[str, list[Prompt]]) -> dict[str, Any]:
    """What the run keeps, for env.json and results.json (docs/privacy.md)."""
    private = sorted(w for w, ps in prompts.items() if ps and ps[0].private_key is not None)
    if not private:
        return {"text": "kept", "ids": "as given", "private_workloads": []}
    salt = (
        f"salted with {ID_SALT_ENV}"
        if salt_from_env() is not None
        else "salted with a digest of each prompt's text (salt not stored)"
    )
    return {
        "text": "not stored (keep_text: true keeps it)",
        "ids": f"HMAC-SHA256 hashes, {salt}",
        "private_workloads": private,
    }
