"""Device-synchronised wall-clock timing.

CUDA kernels run asynchronously: a timer read without a synchronize measures the launch, not the
work. `Clock.now()` synchronises the device first (a no-op on CPU), so every interval it bounds
contains the whole forward it brackets.
"""

from __future__ import annotations

import time

import torch


class Clock:
    """`now()` in milliseconds, synchronising `device` first when it is a CUDA device."""

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._device = device

    def now(self) -> float:
        if self._cuda:
            torch.cuda.synchronize(self._device)
        return time.perf_counter() * 1000.0
