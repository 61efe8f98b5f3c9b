"""The base of sources that read through a :class:`~noveld.connectors.jsonl.JsonlSource` (a
pipe read on a thread, a file read one batch ahead): what they answer for it, so each only
says how it reads batches and when its input is over."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from noveld.connectors.jsonl import JsonlSource
from noveld.connectors.source import Positions, Record, position_key


class ForwardingSource:
    """Positions, acknowledgements, checksums and the held last line of the inner source, as
    of the batches this one returned (``_next``: the line after the last of them)."""

    rereadable: bool

    def __init__(self, source: JsonlSource) -> None:
        self._source = source
        self._next = source.next_offset

    @property
    def exhausted(self) -> bool:
        """The input is over and every batch read from it was returned."""
        raise NotImplementedError

    @property
    def next_offset(self) -> int:
        """The line after the last record returned (what was read past it is not counted)."""
        return self._next

    def positions(self, records: Sequence[Record]) -> tuple[Positions, Positions]:
        """(first, next) line offsets of the batch just returned
        (:meth:`JsonlSource.positions`)."""
        key = position_key(self._source.path, 0)
        return {key: self._source.acknowledged}, {key: self._next}

    def acknowledge(self, nxt: Mapping[str, int]) -> None:
        """The state holds the lines before ``nxt``: the next batch's first offset."""
        self._source.acknowledge(nxt)

    @property
    def acknowledged(self) -> int:
        """The line offset last acknowledged (at first, the resume point)."""
        return self._source.acknowledged

    def checksum_at(self, offset: int) -> int | None:
        """The checksum of the lines before ``offset``, the end of a batch returned: the inner
        source keeps one after each record it read (:meth:`JsonlSource.checksum_at`)."""
        return self._source.checksum_at(offset)

    @property
    def held_tail(self) -> bool:
        """Whether the input ends inside a line that is not JSON (:meth:`JsonlSource._hold`)."""
        return self.exhausted and self._source.held_tail

    @property
    def held_tail_cr(self) -> bool:
        """The held line holds carriage returns."""
        return self._source.held_tail_cr

    @property
    def held_tail_bytes(self) -> int:
        """The held line's length."""
        return self._source.held_tail_bytes

    def share_read(self) -> float | None:
        """How far into its file the inner source has read (None: not a regular file)."""
        return self._source.share_read()
