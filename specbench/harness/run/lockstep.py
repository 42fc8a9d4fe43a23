"""Unit-by-unit interleaving of two runs (`specbench compare --ab`, docs/ci.md).

Two `specbench run` processes — base and candidate, each under its own interpreter and config —
are started side by side; each stops before every unit and waits for its turn, so the two sides
take turns unit by unit in ABBA order (A B, then B A, …) and never measure at the same time: drift
of the machine, slow or fast, falls on both sides of each paired unit alike. The protocol is one
line at a time over two pipes the coordinator hands the child (`--lockstep R,W`, their file
descriptors): the child writes ``unit`` when it is ready for its next unit and ``end`` when its
units are done (its reports are written only when told, one side at a time, so that writing them
never overlaps the other side's measurement); the coordinator answers ``go``.

Kept hand-written: a pipe and a line protocol are all this needs; a process pool or an RPC library
would bring its own scheduling, which is the thing this module exists to control.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from specbench.errors import SpecbenchError
from specbench.harness.plan.plan import RunEvents
from specbench.record_line import UnitFinished

READY, END, GO = "unit", "end", "go"


def parse_fds(spec: str) -> tuple[int, int]:
    """`R,W` → (read fd, write fd); one line on anything else (a hidden option, but typed by hand
    when debugging)."""
    try:
        read_fd, write_fd = (int(p) for p in spec.split(","))
    except ValueError:
        raise SpecbenchError(f"--lockstep takes two file descriptors R,W (got {spec!r})") from None
    return read_fd, write_fd


class Turns:
    """The child's side: wait for the coordinator's ``go`` before each unit and before reports."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        try:
            self._rx: IO[str] = os.fdopen(read_fd, "r")
            self._tx: IO[str] = os.fdopen(write_fd, "w")
        except OSError as exc:
            raise SpecbenchError(
                f"--lockstep: file descriptors {read_fd},{write_fd}: {exc}"
            ) from None

    def _wait(self, say: str) -> None:
        self._tx.write(say + "\n")
        self._tx.flush()
        if self._rx.readline().strip() != GO:  # the coordinator is gone: stop, keep the records
            raise KeyboardInterrupt

    def before_unit(self) -> None:
        self._wait(READY)

    def before_reports(self) -> None:
        self._wait(END)


class LockstepEvents:
    """RunEvents that take a turn before each unit, passing every event on to `inner`."""

    def __init__(self, inner: RunEvents, turns: Turns) -> None:
        self.inner, self.turns = inner, turns

    def planned(self, total_units: int | None, already_done: int) -> None:
        self.inner.planned(total_units, already_done)

    def unit_started(self, workload: str, temperature: float, label: str, prompt_id: str) -> None:
        self.turns.before_unit()
        self.inner.unit_started(workload, temperature, label, prompt_id)

    def unit_finished(self, unit: UnitFinished) -> None:
        self.inner.unit_finished(unit)

    def cell_updated(
        self, workload: str, temperature: float, state: str, decision: Any, line: float
    ) -> None:
        self.inner.cell_updated(workload, temperature, state, decision, line)


@dataclass
class _Side:
    name: str
    proc: subprocess.Popen[bytes]
    tx: IO[str]
    rx: IO[str]
    log: Path
    state: str = READY

    def next_state(self) -> str:
        line = self.rx.readline().strip()
        self.state = line if line in (READY, END) else ""  # "" = the process is gone
        return self.state

    def go(self) -> None:
        self.tx.write(GO + "\n")
        self.tx.flush()


def _start(name: str, cmd: list[str], log: Path) -> _Side:
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [*cmd, "--lockstep", f"{to_child_r},{from_child_w}"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=(to_child_r, from_child_w),
        )
    os.close(to_child_r)
    os.close(from_child_w)
    return _Side(name, proc, os.fdopen(to_child_w, "w"), os.fdopen(from_child_r, "r"), log)


def _stop_all(sides: list[_Side]) -> None:
    for side in sides:
        for stream in (side.tx, side.rx):
            with contextlib.suppress(OSError):
                stream.close()
        if side.proc.poll() is None:
            side.proc.terminate()
        side.proc.wait()


def _failed(side: _Side, sides: list[_Side]) -> SpecbenchError:
    _stop_all(sides)
    return SpecbenchError(
        f"the {side.name} side exited {side.proc.returncode} before its run ended; see {side.log}"
    )


def run_in_lockstep(
    commands: dict[str, list[str]], logs: dict[str, Path], first: str, pair: int
) -> list[dict[str, Any]]:
    """Run the two commands turn by turn (ABBA by unit, `first` opening); the turns taken, each
    with its side, unit index and the coordinator's clock when it was given and handed back."""
    names = list(commands)
    sides = [_start(n, commands[n], logs[n]) for n in names]
    for side in sides:
        if side.next_state() == "":
            raise _failed(side, sides)
    order = sorted(sides, key=lambda s: s.name != first)
    taken: list[dict[str, Any]] = []
    unit = 0
    while any(s.state == READY for s in sides):
        for side in order:
            if side.state != READY:
                continue
            t0 = time.monotonic()
            side.go()
            if side.next_state() == "":
                raise _failed(side, sides)
            taken.append(
                {"pair": pair, "unit": unit, "side": side.name, "t_go": t0,
                 "t_back": time.monotonic()}
            )  # fmt: skip
        order.reverse()  # A B | B A | A B …: a linear drift cancels over every two units
        unit += 1
    for side in order:  # reports one side at a time, after both sides' measurements
        side.go()
        side.rx.read()  # until the child closes its end (it exits)
        if side.proc.wait() != 0:
            raise _failed(side, sides)
    _stop_all(sides)
    return taken
