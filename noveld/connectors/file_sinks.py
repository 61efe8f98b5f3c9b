"""The embedded mode's file sinks: events as JSON lines on a text stream (stdout), and rejected
records appended to a dead-letter file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel

from noveld.connectors.closing import Closing
from noveld.connectors.decode import Invalid
from noveld.connectors.source import Record


def _dumps(obj: Any) -> str:
    """Compact JSON with non-ASCII kept as is (matches pydantic's ``model_dump_json``)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class JsonLinesSink:
    """Writes one JSON object per line to a text stream (events on stdout), flushing each line."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, obj: BaseModel | dict[str, Any]) -> None:
        """Serialize a model (``model_dump_json``) or a dict and write it as one line."""
        line = obj.model_dump_json() if isinstance(obj, BaseModel) else _dumps(obj)
        self._stream.write(line + "\n")
        self._stream.flush()


class DlqFileSink(Closing):
    """Appends rejected records as JSON lines to a file; ``flush()`` makes them durable (fsync).

    Each line: ``reason``, ``detail``, ``source``, ``partition``, ``offset`` and ``raw`` (the
    record bytes as UTF-8 text, invalid bytes backslash-escaped). Parent directories are created
    and checked when the sink is (an unusable path fails at startup with ``OSError``); the file
    itself only on the first write, so a clean run leaves no DLQ file. ``count`` is the number of
    lines written by this sink.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_dir():
            raise IsADirectoryError(f"DLQ path {self.path} is a directory (name a file in it)")
        target = self.path if self.path.exists() else self.path.parent
        if not os.access(target, os.W_OK):
            raise PermissionError(f"DLQ path {self.path} is not writable")
        self._file: IO[str] | None = None
        self._closed = False
        self._count = 0

    @property
    def count(self) -> int:
        """Records written by this sink since it was created."""
        return self._count

    def write(self, record: Record, invalid: Invalid) -> None:
        """Append one DLQ line for ``record`` rejected with ``invalid``."""
        if self._closed:
            raise ValueError(f"DLQ sink {self.path} is closed")
        if self._file is None:
            self._file = self._open()
        pos = record.position
        entry = {
            "reason": str(invalid.reason),
            "detail": invalid.detail,
            "source": pos.topic,
            "partition": pos.partition,
            "offset": pos.offset,
            "raw": record.raw.decode("utf-8", errors="backslashreplace"),
        }
        # ensure_ascii (the default) keeps the DLQ file plain ASCII whatever a detail holds
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        try:
            self._file.write(line)
        except OSError as exc:
            raise self._failed(exc) from exc
        self._count += 1

    def _open(self) -> IO[str]:
        """Open for appending, first cutting a torn last line: a run that died (or ran out of
        disk) mid-write left part of a dead letter whose batch was not committed, and which
        the next run writes again — appended after it, both lines were unreadable JSON."""
        try:
            with open(self.path, "a+b") as fh:
                end = fh.seek(0, os.SEEK_END)
                keep = end
                while keep > 0:
                    start = max(keep - 65536, 0)
                    fh.seek(start)
                    chunk = fh.read(keep - start)
                    newline = chunk.rfind(b"\n")
                    if newline >= 0:
                        keep = start + newline + 1
                        break
                    keep = start
                if keep < end:
                    fh.truncate(keep)
            return open(self.path, "a", encoding="utf-8")
        except OSError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: OSError) -> OSError:
        """The error, naming the file (a full disk said only "[Errno 28] No space left")."""
        return OSError(exc.errno, f"cannot write dead letters to {self.path}: {exc.strerror}")

    def flush(self) -> None:
        """Flush buffered lines and fsync them, before the offsets they cover are committed."""
        if self._file is not None:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            except OSError as exc:
                raise self._failed(exc) from exc

    def close(self) -> None:
        """Flush, fsync and close the file; later writes raise ``ValueError``."""
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None
        self._closed = True
