"""Kafka source and sinks (kafka-python, DESIGN §7).

The source consumes in a consumer group with manual offsets: on assignment it seeks every
partition to the offset stored *with the model state* (not Kafka's committed one) and claims it
in the store (fencing older owners); Kafka offsets are committed after the state commit, for lag
tools only. Sinks: events keyed by cluster (assignment batches by input partition), dead letters
with provenance headers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from noveld.connectors.errors import BrokerSilent, DeadLettersFailed, DeliveryFailed
from noveld.connectors.jsonl import Record
from noveld.schema import (
    InvalidReason,
    SourcePosition,
    event_key,
    format_rfc3339,
    stored_json,
    trusted,
)

log = logging.getLogger("noveld.kafka")


class _Closable(Protocol):
    """A client :func:`start_within` can close if its constructor returns too late."""

    def close(self) -> None: ...


T = TypeVar("T", bound=_Closable)

BOOTSTRAP_TIMEOUT_MS = 10_000
"""How long a client's constructor waits for its first metadata (kafka-python's
``bootstrap_timeout_ms``; its default is 30 s)."""

START_TIMEOUT_S = BOOTSTRAP_TIMEOUT_MS / 1000 + 5
"""How long :func:`start_within` waits for a client's constructor. kafka-python bounds the
bootstrap itself, but not a TLS handshake: against a listener that accepts and never answers
(a plaintext port, a hung broker) an ``SSL`` client's constructor waited forever."""


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
    if not done.wait(timeout_s):
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


