"""A replica's batch is its share of ``batch.max_docs`` by the input partitions it holds, so N
replicas together seat about one batch between two exchanges of deltas; a consumer holding
every partition (one replica) reads whole batches, as before."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from kafka import TopicPartition

import noveld.connectors.kafka_source as kafka_mod
from noveld.connectors.kafka_source import KafkaSource, batch_share

PARTS = [TopicPartition("docs", p) for p in range(4)]


@pytest.mark.parametrize(
    ("held", "parts", "want"),
    [
        (4, 4, 256),
        (1, 4, 64),
        (2, 4, 128),
        (3, 4, 192),
        (1, 3, 86),
        (5, 4, 256),
        (0, 4, 256),
        (0, 0, 256),
    ],
)
def test_the_share_is_rounded_up_and_whole_without_a_share_to_take(
    held: int, parts: int, want: int
) -> None:
    assert batch_share(256, held, parts) == want


def test_a_tiny_batch_still_reads_one_record() -> None:
    assert batch_share(1, 1, 12) == 1


class FourPartitions:
    """A consumer of a 4-partition topic holding ``held`` of them; polls return a record per
    allowed slot (a backlog), and count the metadata look-ups."""

    def __init__(self, **config: Any) -> None:
        self.held = list(PARTS)
        self.lookups = 0
        self.unknown = False  # metadata of the topic not fetched yet: kafka-python says None

    def subscribe(self, topics: Sequence[str], listener: Any) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return set(self.held)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        self.lookups += 1
        return None if self.unknown else {tp.partition for tp in PARTS}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        pass

    def highwater(self, tp: TopicPartition) -> int | None:
        return None

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict[Any, list[Any]]:
        tp = self.held[0]
        return {
            tp: [
                SimpleNamespace(offset=o, timestamp=0, value=b"{}", key=None, headers=[])
                for o in range(max_records)
            ]
        }


def source(monkeypatch: pytest.MonkeyPatch, share: bool = True) -> KafkaSource:
    monkeypatch.setattr(kafka_mod, "KafkaConsumer", FourPartitions)
    src = KafkaSource("b:9092", "docs", "g", lambda k: 0, lambda k: None, lambda k: None,
                      share_batches=share)  # fmt: skip
    src.assigned(PARTS)
    return src


def test_a_replica_reads_its_share_and_the_whole_batch_once_it_holds_every_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = source(monkeypatch)
    assert len(src.read_batch(256, 10)) == 256  # all four partitions: one replica
    src.revoked(PARTS[1:])
    src.consumer.held = PARTS[:1]
    assert len(src.read_batch(256, 10)) == 64
    assert len(src.read_batch(256, 10)) == 64
    assert src.consumer.lookups == 2  # the topic's size is asked once per rebalance


def test_sharing_off_reads_whole_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    src = source(monkeypatch, share=False)
    src.revoked(PARTS[1:])
    src.consumer.held = PARTS[:1]
    assert len(src.read_batch(256, 10)) == 256


def test_a_topic_of_unknown_size_reads_whole_batches_until_it_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = source(monkeypatch)
    src.revoked(PARTS[1:])
    src.consumer.held = PARTS[:1]
    src.consumer.unknown = True
    assert len(src.read_batch(256, 10)) == 256
    src.consumer.unknown = False
    assert len(src.read_batch(256, 10)) == 64  # asked again, and now known
    assert src.consumer.lookups == 2
