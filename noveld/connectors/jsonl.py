"""JSONL file / stdin source (a pipe is read on a thread: :mod:`noveld.connectors.timed_source`;
the sinks are in :mod:`noveld.connectors.file_sinks`).

The embedded mode's connectors: records are raw bytes with a ``SourcePosition`` so the same
decoder and DLQ path as Kafka apply. For files the topic is the path ("-" for stdin), the
partition is 0 and the offset is the 0-based line number.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import zlib
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import IO

from noveld.connectors.closing import Closing
from noveld.connectors.source import Positions, position_key
from noveld.connectors.source import Record as Record
from noveld.schema import SourcePosition

STDIN = "-"
"""Path meaning standard input."""


def _content(line: bytes) -> bytes:
    """What the checksum takes of a line: without its newline and one carriage return before
    it (or at the end of the data: a ``\r\n`` writer caught between the two)."""
    if line.endswith(b"\n"):
        line = line[:-1]
    return line[:-1] if line.endswith(b"\r") else line


def _unfinished(line: bytes) -> bool:
    """Whether a file's last line, which has no newline, does not parse as JSON: likely a
    record a writer has not finished appending, so it is left for the next run rather than
    dead-lettered for good."""
    try:
        json.loads(line)
    except ValueError:  # includes UnicodeDecodeError
        return bool(line.strip())
    return False


class JsonlSource(Closing):
    """Reads records from a JSONL file or stdin ("-"), one per line, resuming at ``start_offset``.

    Offsets are 0-based line numbers. Blank (whitespace-only) lines consume an offset but yield
    no record. Line terminators (``\\n``, ``\\r\\n``) are stripped; the bytes are not decoded.
    With ``max_line_bytes`` set, a longer line is cut to ``max_line_bytes + 1`` bytes (so the
    decoder rejects it as oversize) and its rest is skipped without being held in memory.
    Reading stdin blocks until a line or EOF arrives. A file's last line without a newline that
    is not JSON, or is over-long, is not read (``held_tail``): a writer may be appending to the
    file, and the next run reads the line once it is complete.

    The source keeps a checksum of the lines it has consumed (:meth:`checksum_at`): CRC-32
    chained over each line's content without its terminator (:func:`_content`), plus one
    newline, so the checksum of a file's first N lines does not change when lines are appended to
    it, a last line gets its newline, ``\r\n`` becomes ``\n``, or ``max_line_bytes`` changes.
    A state stores it with its offset; the run that resumes from that offset compares it with
    the lines it skips to tell the same input from a changed, rotated or replaced one.
    """

    def __init__(
        self, path: str, start_offset: int = 0, *, max_line_bytes: int | None = None
    ) -> None:
        if start_offset < 0:
            raise ValueError(f"start_offset must be >= 0, got {start_offset}")
        self.path = path
        self._max_line = max_line_bytes
        # stdin is read through its own reader on a duplicate descriptor: a reader thread
        # blocked in sys.stdin.buffer would hold that object's lock while the interpreter
        # finalizes the standard streams at exit, which aborts the process ("could not acquire
        # lock for <stdin> at interpreter shutdown").
        self._stream: IO[bytes] = (
            open(os.dup(sys.stdin.fileno()), "rb")  # noqa: SIM115
            if path == STDIN
            else open(path, "rb")  # noqa: SIM115
        )
        self._owns_stream = True  # for stdin, the duplicate: closing it leaves stdin open
        #: a regular file, which a later run (or this one, after an outage) can read again from
        #: any line; stdin, a FIFO, ``<(command)`` or a device cannot
        self.rereadable = path != STDIN and stat.S_ISREG(os.fstat(self._stream.fileno()).st_mode)
        self._next = 0  # line number of the next line to read
        self.exhausted = False
        self.held_tail = False  # a last line left unread: no newline and not JSON (yet)
        self.held_tail_cr = False  # ... and it holds carriage returns
        self.held_tail_bytes = 0  # ... and its length
        #: (``_next``, CRC-32 of the lines before it) as one value: the reading thread changes
        #: both at once
        self._at = (0, 0)
        #: (offset after a record, checksum of the lines before it) from the resume point on,
        #: the offsets a commit may stop at; appended by the reading thread, trimmed by
        #: :meth:`checksum_at` (deque ends are thread-safe)
        self._crcs: deque[tuple[int, int]] = deque()
        self.skip_to(start_offset)
        self._acked = self._next  # where the batch read next begins (:meth:`positions`)

    def skip_to(self, offset: int) -> bool:
        """Read past the lines before ``offset`` without returning them (the resume point's
        way); whether the input reached it."""
        while self._next < offset and self._read_line() is not None:
            pass
        return self._next >= offset

    @property
    def checksum(self) -> int:
        """CRC-32 of the lines before :attr:`next_offset` (see the class docstring)."""
        return self._at[1]

    def checksum_at(self, offset: int) -> int | None:
        """The checksum of the lines before ``offset`` — the position now, or just after a record
        read since the last offset asked for — else None. Forgets the offsets before
        ``offset``: ask in increasing order (a commit's next offset)."""
        crcs = self._crcs
        while crcs and crcs[0][0] < offset:
            crcs.popleft()
        at, crc = self._at
        if at == offset:
            return crc
        return crcs[0][1] if crcs and crcs[0][0] == offset else None

    @property
    def next_offset(self) -> int:
        """Line number of the next line to be read (the resume point after what was returned)."""
        return self._next

    def share_read(self) -> float | None:
        """How far into a regular file reading is, 0 to 1 (None for stdin, a pipe or a file
        that is empty or closed): progress on long runs."""
        if not self.rereadable or self._stream.closed:
            return None
        size = os.fstat(self._stream.fileno()).st_size
        return min(self._stream.tell() / size, 1.0) if size else None

    def _read_line(self) -> bytes | None:
        """Next line without its terminator, or None at EOF (sets ``exhausted``)."""
        if self.exhausted:
            return None
        limit = self._max_line
        if limit is None:
            line, cut = self._stream.readline(), False
        else:
            line = self._stream.readline(limit + 2)  # room for "\r\n"
            cut = len(line) == limit + 2 and not line.endswith(b"\n")
        if not line:
            self.exhausted = True
            return None
        if line.endswith(b"\n") and not cut:  # the usual line: the checksum in one call
            if line.endswith(b"\r\n"):
                line = line[:-2]
                crc = zlib.crc32(b"\n", zlib.crc32(line, self._at[1]))
            else:
                crc = zlib.crc32(line, self._at[1])  # the content and its newline as they are
                line = line[:-1]
        elif cut and limit is not None:
            crc, ended = self._skip_rest(line)
            if not ended and self.rereadable:  # at the end of the file: still being written?
                self._hold(line)
                return None
            line = line[: limit + 1]
            crc = zlib.crc32(b"\n", crc)
        elif _unfinished(line):
            # a file: a writer may still be appending to it. A pipe: its writer stopped
            # mid-line; given the stream again, a run resumes at this line, which a fragment
            # consumed (dead-lettered, in the checksum) would refuse
            self._hold(line)
            return None
        else:  # a last line without its newline
            crc = zlib.crc32(b"\n", zlib.crc32(_content(line), self._at[1]))
        self._next += 1
        self._at = (self._next, crc)
        return line

    def _hold(self, line: bytes) -> None:
        """Leave a last line without a newline for the next run (it is not consumed)."""
        self.exhausted = self.held_tail = True
        self.held_tail_cr = b"\r" in line  # or its lines end in CR alone (old Mac files)
        self.held_tail_bytes = len(line)

    def _skip_rest(self, first: bytes) -> tuple[int, bool]:
        """Read past the rest of an over-long line whose first bytes are ``first``, without
        holding it: the checksum with its whole content (as :func:`_content` takes it, even
        where a chunk splits its ``\r\n``), and whether a newline ended it (else the file did)."""
        crc, held, chunk = self._at[1], b"", first
        while True:
            ended = chunk.endswith(b"\n")
            data = held + (chunk[:-1] if ended else chunk)
            held = b""
            if data.endswith(b"\r"):  # the terminator's, if a newline follows or the data ends
                data, held = data[:-1], b"\r"
            crc = zlib.crc32(data, crc)
            if ended or not chunk:
                return crc, ended
            chunk = self._stream.readline(1 << 16)

    def read_batch(self, max_docs: int, max_wait_ms: int = 0) -> list[Record]:
        """Up to ``max_docs`` records; fewer (possibly none) only when the input is exhausted.
        A read blocks until a line or the end of the input comes (``max_wait_ms`` is not used:
        a pipe is read through :class:`TimedSource`)."""
        if max_docs < 1:
            raise ValueError(f"max_docs must be >= 1, got {max_docs}")
        out: list[Record] = []
        topic = self.path
        while len(out) < max_docs:
            offset = self._next
            line = self._read_line()
            if line is None:
                break
            if line.strip():
                self._crcs.append(self._at)  # a batch (a commit) may end after this record
                out.append(
                    Record(
                        line,
                        SourcePosition.at(topic, 0, offset),
                    )
                )
        return out

    def positions(self, records: Sequence[Record]) -> tuple[Positions, Positions]:
        """(first, next) line offsets of the batch just read: where the last acknowledged
        batch ended, and the line after the batch (blank lines after its last record
        included)."""
        key = position_key(self.path, 0)
        return {key: self._acked}, {key: self._next}

    def acknowledge(self, nxt: Mapping[str, int]) -> None:
        """The state holds the lines before ``nxt``: the next batch's first offset."""
        self._acked = nxt[position_key(self.path, 0)]

    @property
    def acknowledged(self) -> int:
        """The line offset last acknowledged (at first, the resume point)."""
        return self._acked

    def __iter__(self) -> Iterator[Record]:
        """Iterate all remaining records."""
        while True:
            batch = self.read_batch(256)
            if not batch:
                return
            yield from batch

    def close(self) -> None:
        """Close the file (stdin is left open)."""
        if self._owns_stream:
            self._stream.close()
