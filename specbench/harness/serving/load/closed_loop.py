"""The closed loop's thread pool for HTTP backends: `workers` requests in flight, each finished
one replaced at once, results handed back in the caller's thread."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

from specbench.harness.serving.protocol.base import Conversation, ConversationResult


def run_threaded(
    work: Callable[[Conversation], ConversationResult],
    items: list[Conversation],
    workers: int,
) -> Iterator[tuple[int, ConversationResult]]:
    """Run `work` over `items` with `workers` in flight (closed loop), yielding (index, result) in
    the caller's thread as each completes.

    Daemon threads rather than a ThreadPoolExecutor: on Ctrl-C (a KeyboardInterrupt in the caller)
    no new item starts and the process exits at once, dropping only the requests in flight; an
    executor's threads would be joined at exit, holding the process until their requests end.
    """
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(items)):
        todo.put(i)
    done: queue.SimpleQueue[tuple[int, ConversationResult | BaseException]] = queue.SimpleQueue()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((i, work(items[i])))
            except BaseException as exc:  # a bug: re-raised in the caller's thread
                done.put((i, exc))
                return

    for _ in range(min(workers, len(items))):
        threading.Thread(target=worker, daemon=True).start()
    try:
        for _ in range(len(items)):
            while True:
                try:
                    i, res = done.get(timeout=0.1)  # short waits keep Ctrl-C responsive
                    break
                except queue.Empty:
                    continue
            if isinstance(res, BaseException):
                raise res
            yield i, res
    finally:
        stop.set()
