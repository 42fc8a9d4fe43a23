"""The guard of tests/unit: a unit test that loads a model or starts a process fails loudly.

A Python audit hook (sys.addaudithook; it imports nothing) watches every test in this folder:

- opening a model's files (weights, `config.json`, tokenizer files) is a model load: the open
  raises, and the test fails even if the code under test swallowed the error;
- starting a subprocess is allowed only in a test marked `subprocess` (startup checks such as
  "`specbench roi` does not import torch"; they must not run a model either).

Which unit tests may import torch at all is a static check: only those in tests/unit/tensors/
(tests/unit/test_architecture.py). The rules are written out in tests/README.md.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

MODEL_FILE = re.compile(
    r"(\.safetensors|\.bin|\.pt|\.pth|\.gguf|(^|/)(config|generation_config|tokenizer|"
    r"tokenizer_config|special_tokens_map)\.json)$"
)


class ModelLoadInUnitTest(RuntimeError):
    """Raised into the code under test when a unit test touches a model."""


_state: dict[str, Any] = {"active": False, "subprocess_ok": False, "violations": []}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _state["active"]:
        return
    if event == "open" and isinstance(args[0], str | bytes) and args[0]:
        path = args[0].decode() if isinstance(args[0], bytes) else args[0]
        if MODEL_FILE.search(path):
            msg = f"a unit test opened a model file: {path} (move the test out of tests/unit)"
            _state["violations"].append(msg)
            raise ModelLoadInUnitTest(msg)
    elif event == "subprocess.Popen" and not _state["subprocess_ok"]:
        msg = (
            f"a unit test started a process: {args[1]!r} (mark it `subprocess` if it only "
            "checks startup, else move it out of tests/unit)"
        )
        _state["violations"].append(msg)
        raise ModelLoadInUnitTest(msg)


sys.addaudithook(_audit)  # hooks cannot be removed; `active` limits it to unit tests


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "subprocess: a unit test that starts a Python process (startup and import checks only)",
    )


def _guarded(item: pytest.Item) -> Iterator[None]:
    """Run one phase (setup, call, teardown) of a unit test under the guard; module- and
    session-scoped fixtures are set up inside the first test's setup, so they are covered."""
    _state.update(
        active=True,
        subprocess_ok=item.get_closest_marker("subprocess") is not None,
        violations=[],
    )
    try:
        yield
    except BaseException:
        if _state["violations"]:  # say why, whatever the code under test made of it
            raise pytest.fail.Exception("\n".join(_state["violations"]), pytrace=False) from None
        raise
    else:
        if _state["violations"]:
            pytest.fail("\n".join(_state["violations"]), pytrace=False)
    finally:
        _state["active"] = False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))
