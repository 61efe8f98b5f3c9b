"""The embedded mode's event and dead-letter sinks: JSON lines on stdout, a list in memory,
the DLQ file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO, Any

from noveld.connectors.decode import Invalid
from noveld.connectors.file_sinks import DlqFileSink
from noveld.connectors.jsonl import Record
from noveld.schema import InvalidReason, stored_json


def write_all(fd: int, data: bytes) -> None:
    """Write every byte to ``fd``, however many ``write(2)`` calls it takes.

    A write to a full pipe that a signal interrupts returns the bytes written so far. Python's
    text layer over an unbuffered stream (``PYTHONUNBUFFERED=1``, as the container image sets)
    ignores that count, so a SIGTERM while a slow reader held up stdout silently lost the rest
    of the batch's events, after their commit had taken them out of the outbox."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class StdoutEvents:
    """Event sink writing one JSON object per line (UTF-8)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.count = 0
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation: a StringIO
            self._fd = None

    def publish(self, events: Sequence[dict[str, Any]]) -> None:
        """Write all of it (a line is delivered once the pipe has it); an event read back from
        a store is written as stored (:func:`stored_json`)."""
        text = "".join([stored_json(ev) + "\n" for ev in events])
        self.stream.flush()  # anything written through the stream itself goes first
        if self._fd is None:
            self.stream.write(text)
            self.stream.flush()
        else:
            write_all(self._fd, text.encode())
        self.count += len(events)


class CollectingEvents:
    """Event sink that keeps events in a list (evaluate, demo, tests)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def publish(self, events: Sequence[dict[str, Any]]) -> None:
        """Append."""
        self.events.extend(events)


class FileDeadLetters:
    """Dead-letter sink appending to a JSONL file."""

    def __init__(self, sink: DlqFileSink) -> None:
        self.sink = sink

    def send(self, record: Record, reason: InvalidReason, detail: str) -> None:
        """Append one dead letter."""
        self.sink.write(record, Invalid(reason, detail))

    def flush(self) -> None:
        """fsync, so dead letters are durable before their offsets are committed."""
        self.sink.flush()
