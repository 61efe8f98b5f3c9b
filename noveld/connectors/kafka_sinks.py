"""Kafka sinks (kafka-python): events keyed by cluster (assignment batches by input
partition) and dead letters with provenance headers, both through the acknowledged producer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka.errors import KafkaError, MessageSizeTooLargeError

from noveld.connectors.errors import DeadLettersFailed, DeliveryFailed, EventsRefused
from noveld.connectors.jsonl import Record
from noveld.connectors.kafka_client import (
    PRODUCER_MAX_BLOCK_MS,
    START_TIMEOUT_S,
    acknowledged_producer,
    close_producer,
)
from noveld.schema import InvalidReason, event_key, stored_json

PUBLISH_WAIT_S = 10.0
"""How long a delivery attempt waits for the broker's acknowledgements (docs/operations.md,
"Events topic unreachable"); the events stay in the outbox when it does not answer."""


class KafkaEvents:
    """Event sink: one message per event on the events topic, keyed by :func:`event_key`."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        client_options: Mapping[str, Any] | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.topic = topic
        self.producer = acknowledged_producer(
            bootstrap, client_options, "the events producer", start_timeout_s
        )

    def publish(self, events: Sequence[dict[str, Any]]) -> None:
        """Send and wait for the broker's acknowledgement of every event; DeliveryFailed when
        the broker does not take them now (the pipeline keeps them in the outbox), and
        EventsRefused, once the others are acknowledged, naming those too large ever to go."""
        refused: dict[str, str] = {}
        try:
            futures = []
            for e in events:
                value = stored_json(e).encode()
                try:
                    sent = self.producer.send(self.topic, key=event_key(e).encode(), value=value)
                except MessageSizeTooLargeError as exc:
                    refused[str(e["event_id"])] = f"{len(value):,} bytes: {exc}"
                    continue
                futures.append((e, len(value), sent))
            self.producer.flush(timeout=PUBLISH_WAIT_S)
            for e, size, f in futures:
                try:
                    f.get(timeout=PUBLISH_WAIT_S)
                except MessageSizeTooLargeError as exc:  # the broker's limit (message.max.bytes)
                    refused[str(e["event_id"])] = f"{size:,} bytes: {exc}"
        except KafkaError as exc:
            raise DeliveryFailed(f"events topic {self.topic}: {exc}") from exc
        if refused:
            raise EventsRefused(refused)

    def close(self) -> None:
        """Flush and close (events not taken stay in the outbox)."""
        close_producer(self.producer, PRODUCER_MAX_BLOCK_MS / 1000)


DLQ_VALUE_CAP = 900_000
"""Largest dead-letter value sent: under the 1 MiB default request and message limits of
kafka-python and the brokers, with room for the headers. A longer record (an oversize one) is
sent cut, with a ``truncated_from`` header giving its length; otherwise the producer refuses it
and the daemon could never get past it."""


class KafkaDeadLetters:
    """Dead-letter sink: the raw bytes with ``error``/``source_*`` headers on the DLQ topic."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        client_options: Mapping[str, Any] | None = None,
        max_value_bytes: int = DLQ_VALUE_CAP,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.topic = topic
        self.max_value_bytes = min(max_value_bytes, DLQ_VALUE_CAP)
        self.producer = acknowledged_producer(
            bootstrap, client_options, "the dead-letter producer", start_timeout_s
        )
        self.count = 0
        self._sent: list[Any] = []  # futures of dead letters not yet flushed

    def send(self, record: Record, reason: InvalidReason, detail: str) -> None:
        """Queue one dead letter (delivered by :meth:`flush`): the record's key, its own
        headers, then noveld's (so a reader building a dict sees noveld's ``error``)."""
        pos = record.position
        headers = [
            *record.headers,
            ("error", str(reason).encode()),
            ("detail", detail.encode()[:1000]),
            ("source_topic", pos.topic.encode()),
            ("source_partition", str(pos.partition).encode()),
            ("source_offset", str(pos.offset).encode()),
        ]
        value = record.raw
        carried = len(record.key or b"") + sum(len(k) + len(v) for k, v in record.headers)
        cap = max(self.max_value_bytes - carried, 0)  # key and headers count toward the limit
        if len(value) > cap:  # an oversize record must not be too big to park
            headers.append(("truncated_from", str(len(value)).encode()))
            value = value[:cap]
        try:
            self._sent.append(
                self.producer.send(self.topic, key=record.key, value=value, headers=headers)
            )
        except KafkaError as exc:
            raise DeadLettersFailed(f"DLQ topic {self.topic}: {exc!r}") from exc
        self.count += 1

    def flush(self) -> None:
        """Wait until every dead letter is acknowledged (before its offset is committed);
        DeadLettersFailed if the broker did not take one."""
        sent, self._sent = self._sent, []
        try:
            self.producer.flush(timeout=PRODUCER_MAX_BLOCK_MS / 1000)
            for f in sent:
                f.get(timeout=PRODUCER_MAX_BLOCK_MS / 1000)
        except KafkaError as exc:
            raise DeadLettersFailed(f"DLQ topic {self.topic}: {exc!r}") from exc

    def close(self) -> None:
        """Flush and close (giving up on what the broker does not take within the bound)."""
        close_producer(self.producer, PRODUCER_MAX_BLOCK_MS / 1000)
