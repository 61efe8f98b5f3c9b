"""Kafka source (kafka-python).

It consumes in a consumer group with manual offsets: on assignment it seeks every partition to
the offset stored *with the model state* (not Kafka's committed one) and claims it in the store
(fencing older owners); Kafka offsets are committed after the state commit, for lag tools only.
A partition whose stored offset is past the log end is held, not read
(:mod:`noveld.connectors.kafka_past_end`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from noveld.connectors.kafka_client import (
    BOOTSTRAP_TIMEOUT_MS,
    START_TIMEOUT_S,
    describe_partitions,
    partition_name,
    start_within,
)
from noveld.connectors.kafka_past_end import PastEndHolds
from noveld.connectors.source import Positions, Record
from noveld.schema import SourcePosition, format_rfc3339

log = logging.getLogger("noveld.kafka")


def batch_share(max_docs: int, held: int, partitions: int) -> int:
    """A replica's batch: ``max_docs`` times its share of the topic's partitions, rounded up
    (all of it when it holds every partition or none yet — the poll that joins the group — or
    the topic's size is unknown). Replicas exchange deltas once per batch, so N replicas each
    seating a whole batch would seat N batches of the stream blind to one another's; their
    shares seat about one."""
    if partitions <= 0 or held <= 0 or held >= partitions:
        return max_docs
    return max(1, -(-max_docs * held // partitions))


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
        share_batches: bool = True,
        fetch_max_wait_ms: int = 100,
    ) -> None:
        """``say``: where to report assignments and revocations (a line each, for the
        operator; None: not reported). ``start_timeout_s`` bounds the consumer's start.
        ``share_batches``: a batch is ``max_docs`` times the share of the topic's partitions
        this consumer holds (:func:`batch_share`). ``fetch_max_wait_ms``: the consumer's
        longest wait at the broker for records."""
        self.topic = topic
        self.share_batches = share_batches
        self._topic_size = (-1, 0)  # (rebalances when counted, the topic's partitions)
        self._stored_offset = stored_offset
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._say = say
        self.expected: dict[str, int] = {}
        self.rebalances = 0  # assignment callbacks seen (a fenced consumer waits for one)
        self._ends: dict[TopicPartition, int] = {}
        self._ends_at = float("-inf")
        self.unclaimed: list[TopicPartition] = []  # assigned while the store was down
        self.deferred: BaseException | None = None  # what the assignment callback could not do
        self.lag_failing = False  # the last end-offsets request failed (set by :meth:`lag`)
        self.consumer = start_within(
            lambda: KafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=max(session_timeout_ms // 6, 100),
                max_poll_records=max_poll_records,
                fetch_max_wait_ms=fetch_max_wait_ms,
                bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                **(client_options or {}),
            ),
            "the input consumer",
            start_timeout_s,
        )
        self.holds = PastEndHolds(self.consumer, self.expected, stored_offset)
        self.consumer.subscribe([topic], listener=_Listener(self))

    @property
    def held(self) -> dict[TopicPartition, tuple[int, int]]:
        """Partitions not read because their stored offset is past the log end: (stored
        offset, log end) each (:class:`~noveld.connectors.kafka_past_end.PastEndHolds`)."""
        return self.holds.held

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
        self.holds.release(partitions)
        self._on_revoke(keys)
        if partitions and self._say is not None:
            self._say(f"revoked partitions {describe_partitions(partitions)}")

    def pause(self) -> None:
        """Stop fetching from every assigned partition (polls keep the group membership)."""
        parts = list(self.consumer.assignment())
        if parts:
            self.consumer.pause(*parts)

    def resume(self) -> None:
        """Fetch again from every assigned partition (but those held past their log end, and
        those not claimed yet)."""
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
        stored offset is past the log end are held, not read (:class:`PastEndHolds`)."""
        polled = self.consumer.poll(timeout_ms=max_wait_ms, max_records=self.batch_limit(max_docs))
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
                pos = SourcePosition.at(tp.topic, tp.partition, msg.offset, ts)
                value = msg.value if msg.value is not None else b""
                headers = tuple((str(k), bytes(v or b"")) for k, v in msg.headers or ())
                out.append(Record(value, pos, msg.key, headers))
        self.holds.check(behind)
        return out

    def batch_limit(self, max_docs: int) -> int:
        """Records the next batch may hold: ``max_docs``, or this consumer's share of it
        (:func:`batch_share`; the topic's size is asked again after each rebalance)."""
        if not self.share_batches:
            return max_docs
        if self._topic_size[0] != self.rebalances:
            try:
                parts = self.consumer.partitions_for_topic(self.topic)
            except KafkaError:
                parts = None
            if not parts:
                return max_docs  # the topic's metadata is not known yet: asked again next batch
            self._topic_size = (self.rebalances, len(parts))
        return batch_share(max_docs, len(self.consumer.assignment()), self._topic_size[1])

    def group_progress(self, timeout_ms: int = 10_000) -> dict[str, int] | None:
        """What this consumer group has read of the input topic: its committed offsets (the
        daemon commits them after each state commit) that are above 0, per partition; None if
        the broker would not say (the caller then cannot tell)."""
        try:
            parts = sorted(self.consumer.partitions_for_topic(self.topic) or ())
            read = {
                partition_name(self.topic, p): self.consumer.committed(
                    TopicPartition(self.topic, p), timeout_ms=timeout_ms
                )
                for p in parts
            }
        except KafkaError as exc:
            log.warning("cannot read consumer group offsets of %s: %s", self.topic, exc)
            return None
        return {key: int(off) for key, off in read.items() if off}

    def positions(self, records: Sequence[Record]) -> tuple[Positions, Positions]:
        """(first, next) offsets of a batch per partition; first is where the last batch ended
        (or the seek), so gaps in Kafka offsets (compaction, transactions) are harmless."""
        nxt: dict[str, int] = {}
        for r in records:
            key = partition_name(r.position.topic, r.position.partition)
            nxt[key] = max(nxt.get(key, 0), r.position.offset + 1)
        first = {k: self.expected.get(k, 0) for k in nxt}
        return first, nxt

    offsets_of = positions

    def acknowledge(self, nxt: Mapping[str, int]) -> None:
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
        the broker at most every ``refresh_s`` seconds (a round trip each; ``lag_failing``
        says whether the last one was answered)."""
        parts = list(self.consumer.assignment())
        if not parts:
            return {}
        now = time.monotonic()
        if now - self._ends_at >= refresh_s or any(tp not in self._ends for tp in parts):
            self._ends_at = now  # a broker that does not answer is asked again in refresh_s
            try:
                self._ends = self.consumer.end_offsets(parts, timeout_ms=BROKER_WAIT_MS)
            except Exception:
                self.lag_failing = True
                raise
            self.lag_failing = False
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
                self.consumer.commit(offsets, timeout_ms=BROKER_WAIT_MS)
            except Exception as exc:  # advisory only
                log.warning("final Kafka offset commit failed (state is safe): %s", exc)
        self.consumer.close()


BROKER_WAIT_MS = 5000
"""Longest wait for the broker's answer on the lag's end offsets and the final advisory offset
commit (kafka-python's default, 30 s, stalled the batch loop and shutdown in a Kafka outage)."""


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
