"""SIGINT and SIGTERM as a request to stop after the current batch, which a run's loop polls."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


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
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)
