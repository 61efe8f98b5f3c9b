"""A file input read one batch ahead, so the next batch is decoded and encoded on a second
thread (:mod:`noveld.daemon.stages.prefetch`) while the pipeline steps this one.

Only a regular file is read ahead: a stop drops the batch read ahead and a Redis outage
opens the file again at the committed line, and the file gives that batch again either way.
stdin (lines taken from a pipe are gone) and Kafka (a rebalance may revoke the partitions of
a batch read ahead) read as before. To the loop the source looks as if nothing was read
past the batch it returned: positions, offsets and checksums are the batch's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from noveld.connectors.forwarding import ForwardingSource
from noveld.connectors.jsonl import JsonlSource
from noveld.connectors.source import Record
from noveld.connectors.timed_source import TimedSource
from noveld.daemon.stages.prefetch import Prefetched, Prefetcher, Prepared


class Lookahead(ForwardingSource):
    """A rereadable :class:`JsonlSource` whose :meth:`read_batch` returns the batch read at
    the previous call (its preparation under way since) and reads the next."""

    rereadable = True

    def __init__(self, source: JsonlSource, prepare: Callable[[Sequence[Record]], Prepared]):
        super().__init__(source)
        self._prefetcher = Prefetcher(prepare)
        self._ahead: tuple[Prefetched, int] | None = None  # the next batch, the line after it

    def _read(self, max_docs: int) -> tuple[Prefetched, int] | None:
        """The source's next batch, its preparation submitted, and the line after it."""
        records = self._source.read_batch(max_docs)
        if not records:
            return None
        return self._prefetcher.submit(records), self._source.next_offset

    def read_batch(self, max_docs: int, max_wait_ms: int = 0) -> list[Record]:
        """The batch read ahead (else one read now), after reading the one after it. The
        batches have ``max_docs`` records as the source's own would: the loop asks for the
        same number each time."""
        got = self._ahead if self._ahead is not None else self._read(max_docs)
        self._ahead = None
        if got is None:
            self._next = self._source.next_offset
            return []
        records, self._next = got
        if not self._source.exhausted:
            self._ahead = self._read(max_docs)
        return records

    @property
    def exhausted(self) -> bool:
        """The file is read to its end and the batch read ahead was returned."""
        return self._source.exhausted and self._ahead is None

    def close(self) -> None:
        """Stop preparing and close the file."""
        self._ahead = None
        self._prefetcher.close()
        self._source.close()


def read_ahead(
    source: JsonlSource | TimedSource,
    prefetches: bool,
    prepare: Callable[[Sequence[Record]], Prepared],
) -> JsonlSource | TimedSource | Lookahead:
    """``source`` read one batch ahead when it is a regular file and the pipeline
    ``prefetches``; else ``source`` itself."""
    if prefetches and isinstance(source, JsonlSource) and source.rereadable:
        return Lookahead(source, prepare)
    return source
