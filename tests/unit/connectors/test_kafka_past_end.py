"""KafkaSource's own bookkeeping with a fake consumer: partitions claimed after a Redis outage,
and a stored offset past the log end. The fake plays a real Kafka broker: a fetch past the end
is "out of range" and kafka-python (auto_offset_reset = earliest) resets to the log start, so
the next poll returns records the state already counted. The bundled test broker answers such a
fetch with no records instead (the integration test, tests/integration/test_kafka_daemon.py,
covers that one)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from kafka import TopicPartition

import noveld.connectors.kafka_past_end as past_end_mod
import noveld.connectors.kafka_source as kafka_mod
from noveld.connectors.kafka_source import KafkaSource

TP = TopicPartition("docs", 0)
KEY = "docs:0"


class ResettingConsumer:
    """A one-partition log of ``end`` records; a position past the end is reset to 0."""

    def __init__(self, **config: Any) -> None:
        self.end = 30
        self.position = 0
        self.high: int | None = None
        self._paused: set[TopicPartition] = set()
        self.listener: Any = None

    def subscribe(self, topics: Sequence[str], listener: Any) -> None:
        self.listener = listener

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {TP.partition}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.position = offset

    def pause(self, *tps: TopicPartition) -> None:
        self._paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self._paused.difference_update(tps)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.high

    def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.end for tp in tps}

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict[Any, list[Any]]:
        if TP in self._paused:
            return {}
        if self.position > self.end:  # out of range: auto_offset_reset=earliest
            self.position = 0
        self.high = self.end
        msgs = [
            SimpleNamespace(offset=o, timestamp=0, value=b"{}", key=None, headers=[])
            for o in range(self.position, min(self.end, self.position + max_records))
        ]
        self.position += len(msgs)
        return {TP: msgs} if msgs else {}


def source_at(stored: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> KafkaSource:
    """A KafkaSource on the fake consumer, assigned partition 0 at ``stored[KEY]``."""
    monkeypatch.setattr(kafka_mod, "KafkaConsumer", ResettingConsumer)
    monkeypatch.setattr(past_end_mod, "HELD_RECHECK_S", 0.0)
    src = KafkaSource("b:9092", "docs", "g", lambda k: stored[k], lambda k: None, lambda k: None)
    src.assigned([TP])
    return src


def test_records_before_the_stored_offset_are_not_read_twice(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stored = {KEY: 100}
    src = source_at(stored, monkeypatch)
    with caplog.at_level(logging.WARNING, "noveld.kafka"):
        for _ in range(3):
            assert src.read_batch(500, 10) == []  # the reset's records are dropped
    assert src.held == {TP: (100, 30)} and TP in src.consumer.paused()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1  # once, not per turn
    assert said[0].startswith("partition docs:0: the stored offset 100 is past the log end 30")

    stored[KEY] = 0  # the operator: a new topic, read it from the start
    src.read_batch(500, 10)  # the recheck seeks and resumes
    records = src.read_batch(500, 10)
    assert [r.position.offset for r in records] == list(range(30))
    assert src.offsets_of(records) == ({KEY: 0}, {KEY: 30}) and not src.held


def test_a_stale_high_watermark_alone_does_not_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetch's high watermark is below the stored offset but the broker's end offset is
    not (another replica read further meanwhile): read on."""
    stored = {KEY: 20}
    src = source_at(stored, monkeypatch)
    src.consumer.high = 10
    records = src.read_batch(500, 10)
    assert [r.position.offset for r in records] == list(range(20, 30)) and not src.held


def test_revoking_a_held_partition_unpauses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python keeps a partition's paused flag across an eager rebalance that assigns it
    again: a revoked hold must not leave it paused for good."""
    src = source_at({KEY: 100}, monkeypatch)
    src.read_batch(500, 10)
    assert src.held
    src.revoked([TP])
    assert not src.held and not src.consumer.paused()


def test_partitions_assigned_while_the_store_is_down_are_claimed_once_it_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The assignment callback parks what it cannot claim; ``resync`` claims it (one stored
    offset read, one seek) and resumes it."""
    reads: list[str] = []
    down = True

    def stored(key: str) -> int:
        if down:
            raise ConnectionError("redis is down")
        reads.append(key)
        return 12

    monkeypatch.setattr(kafka_mod, "KafkaConsumer", ResettingConsumer)
    src = KafkaSource("b:9092", "docs", "g", stored, lambda k: None, lambda k: None)
    src.assigned([TP])  # must not raise inside kafka-python's callback
    assert src.unclaimed == [TP] and TP in src.consumer.paused()
    with pytest.raises(ConnectionError):
        src.raise_deferred()
    with pytest.raises(ConnectionError):
        src.resync()  # still down: the caller retries
    assert src.unclaimed == [TP]

    down = False
    src.resync()
    assert reads == [KEY]  # claimed and sought once, not again by the resync of the others
    assert not src.unclaimed and not src.consumer.paused()
    assert src.expected == {KEY: 12} and src.consumer.position == 12
