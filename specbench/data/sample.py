"""Seeded reservoir sampling per bucket: at most k items of each bucket from a stream of any
length, each item of a bucket equally likely to be kept, holding only the sample in memory.

Algorithm R (Vitter 1985): the n-th item of a bucket (1-based) replaces a uniformly chosen kept
item with probability k / n. Each bucket has its own generator seeded from (seed, bucket), so a
bucket's sample does not depend on how the other buckets interleave with it in the file nor on
which buckets were asked for. Written here because neither numpy nor the standard library
samples a stream of unknown length; its uniformity is checked by a seeded simulation in the tests.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Reservoir(Generic[T]):
    rng: random.Random
    seen: int = 0
    kept: list[tuple[int, T]] = field(default_factory=list)  # (stream position, item)


class Reservoirs(Generic[T]):
    """`add(bucket, item)` for every item of the stream; `sample()` the kept items in stream
    order. `k=None` keeps everything (no sampling)."""

    def __init__(self, k: int | None, seed: int) -> None:
        if k is not None and k < 1:
            raise ValueError("k must be >= 1")
        self.k = k
        self.seed = seed
        self._buckets: dict[Hashable, _Reservoir[T]] = {}
        self._position = 0

    def add(self, bucket: Hashable, item: T) -> None:
        slot = self.offer(bucket)
        if slot is not None:
            self.put(bucket, slot, item)

    def offer(self, bucket: Hashable) -> int | None:
        """Count the next item of `bucket` and draw: the slot it is to take, or None when it is
        not kept. Lets a caller build (parse) only the items that are kept."""
        res = self._buckets.get(bucket)
        if res is None:
            # a str seed is hashed with SHA-512 by `random`: stable across runs and platforms
            res = self._buckets[bucket] = _Reservoir(random.Random(f"{self.seed}|{bucket!r}"))
        self._position += 1
        res.seen += 1
        if self.k is None or len(res.kept) < self.k:
            return len(res.kept)
        j = res.rng.randrange(res.seen)
        return j if j < self.k else None

    def put(self, bucket: Hashable, slot: int, item: T) -> None:
        """Store the item `offer` drew into `slot`."""
        res = self._buckets[bucket]
        if slot == len(res.kept):
            res.kept.append((self._position, item))
        else:
            res.kept[slot] = (self._position, item)

    def withdraw(self, bucket: Hashable) -> None:
        """The item just offered turned out unusable: it no longer counts as seen."""
        self._buckets[bucket].seen -= 1

    def seen(self) -> dict[Hashable, int]:
        """Items offered per bucket, in order of first appearance."""
        return {b: r.seen for b, r in self._buckets.items()}

    def sample(self) -> list[T]:
        """Every bucket's kept items, merged back into stream order."""
        kept = [pair for r in self._buckets.values() for pair in r.kept]
        return [item for _, item in sorted(kept, key=lambda pair: pair[0])]
