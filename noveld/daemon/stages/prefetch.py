"""Prefetch stage: the part of decoding and featurizing a batch that reads no state — each
record's document, each document's tokens and encoded vector — computed on a second thread
while the model steps the batch before. The labels' check, the breaker, the vocabulary ids
and everything after stay on the pipeline's thread, in order, so a batch gives the same
documents, state and events with or without it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from noveld.connectors.decode import Invalid
from noveld.connectors.jsonl import Record
from noveld.featurize import TextViews
from noveld.schema import DecodedDocument


@dataclass(frozen=True)
class Prepared:
    """A batch's records decoded (before the labels' check) and its documents' text views."""

    decoded: list[DecodedDocument | Invalid]
    views: dict[int, TextViews] = field(default_factory=dict)  # by id() of a decoded document

    def read_of(self, docs: Sequence[DecodedDocument]) -> list[TextViews] | None:
        """The views of ``docs`` (documents of :attr:`decoded`), in their order; None when one
        was not prepared here."""
        views = self.views
        try:
            return [views[id(d)] for d in docs]
        except KeyError:
            return None


class Prefetched(list[Record]):
    """A batch of records whose :class:`Prepared` is being computed on the prefetch thread."""

    ahead: Future[Prepared]


class Prefetcher:
    """One worker thread that prepares batches ahead, one at a time, in the order given."""

    def __init__(self, prepare: Callable[[Sequence[Record]], Prepared]) -> None:
        self._prepare = prepare
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="noveld-prefetch")

    def submit(self, records: list[Record]) -> Prefetched:
        """``records`` as a batch whose preparation is under way."""
        batch = Prefetched(records)
        batch.ahead = self._pool.submit(self._prepare, records)
        return batch

    def close(self) -> None:
        """Drop what was not started and wait for the batch being prepared (a few ms)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
