"""Kafka partitions whose offset stored with the state is past the end of their log (the topic
was deleted and re-created, or the broker lost records): held, not read, until the stored offset
is within the log again."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from kafka import KafkaConsumer, TopicPartition

from noveld.connectors.kafka_client import partition_name

log = logging.getLogger("noveld.kafka")

HELD_RECHECK_S = 5.0
"""How often a held partition's stored offset and log end are read again (a round trip to the
broker and one to the store each time)."""


class PastEndHolds:
    """The held partitions of one consumer: ``held`` maps each to (stored offset, log end).

    ``expected`` is the source's own map of the next offset per partition (shared, not copied):
    a released partition is sought to the offset stored now and recorded there."""

    def __init__(
        self,
        consumer: KafkaConsumer,
        expected: dict[str, int],
        stored_offset: Callable[[str], int],
    ) -> None:
        self.consumer = consumer
        self.expected = expected
        self._stored_offset = stored_offset
        self.held: dict[TopicPartition, tuple[int, int]] = {}
        self._checked = float("-inf")

    def check(self, behind: Sequence[TopicPartition] = ()) -> None:
        """Hold partitions whose stored offset is past the end of their log: reading them would
        count the new log's records against offsets already committed (a real broker resets the
        consumer to the log start: everything counted again), or wait silently forever (a
        broker that answers an offset past the end with no records). Evidence: records before
        the stored offset (``behind``), or a fetch's high watermark below it, confirmed by the
        broker's end offset. A held partition is paused, said once, and checked again every
        :data:`HELD_RECHECK_S` seconds against the offset stored *now* (an operator may have
        reset it): it is read again once that offset is within the log."""
        for tp in behind:  # out of range on the broker's own word: back to the state's offset
            self.consumer.seek(tp, self.expected[partition_name(tp.topic, tp.partition)])
            self.consumer.pause(tp)
        suspects = set(behind)
        for tp in self.consumer.assignment():
            high = self.consumer.highwater(tp)
            key = partition_name(tp.topic, tp.partition)
            if tp not in self.held and high is not None and high < self.expected.get(key, 0):
                suspects.add(tp)
        recheck = bool(self.held) and time.monotonic() - self._checked >= HELD_RECHECK_S
        if not suspects and not recheck:
            return
        parts = sorted(suspects | (set(self.held) if recheck else set()))
        try:
            ends = self.consumer.end_offsets(parts)
        except Exception as exc:  # kafka-python's errors: check again at the next turn
            log.debug("end offsets for the past-the-end check failed: %r", exc)
            ends = {}
        for tp in parts:
            key = partition_name(tp.topic, tp.partition)
            if key not in self.expected:
                continue  # revoked meanwhile
            # a fetch's high watermark and the end offset may lag each other: the larger
            end = max(ends.get(tp, -1), self.consumer.highwater(tp) or -1)
            if tp in self.held:
                self._checked = time.monotonic()
                if end >= 0:
                    self._recheck(tp, key, end)
            elif tp in behind or (tp in ends and end < self.expected[key]):
                self.hold(tp, key, end)

    def hold(self, tp: TopicPartition, key: str, end: int) -> None:
        """Stop reading a partition whose stored offset is past its log end, and say so."""
        stored = self.expected[key]
        self.consumer.pause(tp)
        self.held[tp] = (stored, end)
        self._checked = time.monotonic()
        shown = str(end) if end >= 0 else "unknown"
        log.warning(
            "partition %s: the stored offset %d is past the log end %s (the topic was deleted "
            "and re-created, or the broker lost records); not reading it until the stored "
            "offset is within the log: set it to 0 (a new topic) or to the log end (records "
            'lost) with noveld state set-offset — docs/operations.md, "Stored offsets past '
            'the log end"',
            key,
            stored,
            shown,
        )

    def release(self, partitions: Sequence[TopicPartition]) -> None:
        """Forget the holds of revoked partitions and unpause them (kafka-python keeps a
        partition's paused flag if it is assigned again)."""
        held = [tp for tp in partitions if self.held.pop(tp, None) is not None]
        if held:
            self.consumer.resume(*held)

    def _recheck(self, tp: TopicPartition, key: str, end: int) -> None:
        """A held partition: read it again from the offset stored now, if the log reaches it."""
        try:
            stored = self._stored_offset(key)
        except Exception as exc:  # the store's outage is the loop's business: check later
            log.debug("stored offset of %s unavailable: %r", key, exc)
            return
        if stored > end:
            self.held[tp] = (stored, end)
            return
        del self.held[tp]
        self.consumer.seek(tp, stored)
        self.expected[key] = stored
        self.consumer.resume(tp)
        log.warning(
            "partition %s: the stored offset %d is within the log again (end %d); reading it "
            "from there",
            key,
            stored,
            end,
        )
