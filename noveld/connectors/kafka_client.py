"""Kafka client plumbing shared by the source, the sinks and ``noveld produce``: bounded client
start-up, the acknowledged producer, partition names (kafka-python)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from kafka import KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from noveld.connectors.errors import BrokerSilent


class _Closable(Protocol):
    """A client :func:`start_within` can close if its constructor returns too late."""

    def close(self) -> None: ...


T = TypeVar("T", bound=_Closable)

log = logging.getLogger(__name__)

BOOTSTRAP_TIMEOUT_MS = 10_000
"""How long a client's constructor waits for its first metadata (kafka-python's
``bootstrap_timeout_ms``; its default is 30 s)."""

START_TIMEOUT_S = BOOTSTRAP_TIMEOUT_MS / 1000 + 5
"""How long :func:`start_within` waits for a client's constructor. kafka-python bounds the
bootstrap itself, but not a TLS handshake: against a listener that accepts and never answers
(a plaintext port, a hung broker) an ``SSL`` client's constructor waited forever."""


_KAFKA_LOG = logging.getLogger("kafka")
_quiet: dict[str, Any] = {"depth": 0, "level": logging.NOTSET, "held": False}
_quiet_lock = threading.Lock()


@contextmanager
def quiet_kafka_logs() -> Iterator[None]:
    """Hold kafka-python's own log below CRITICAL while a client starts: each failed attempt
    to reach the bootstrap servers logs two or three WARNING/ERROR lines, a score of them
    before the one message that names the problem (``kafka_unreachable``)."""
    with _quiet_lock:
        if _quiet["depth"] == 0 and not _quiet["held"]:
            _quiet["level"] = _KAFKA_LOG.level
            _KAFKA_LOG.setLevel(logging.CRITICAL)
        _quiet["depth"] += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet["depth"] -= 1
            if _quiet["depth"] == 0 and not _quiet["held"]:
                _KAFKA_LOG.setLevel(_quiet["level"])


def _hold_quiet(held: bool) -> None:
    """After a client failed to start, kafka-python's IO thread goes on logging its failed
    attempts; its log stays quiet until a client starts (``held``), then gets its level back."""
    with _quiet_lock:
        if held and not _quiet["held"]:
            if _quiet["depth"] == 0:
                _quiet["level"] = _KAFKA_LOG.level
            _KAFKA_LOG.setLevel(logging.CRITICAL)
        elif not held and _quiet["held"] and _quiet["depth"] == 0:
            _KAFKA_LOG.setLevel(_quiet["level"])
        _quiet["held"] = held


def start_within(build: Callable[[], T], what: str, timeout_s: float = START_TIMEOUT_S) -> T:
    """``build()`` (a kafka-python client's constructor) on a helper thread; its result, or
    its exception, or :class:`BrokerSilent` naming ``what`` once ``timeout_s`` passed. A
    constructor still stuck then is left behind on its daemon thread (nothing can interrupt
    it); should it finish after all, the client is closed."""
    done = threading.Event()
    lock = threading.Lock()
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            client = build()
        except BaseException as exc:  # handed to the waiting thread
            out["error"] = exc
        else:
            with lock:
                out["client"] = client
                late = "abandoned" in out
            if late:
                client.close()
        done.set()

    threading.Thread(target=run, name=f"noveld-start-{what}", daemon=True).start()
    with quiet_kafka_logs():
        finished = done.wait(timeout_s)
        failed = not finished or "error" in out
        _hold_quiet(failed)
    if not finished:
        with lock:
            if "client" not in out:
                out["abandoned"] = True
                raise BrokerSilent(what, timeout_s)
    if "error" in out:
        raise out["error"]
    client: T = out["client"]
    return client


def partition_name(topic: str, partition: int) -> str:
    """Offsets key of a topic-partition (same format as the state stores use)."""
    return f"{topic}:{partition}"


def describe_partitions(partitions: Sequence[TopicPartition]) -> str:
    """Partitions for a log line: ``docs[0,1,2]`` (several topics: ``a[0], b[1]``)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(
        f"{topic}[{','.join(str(p) for p in sorted(parts))}]"
        for topic, parts in sorted(by_topic.items())
    )


PRODUCER_MAX_BLOCK_MS = 10_000
"""How long a send may wait for the topic's metadata or buffer space (kafka-python's default,
60 s, stalled every batch for a minute when the events topic was missing; the outbox retries)."""


def acknowledged_producer(
    bootstrap: str,
    client_options: Mapping[str, Any] | None = None,
    what: str = "the producer",
    start_timeout_s: float = START_TIMEOUT_S,
) -> KafkaProducer:
    """The producer both sinks use: every replica acknowledges (acks=all), a few retries in
    order, not idempotent (below), and bounded waits for the brokers at start-up
    (:func:`start_within`, ``start_timeout_s``; ``what`` names it in the error) and for a
    topic's metadata."""
    return start_within(
        lambda: KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            retries=5,
            # kafka-python 3.0's idempotent producer (its default) never sends again after a
            # network partition longer than its delivery timeout: once the broker answers it
            # refreshes metadata but leaves every batch waiting (tests/faults/
            # test_kafka_partition.py). Duplicates are harmless here (every event has its
            # id, and the outbox is at-least-once anyway); order is kept by one request in
            # flight per connection, which costs little as each delivery waits for its acks
            # anyway (docs/benchmarks.md, "Production mode end to end": none measurable
            # without per-document events, ~10 % of the throughput with --emit-assignments).
            enable_idempotence=False,
            max_in_flight_requests_per_connection=1,
            bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
            max_block_ms=PRODUCER_MAX_BLOCK_MS,
            **(client_options or {}),
        ),
        what,
        start_timeout_s,
    )


def close_producer(producer: KafkaProducer, timeout_s: float) -> None:
    """Close, waiting up to ``timeout_s`` for unsent records; past that (a wedged producer,
    a silent broker) force it closed, dropping them (the caller keeps them: the outbox, or an
    uncommitted batch read again).

    kafka-python's ``close`` flushes first and raises when the flush times out, leaving the
    network thread running and the producer open, and its ``__del__`` raises the same at
    exit ("Exception ignored in KafkaProducer.__del__" with a traceback). The sender's
    ``force_close`` aborts the unsent batches; the second ``close`` then completes."""
    try:
        producer.close(timeout=timeout_s)
        return
    except KafkaError as exc:
        log.debug("closing a producer timed out (%r); forcing it closed", exc)
    sender = getattr(producer, "_sender", None)  # kafka-python has no public force-close
    if sender is not None:
        sender.force_close()
        sender.join(timeout_s)
    producer.close(timeout=0)