class KafkaSource:
    """Batches of records from a topic; remembers where each partition's next batch starts."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        stored_offset: Callable[[str], int],
        on_assign: Callable[[list[str]], None],
        on_revoke: Callable[[list[str]], None],
        session_timeout_ms: int = 10_000,
        max_poll_records: int = 500,
        client_options: Mapping[str, Any] | None = None,
        say: Callable[[str], None] | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        """``say``: where to report assignments and revocations (a line each, for the
        operator; None: not reported). ``start_timeout_s`` bounds the consumer's start."""
        self.topic = topic
        self._stored_offset = stored_offset
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._say = say
        self.expected: dict[str, int] = {}
        self.rebalances = 0  # assignment callbacks seen (a fenced consumer waits for one)
        self._ends: dict[TopicPartition, int] = {}
        self._ends_at = float("-inf")
        self.held: dict[TopicPartition, tuple[int, int]] = {}  # (stored offset, log end)
        self.unclaimed: list[TopicPartition] = []  # assigned while the store was down
        self.deferred: BaseException | None = None  # what the assignment callback could not do
        self._held_checked = float("-inf")
        self.lag_failing = False  # the last end-offsets request failed (said once)
        self.consumer = start_within(
            lambda: KafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=max(session_timeout_ms // 6, 100),
                max_poll_records=max_poll_records,
                bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                **(client_options or {}),
            ),
            "the input consumer",
            start_timeout_s,
        )
        self.consumer.subscribe([topic], listener=_Listener(self))

    def assigned(self, partitions: Sequence[TopicPartition]) -> None:
        """Claim the partitions and seek to the state's offsets. A store that cannot answer now
        (Redis down) must not raise here — an exception in a rebalance callback breaks
        kafka-python's poll, and the daemon with it — so the partitions wait, paused, and the
        error goes to the loop (:meth:`raise_deferred`); :meth:`resync` claims them once the
        store is back."""
        self.rebalances += 1
        try:
            self._claim(partitions)
        except Exception as exc:  # handed to the loop, which knows an outage from a bug
            self.unclaimed = sorted(set(self.unclaimed) | set(partitions))
            self.consumer.pause(*partitions)
            self.deferred = exc
        if partitions and self._say is not None:
            self._say(f"assigned partitions {describe_partitions(partitions)}")

    def _claim(self, partitions: Sequence[TopicPartition]) -> None:
        """Fence older owners of the partitions and seek each to its stored offset."""
        keys = [partition_name(tp.topic, tp.partition) for tp in partitions]
        self._on_assign(keys)
        for tp, key in zip(partitions, keys, strict=True):
            offset = self._stored_offset(key)
            self.consumer.seek(tp, offset)
            self.expected[key] = offset

    def raise_deferred(self) -> None:
        """Raise, in the caller's thread, what the last assignment callback could not do."""
        exc, self.deferred = self.deferred, None
        if exc is not None:
            raise exc

    def revoked(self, partitions: Sequence[TopicPartition]) -> None:
        """Forget partitions another member now owns."""
        keys = [partition_name(tp.topic, tp.partition) for tp in partitions]
        self.rebalances += 1
        self.unclaimed = [tp for tp in self.unclaimed if tp not in set(partitions)]
        for key in keys:
            self.expected.pop(key, None)
        held = [tp for tp in partitions if self.held.pop(tp, None) is not None]
        if held:  # kafka-python keeps a partition's paused flag if it is assigned again
            self.consumer.resume(*held)
        self._on_revoke(keys)
        if partitions and self._say is not None:
            self._say(f"revoked partitions {describe_partitions(partitions)}")

    def pause(self) -> None:
        """Stop fetching from every assigned partition (polls keep the group membership)."""
        parts = list(self.consumer.assignment())
        if parts:
            self.consumer.pause(*parts)

    def resume(self) -> None:
        """Fetch again from every assigned partition (but those :meth:`hold` keeps, and those
        not claimed yet)."""
        waiting = set(self.held) | set(self.unclaimed)
        parts = [tp for tp in self.consumer.paused() if tp not in waiting]
        if parts:
            self.consumer.resume(*parts)

    def poll_idle(self, timeout_ms: int) -> None:
        """Poll while paused: heartbeats and rebalances go on, no records are returned."""
        self.consumer.poll(timeout_ms=timeout_ms, max_records=1)

    def await_rebalance(self, timeout_s: float, turn: Callable[[], None] | None = None) -> bool:
        """Consume nothing until the group's next rebalance reaches this member (True) or
        ``timeout_s`` passes (False).

        A member whose commit was fenced lost a partition to another replica but may not know
        it yet (e.g. it was paused past its session timeout): it would fetch the lost partition
        again and be refused again. Polling while paused keeps heartbeats going, which is how the
        rejoin (and the assignment callback) arrives."""
        seen = self.rebalances
        self.pause()
        deadline = time.monotonic() + timeout_s
        try:
            while self.rebalances == seen and time.monotonic() < deadline:
                self.poll_idle(200)
                if turn is not None:
                    turn()
        finally:
            self.resume()
        return self.rebalances != seen

    def resync(self) -> None:
        """Claim the partitions an assignment could not claim (the store was down), then seek
        every assigned partition back to the offset stored with the state (after an outage or
        a refused commit: the batches read since are redone from there)."""
        claimed: list[TopicPartition] = []
        if self.unclaimed:
            owned = self.consumer.assignment()
            claimed = [tp for tp in self.unclaimed if tp in owned]
            self._claim(claimed)  # seeks them; raises while the store is still down (retried)
            self.unclaimed, self.deferred = [], None
            ready = [tp for tp in claimed if tp not in self.held]
            if ready:
                self.consumer.resume(*ready)
        for tp in set(self.consumer.assignment()) - set(claimed):
            key = partition_name(tp.topic, tp.partition)
            offset = self._stored_offset(key)
            self.consumer.seek(tp, offset)
            self.expected[key] = offset

    def read_batch(self, max_docs: int, max_wait_ms: int) -> list[Record]:
        """Up to ``max_docs`` records (possibly none) within ``max_wait_ms``. Partitions whose
        stored offset is past the log end are held, not read (:meth:`check_ends`)."""
        polled = self.consumer.poll(timeout_ms=max_wait_ms, max_records=max_docs)
        out: list[Record] = []
        behind: list[TopicPartition] = []
        for tp, msgs in polled.items():
            key = partition_name(tp.topic, tp.partition)
            if msgs and key in self.expected and msgs[0].offset < self.expected[key]:
                # records before the state's offset: the broker answered "out of range" and
                # the consumer reset to the log start (auto_offset_reset) — already counted
                behind.append(tp)
                continue
            for msg in msgs:
                ts = (
                    format_rfc3339(msg.timestamp / 1000)
                    if msg.timestamp and msg.timestamp > 0
                    else None
                )
                pos = trusted(
                    SourcePosition,
                    {"topic": tp.topic, "partition": tp.partition, "offset": msg.offset, "ts": ts},
                )
                out.append(Record(msg.value if msg.value is not None else b"", pos))
        self.check_ends(behind)
        return out

    def check_ends(self, behind: Sequence[TopicPartition] = ()) -> None:
        """Hold partitions whose stored offset is past the end of their log (the topic was
        deleted and re-created, or the broker lost records): reading them would count the new
        log's records against offsets already committed (a real broker resets the consumer to
        the log start: everything counted again), or wait silently forever (a broker that
        answers an offset past the end with no records). Evidence: records before the stored
        offset (``behind``), or a fetch's high watermark below it, confirmed by the broker's
        end offset. A held partition is paused, said once, and checked again every
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
        recheck = bool(self.held) and time.monotonic() - self._held_checked >= HELD_RECHECK_S
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
                self._held_checked = time.monotonic()
                if end >= 0:
                    self._recheck(tp, key, end)
            elif tp in behind or (tp in ends and end < self.expected[key]):
                self.hold(tp, key, end)

    def hold(self, tp: TopicPartition, key: str, end: int) -> None:
        """Stop reading a partition whose stored offset is past its log end, and say so."""
        stored = self.expected[key]
        self.consumer.pause(tp)
        self.held[tp] = (stored, end)
        self._held_checked = time.monotonic()
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

    def offsets_of(self, records: Sequence[Record]) -> tuple[dict[str, int], dict[str, int]]:
        """(first, next) offsets of a batch per partition; first is where the last batch ended
        (or the seek), so gaps in Kafka offsets (compaction, transactions) are harmless."""
        nxt: dict[str, int] = {}
        for r in records:
            key = partition_name(r.position.topic, r.position.partition)
            nxt[key] = max(nxt.get(key, 0), r.position.offset + 1)
        first = {k: self.expected.get(k, 0) for k in nxt}
        return first, nxt

    def advance(self, nxt: dict[str, int]) -> None:
        """After a state commit: remember the next offsets and commit them to Kafka (advisory)."""
        self.expected.update(nxt)
        offsets = {}
        for key, off in nxt.items():
            topic, part = key.rsplit(":", 1)
            offsets[TopicPartition(topic, int(part))] = OffsetAndMetadata(off, "", -1)
        try:
            # asynchronous: the state store holds the real offsets, so no round trip per batch
            self.consumer.commit_async(offsets, callback=_log_commit_failure)
        except Exception as exc:  # advisory only: the state store holds the real offsets
            log.warning("Kafka offset commit failed (state is safe): %s", exc)

    def missing_topics(self, topics: Sequence[str]) -> list[str]:
        """Those of ``topics`` the cluster does not have (one metadata request for all topics,
        which creates none even where the brokers auto-create topics)."""
        existing = self.consumer.topics()
        return [t for t in topics if t not in existing]

    def lag(self, refresh_s: float = 5.0) -> dict[str, int]:
        """Messages behind the end of each assigned partition; the end offsets are fetched from
        the broker at most every ``refresh_s`` seconds (a round trip each)."""
        parts = list(self.consumer.assignment())
        if not parts:
            return {}
        now = time.monotonic()
        if now - self._ends_at >= refresh_s or any(tp not in self._ends for tp in parts):
            self._ends = self.consumer.end_offsets(parts)
            self._ends_at = now
        ends = self._ends
        return {
            partition_name(tp.topic, tp.partition): max(
                ends[tp] - self.expected.get(partition_name(tp.topic, tp.partition), 0), 0
            )
            for tp in parts
        }

    def close(self) -> None:
        """Commit the last advisory offsets synchronously and leave the group."""
        if self.expected:
            offsets = {
                TopicPartition(k.rsplit(":", 1)[0], int(k.rsplit(":", 1)[1])): OffsetAndMetadata(
                    off, "", -1
                )
                for k, off in self.expected.items()
            }
            try:
                self.consumer.commit(offsets)
            except Exception as exc:  # advisory only
                log.warning("final Kafka offset commit failed (state is safe): %s", exc)
        self.consumer.close()


HELD_RECHECK_S = 5.0
"""How often a held partition's stored offset and log end are read again (a round trip to the
broker and one to the store each time)."""


def _log_commit_failure(offsets: Any, response: Any) -> None:
    """commit_async callback: a failed advisory commit is only worth a warning."""
    if isinstance(response, Exception):
        log.warning("Kafka offset commit failed (state is safe): %s", response)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, source: KafkaSource) -> None:
        self.source = source

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        self.source.revoked(revoked)

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        self.source.assigned(assigned)


PRODUCER_MAX_BLOCK_MS = 10_000
"""How long a send may wait for the topic's metadata or buffer space (kafka-python's default,
60 s, stalled every batch for a minute when the events topic was missing; the outbox retries)."""


def acknowledged_producer(
    bootstrap: str,
    client_options: Mapping[str, Any] | None = None,
    what: str = "the producer",
    start_timeout_s: float = START_TIMEOUT_S,
) -> KafkaProducer:
    """The producer both sinks use: every replica acknowledges (acks=all), a few retries, and
    bounded waits for the brokers at start-up (:func:`start_within`, ``start_timeout_s``;
    ``what`` names it in the error) and for a topic's metadata."""
    return start_within(
        lambda: KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            retries=5,
            bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
            max_block_ms=PRODUCER_MAX_BLOCK_MS,
            **(client_options or {}),
        ),
        what,
        start_timeout_s,
    )


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
        the broker does not take them now (the pipeline keeps them in the outbox)."""
        try:
            futures = [
                self.producer.send(
                    self.topic,
                    key=event_key(e).encode(),
                    value=stored_json(e).encode(),
                )
                for e in events
            ]
            self.producer.flush(timeout=30)
            for f in futures:
                f.get(timeout=30)
        except KafkaError as exc:
            raise DeliveryFailed(f"events topic {self.topic}: {exc}") from exc

    def close(self) -> None:
        """Flush and close (events not taken stay in the outbox)."""
        self.producer.close(timeout=PRODUCER_MAX_BLOCK_MS / 1000)


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
        """Queue one dead letter (delivered by :meth:`flush`)."""
        pos = record.position
        headers = [
            ("error", str(reason).encode()),
            ("detail", detail.encode()[:1000]),
            ("source_topic", pos.topic.encode()),
            ("source_partition", str(pos.partition).encode()),
            ("source_offset", str(pos.offset).encode()),
        ]
        value = record.raw
        if len(value) > self.max_value_bytes:  # an oversize record must not be too big to park
            headers.append(("truncated_from", str(len(value)).encode()))
            value = value[: self.max_value_bytes]
        try:
            self._sent.append(self.producer.send(self.topic, value=value, headers=headers))
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
        self.producer.close(timeout=PRODUCER_MAX_BLOCK_MS / 1000)
