"""SIGINT and SIGTERM as a request to stop after the current batch, which a run's loop polls."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: whether a loop of this process has taken the signals over (a signal before it interrupts
#: start-up: nothing was read or written yet)
_taken_over = threading.Event()


def loop_started() -> bool:
    """Whether a :func:`graceful_stop` has been entered in this process."""
    return _taken_over.is_set()


@contextmanager
def graceful_stop() -> Iterator[threading.Event]:
    """SIGINT/SIGTERM request a stop after the current batch (the loop polls the event)."""
    flag = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        flag.set()

    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    _taken_over.set()
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)
