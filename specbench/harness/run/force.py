"""`run --force`: the run already in DIR is removed only once the new one has started.

The old run's files are moved to DIR/.replaced-run while the new run starts; the first record it
writes proves it could start (the pair loaded, the server answered), and the old files are then
deleted. A run that stops before writing one (a server that is down, a model that does not load,
Ctrl-C) puts them back, so `--force` against an unreachable server loses nothing.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specbench.harness.plan.plan import RUN_FILES
from specbench.records import RECORDS_FILE

ASIDE = ".replaced-run"
_OLD_RUN = (RECORDS_FILE, "config.yaml", "env.json", *RUN_FILES, "plots")


def _started(out_dir: Path) -> bool:
    records = out_dir / RECORDS_FILE
    return records.is_file() and records.stat().st_size > 0


@contextmanager
def replacing(out_dir: Path, force: bool) -> Iterator[None]:
    """Around a run: with `force`, set the old run aside; delete it once the new run has written
    a record, restore it if the new run stops before."""
    if not force or not _started(out_dir):
        yield
        return
    aside = out_dir / ASIDE
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir()
    for name in _OLD_RUN:
        if (out_dir / name).exists():
            (out_dir / name).rename(aside / name)
    try:
        yield
    except BaseException:
        if not _started(out_dir):  # nothing new measured: the old run comes back as it was
            _restore(aside, out_dir)
            raise
        shutil.rmtree(aside, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _restore(aside: Path, out_dir: Path) -> None:
    for name in _OLD_RUN:  # every one was set aside: what is here now, the new run made
        new, old = out_dir / name, aside / name
        if new.is_dir():
            shutil.rmtree(new)
        elif new.exists():
            new.unlink()  # config.yaml, env.json, an empty warmup.jsonl, written before it stopped
        if old.exists():
            old.rename(new)
    aside.rmdir()
