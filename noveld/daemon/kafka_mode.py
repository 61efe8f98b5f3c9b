"""Production mode: documents from a Kafka topic, state in Redis, events and dead letters on
Kafka topics. The same loop and Pipeline as a file run; only the I/O and the hooks differ."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from typing import IO

import redis

from noveld.connectors.errors import DeadLettersFailed, kafka_unreachable
from noveld.connectors.kafka_sinks import KafkaDeadLetters, KafkaEvents
from noveld.connectors.kafka_source import KafkaSource
from noveld.connectors.source import Record
from noveld.daemon.errors import UserError
from noveld.daemon.exits import EXIT_OK, EXIT_STATE_DIVERGED
from noveld.daemon.kafka_health import is_ready, refresh_lag, unready
from noveld.daemon.kafka_lease import lease_lost, lease_taken_over, stand_by
from noveld.daemon.lease import WriterLease
from noveld.daemon.metrics import Metrics
from noveld.daemon.outage import Backoff, is_outage, outage_reason
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.progress import Progress
from noveld.daemon.redis_wait import refuse_emptied, wait_for_redis
from noveld.daemon.reporter import Reporter
from noveld.daemon.runner import Loop, LoopHooks, Resumed, run
from noveld.daemon.settings import Settings
from noveld.daemon.startup import Servers, default_store, say_persistence_risk, start_metrics
from noveld.models.hdp import live_clusters
from noveld.state.base import CommitOutcome, FingerprintMismatch
from noveld.state.redis.reasons import StoreConflict
from noveld.state.redis.store import RedisStore

log = logging.getLogger("noveld.kafka_mode")


def refuse_unwitnessed_start(
    pipeline: Pipeline, store: RedisStore, source: KafkaSource, settings: Settings
) -> None:
    """Refuse (StoreConflict, exit 6) a namespace without offsets for the input topic whose
    consumer group has read it before: its state was lost, and under a supervisor that
    restarts the daemon the loss would otherwise go unnoticed (``kafka.accept_empty_state``
    overrides)."""
    k = settings.kafka
    topic = f"{k.input_topic}:"
    if k.accept_empty_state or any(key.startswith(topic) for key in pipeline.state.offsets):
        return
    read = source.group_progress()
    if read:
        raise store.unwitnessed(k.group, read)


# After this many refused commits in a row without a rebalance in between, stop (exit 4)
MAX_REFUSED_IN_A_ROW = 5
# After a refused commit, wait up to the session timeout plus this for the group to rebalance
REBALANCE_GRACE_S = 5.0


class KafkaHooks(LoopHooks):
    """The Kafka daemon's part of the loop (:mod:`noveld.daemon.runner`): readiness and lag,
    the svi writer lease, refused commits (a rebalance, a compaction elsewhere) and riding
    out a Redis outage while keeping the group membership."""

    def __init__(
        self,
        settings: Settings,
        source: KafkaSource,
        pipeline: Pipeline,
        store: RedisStore,
        events: KafkaEvents,
        dead: KafkaDeadLetters,
        lease: WriterLease | None,
        metrics: Metrics | None,
        server: Servers | None,
        report: Reporter,
    ) -> None:
        self.settings = settings
        self.source = source
        self.pipeline = pipeline
        self.store = store
        self.events = events
        self.dead = dead
        self.lease = lease
        self.metrics = metrics
        self.server = server
        self.report = report
        self.refused_in_a_row = 0

    def after_read(self) -> int:
        """Claim partitions assigned while Redis was down (an outage raises), turn, say
        whether ready, and stop once another writer took the svi lease over."""
        source, metrics = self.source, self.metrics
        source.raise_deferred()  # a partition assigned while Redis was down
        if metrics is not None:
            metrics.turn()
            metrics.set_ready(is_ready(source), unready(source))
        if self.lease is not None and self.lease.lost_to is not None:
            return lease_lost(self.lease, self.report)
        return EXIT_OK

    def idle(self) -> bool:
        """Deliver events held back meanwhile; the outbox and the backlog still show."""
        pending = self.pipeline.retry_pending()
        if self.metrics is not None:
            self.metrics.set_outbox(
                pending, self.pipeline.held_for_replicas, self.pipeline.refused_events
            )
            refresh_lag(self.metrics, self.source)  # idle or stuck: the backlog still shows
        return False

    def rides_out(self, exc: Exception) -> bool:
        """A Redis outage is waited out."""
        return is_outage(exc)

    def ride_out(
        self, exc: Exception, records: list[Record], stop: threading.Event, backoff: Backoff
    ) -> Resumed:
        """Redis went away mid-batch: go unready, pause consumption (polls keep the group
        membership and /healthz turning), retry with capped backoff, then reload the state from
        Redis and re-seek to its offsets. Whether or not the interrupted commit landed — and
        even if Redis lost its last ~second of AOF — the stored offsets say where to resume, so
        nothing is lost and nothing counted twice."""
        source, metrics, store = self.source, self.metrics, self.store
        source.pause()
        refuse = refuse_emptied(self.pipeline, store)

        def resync() -> None:
            refuse()
            source.resync()

        def poll(seconds: float) -> None:
            source.poll_idle(int(seconds * 1000))
            if metrics is not None:
                refresh_lag(metrics, source)  # the backlog grows while Redis is away: show it

        lost = wait_for_redis(
            exc,
            self.pipeline,
            store,
            metrics,
            stop,
            self.report.out,
            idle=poll,
            resync=resync,
            backoff=backoff,
        )
        source.resume()
        if lost:
            self.report.say(
                f"Redis had lost this replica's claim on {', '.join(lost)} (a failover); "
                "claimed again"
            )
        if not stop.is_set():
            self.report.say("Redis is back; state reloaded, input resumed")
        return Resumed()

    def after_step(self, code: int, stop: threading.Event, backoff: Backoff) -> int | None:
        """A refused commit: stop if another writer took the svi lease over; else drop the
        batch, reload the shared state and read on (None), up to
        :data:`MAX_REFUSED_IN_A_ROW` refusals without a rebalance."""
        pipeline, source, metrics = self.pipeline, self.source, self.metrics
        if code == EXIT_STATE_DIVERGED and self.lease is not None and lease_taken_over(self.lease):
            return lease_lost(self.lease, self.report)
        stale = code == EXIT_STATE_DIVERGED and pipeline.refusal is CommitOutcome.STALE
        if not (
            stale or (code == EXIT_STATE_DIVERGED and self.refused_in_a_row < MAX_REFUSED_IN_A_ROW)
        ):
            return code
        # fenced (another replica owns a partition now) or already committed by one: drop the
        # in-memory batch, reload the shared state and go on; the group rebalance that caused
        # it reaches this consumer at its next poll. Stale (another replica compacted the
        # vocabulary): nobody else owns the input, so no rebalance comes: read the refused
        # batch again at once.
        self.refused_in_a_row += 0 if stale else 1
        rebalanced = False
        try:
            pipeline.reload()
            if not stale:
                if metrics is not None:
                    metrics.set_ready(False, "state reloaded after a refused commit; waiting "
                                      "for the group to rebalance")  # fmt: skip
                # until the rebalance that fenced us arrives, our assignment is stale:
                # reading on would only be refused again
                rebalanced = source.await_rebalance(
                    self.settings.kafka.session_timeout_ms / 1000 + REBALANCE_GRACE_S,
                    metrics.turn if metrics is not None else None,
                )
            source.resync()
        except Exception as exc:  # Redis went away meanwhile: wait it out
            if not is_outage(exc):
                raise
            self.ride_out(exc, [], stop, backoff)
            rebalanced = False
        if rebalanced:
            self.refused_in_a_row = 0
        progress_out = self.report.out
        if progress_out is not None:
            progress_out.write(
                f"noveld: {pipeline.lease_refusal}; reloaded the shared state and "
                "reading on from the stored offsets\n"
                if stale and pipeline.lease_refusal
                else "noveld: another replica compacted the vocabulary; reloaded the "
                "shared state and reading on from the stored offsets\n"
                if stale
                else "noveld: reloaded the shared state; continuing with the "
                "partitions the group assigns\n"
            )
        return None

    def committed(self) -> None:
        """A batch committed: reset the refusal count, export the lag."""
        self.refused_in_a_row = 0
        if self.metrics is not None:
            refresh_lag(self.metrics, self.source)

    def shut_down(self, code: int) -> int:
        """Flush (the state is as of the last commit that landed if Redis is away), release
        the lease, then close the clients; a wedged client must not skip the rest."""
        try:
            self.pipeline.flush()
        except Exception as exc:
            if not is_outage(exc):
                raise
            self.report.say(f"Redis unreachable at shutdown ({exc})")
        if self.lease is not None:  # after the last commit: a standby takes over at once
            self.lease.release()
        with contextlib.suppress(DeadLettersFailed):  # said; the batch was not committed
            self.dead.flush()
        for what, close in (
            ("the consumer", self.source.close),
            ("the events producer", self.events.close),
            ("the dead-letter producer", self.dead.close),
        ):
            try:
                close()
            except Exception as exc:  # a wedged client must not skip the rest, nor trace
                log.warning("closing %s failed (the state is safe): %r", what, exc)
        if self.server is not None:
            self.server.stop()
        return code


def run_kafka(
    settings: Settings, progress_out: IO[str] | None = sys.stderr
) -> tuple[int, Progress]:
    """Consume until SIGINT/SIGTERM (or the circuit breaker), committing every batch."""
    k = settings.kafka
    if not k.input_topic:
        raise UserError("Kafka mode needs --input-topic (or NOVELD_KAFKA__INPUT_TOPIC)")
    if settings.redis.url is None:
        raise UserError(
            "Kafka mode keeps its state in Redis: give --redis-url (or NOVELD_REDIS__URL)"
        )
    report = Reporter(progress_out)
    store = default_store(settings)
    assert isinstance(store, RedisStore)
    say_persistence_risk(store, progress_out)
    bootstrap = str(k.bootstrap_servers)
    client = k.client_options()
    try:
        events = KafkaEvents(bootstrap, k.events_topic, client, k.startup_timeout_s)
        dead = KafkaDeadLetters(
            bootstrap, k.dlq_topic, client, settings.limits.max_doc_bytes + 1, k.startup_timeout_s
        )
    except Exception as exc:  # kafka-python raises NoBrokersAvailable and friends
        raise UserError(kafka_unreachable(bootstrap, k.security_protocol, exc)) from exc
    try:
        pipeline = Pipeline(settings, store, events, dead)
    except FingerprintMismatch as exc:
        raise UserError(str(exc)) from exc
    except redis.RedisError as exc:
        raise UserError(f"cannot start: {outage_reason(exc)}") from exc
    metrics, server = start_metrics(settings, pipeline)
    if metrics is not None:  # ready once the group assigns partitions (the loop says so)
        metrics.set_ready(False, "starting: joining the consumer group")
    lease = (
        WriterLease(store, settings.redis.writer_lease_ms) if settings.model.kind == "svi" else None
    )

    def close_clients() -> None:
        events.close()
        dead.close()
        if lease is not None:
            lease.release()
        if server is not None:
            server.stop()

    try:
        if lease is not None and not stand_by(lease, pipeline, metrics, report):
            close_clients()  # stopped while standing by: nothing was read
            idle = Progress(progress_out, settings.progress_interval_s)
            idle.stopped = True
            return EXIT_OK, idle
    except BaseException:
        close_clients()
        raise
    try:
        source = KafkaSource(
            bootstrap,
            k.input_topic,
            k.group,
            store.stored_offset,
            store.claim_keys,
            store.release,
            session_timeout_ms=k.session_timeout_ms,
            max_poll_records=settings.batch.max_docs,
            client_options=client,
            say=None if report.silent else report.say_now,
            start_timeout_s=k.startup_timeout_s,
            share_batches=settings.batch.share,
            fetch_max_wait_ms=k.fetch_max_wait_ms,
        )
    except Exception as exc:  # as for the producers above
        close_clients()
        raise UserError(kafka_unreachable(bootstrap, k.security_protocol, exc)) from exc
    missing = source.missing_topics([k.input_topic, k.events_topic, k.dlq_topic])
    if missing:
        source.close()
        close_clients()
        raise UserError(
            f"topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found on the "
            f"cluster at {bootstrap}; noveld creates no topics: create "
            f'{"them" if len(missing) > 1 else "it"} (docs/deployment.md, "Topics") and start '
            "again"
        )
    try:
        refuse_unwitnessed_start(pipeline, store, source, settings)
    except StoreConflict:
        source.close()
        close_clients()
        raise
    progress = Progress(progress_out, settings.progress_interval_s)
    progress.clusters = live_clusters(pipeline.state.stats)  # said "0" until the first batch
    if metrics is not None:
        metrics.set_ready(False, unready(source))
    hooks = KafkaHooks(settings, source, pipeline, store, events, dead, lease, metrics, server,
                       report)  # fmt: skip
    loop = Loop(
        pipeline,
        source,
        progress,
        report,
        metrics,
        settings.batch.max_docs,
        settings.batch.max_wait_ms,
        f"The last invalid records are on topic {k.dlq_topic}; fix the producer, then run "
        "again to resume.",
        reloads_stale=True,
    )
    return run(loop, hooks), progress
