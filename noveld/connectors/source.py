"""The contract every input meets (a JSONL file, stdin, a Kafka topic): batches of raw
records, the positions a batch spans, and acknowledgement of the positions a commit covered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from noveld.schema import SourcePosition


@dataclass(frozen=True)
class Record:
    """One raw input record (undecoded bytes) and where it came from; a Kafka record also
    keeps its key and headers, which its dead letter carries on."""

    raw: bytes
    position: SourcePosition
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


def position_key(topic: str, partition: int) -> str:
    """Offsets key of a topic-partition (``topic:partition``, as the state stores keep it)."""
    return f"{topic}:{partition}"


Positions = dict[str, int]
"""Offsets per :func:`position_key`."""


class Source(Protocol):
    """Where a run's records come from."""

    def read_batch(self, max_docs: int, max_wait_ms: int) -> list[Record]:
        """Up to ``max_docs`` records, waiting at most ``max_wait_ms`` for the first (a
        source that never blocks, a regular file, does not wait); possibly none."""
        ...

    def positions(self, records: Sequence[Record]) -> tuple[Positions, Positions]:
        """(first, next) offsets of a batch just read, per input partition: ``first`` where
        the last acknowledged batch ended, ``next`` where the following batch begins."""
        ...

    def acknowledge(self, nxt: Mapping[str, int]) -> None:
        """The state now holds everything before ``nxt``: the next batch's ``first``."""
        ...

    def close(self) -> None:
        """Release the input."""
        ...
