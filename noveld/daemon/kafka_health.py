"""What the Kafka daemon's readiness and lag metrics say about its consumer: partitions
assigned or held, the brokers answering, the backlog."""

from __future__ import annotations

import logging

from noveld.connectors.kafka_source import KafkaSource
from noveld.daemon.metrics import Metrics

log = logging.getLogger("noveld.kafka_mode")


def refresh_lag(metrics: Metrics, source: KafkaSource) -> None:
    """Export the consumer lag now (the end offsets are re-read at most every few seconds);
    a broker that does not answer leaves the last values, and says so once (kafka-python
    itself logs nothing an operator sees: a dead broker was otherwise silent)."""
    was_failing = source.lag_failing
    try:
        metrics.set_lag(source.lag())
    except Exception as exc:  # kafka-python's errors: the lag is advisory
        if not was_failing:
            log.warning("Kafka did not answer for the consumer lag (%r); is the broker up?", exc)
    else:
        if was_failing and not source.lag_failing:
            log.warning("Kafka answers again")
    metrics.set_kafka(not source.lag_failing, len(source.held))


def is_ready(source: KafkaSource) -> bool:
    """Partitions assigned, none held, and the brokers answering."""
    return bool(source.expected) and not source.held and not source.lag_failing


def unready(source: KafkaSource) -> str:
    """Why /readyz would say 503 in Kafka mode (no partitions, partitions held, or the
    brokers not answering)."""
    if not source.expected:
        return "no partitions assigned (waiting for the group)"
    if source.lag_failing:
        return "Kafka does not answer (the consumer lag's end-offsets request failed)"
    held = ", ".join(
        f"{tp.topic}:{tp.partition} (stored offset {stored}, log end {end})"
        for tp, (stored, end) in sorted(source.held.items())
    )
    return f"stored offsets past the log end, not reading {held}"
