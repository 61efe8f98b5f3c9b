"""A blocking JSONL input (stdin, a pipe or a device) read on a thread, so that batches close
after ``max_wait_s`` and the main thread never blocks in a read."""

from __future__ import annotations

import queue
import threading
import time

from noveld.connectors.forwarding import ForwardingSource
from noveld.connectors.jsonl import JsonlSource
from noveld.connectors.source import Record


class TimedSource(ForwardingSource):
    """Wraps a blocking ``JsonlSource`` (stdin, or a pipe or device given as a path) so batches
    also close after ``max_wait_s``.

    A daemon thread reads records into a bounded queue (backpressure: it blocks when the
    pipeline falls behind); ``read_batch`` returns as soon as ``max_docs`` records are there or
    ``max_wait_s`` has passed since the first one, so a slow pipe is processed promptly. The
    main thread never blocks in a read, so signals are handled at once.
    """

    _EOF = object()
    rereadable = False  # what a pipe gave is gone once read

    def __init__(self, source: JsonlSource, max_wait_s: float, queue_size: int = 10_000) -> None:
        super().__init__(source)
        self.max_wait_s = max_wait_s
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._ended = False
        self._stopping = False
        self._in_hand = False  # the reader holds a record it has read and not queued yet
        self._thread = threading.Thread(target=self._pump, name="noveld-reader", daemon=True)
        self._thread.start()

    @property
    def exhausted(self) -> bool:
        """The input ended and every record read from it was returned."""
        return self._ended

    def share_read(self) -> float | None:
        """Unknown: a stream read ahead by a thread (stdin, a pipe or a device)."""
        return None

    def _pump(self) -> None:
        while not self._stopping:
            batch = self._source.read_batch(1)
            self._in_hand = bool(batch)
            if not batch:
                self._queue.put(self._EOF)
                return
            self._queue.put(batch[0])
            self._in_hand = False

    def stop_reading(self) -> None:
        """Read no further line from the input: :meth:`read_batch` returns what was read
        already, without waiting, then nothing. A stop request drains this read-ahead rather
        than drop it, as the lines in it were taken from a pipe that cannot give them again
        (lines still in the pipe stay there)."""
        self._stopping = True

    def _take(self, timeout: float) -> object:
        """The next queued item; once stopping, only what is there (or in the reader's hand)."""
        if not self._stopping:
            return self._queue.get(timeout=timeout)
        while True:
            try:
                return self._queue.get_nowait()
            except queue.Empty:
                if not self._in_hand:
                    raise
                time.sleep(0.005)  # the reader is queuing the record it just read

    def read_batch(self, max_docs: int, max_wait_ms: int = 200) -> list[Record]:
        """Up to ``max_docs`` records; may return [] after ``max_wait_ms`` with nothing to
        read. Once a record is there, the batch closes ``max_wait_s`` later at the latest."""
        out: list[Record] = []
        deadline: float | None = None
        poll_s = max_wait_ms / 1000
        while len(out) < max_docs and not self._ended:
            timeout = poll_s if deadline is None else deadline - time.monotonic()
            if timeout <= 0:
                break
            try:
                item = self._take(timeout)
            except queue.Empty:
                if deadline is None or self._stopping:
                    break
                continue
            if item is self._EOF:
                self._ended = True
                self._next = self._source.next_offset
                break
            assert isinstance(item, Record)
            out.append(item)
            self._next = item.position.offset + 1
            if deadline is None:
                deadline = time.monotonic() + self.max_wait_s
        return out

    def close(self) -> None:
        """Nothing to release: stdin stays open; the reader thread is a daemon."""
