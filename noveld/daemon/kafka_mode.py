"""Production mode: documents from a Kafka topic, state in Redis, events and dead letters on
Kafka topics (DESIGN §3). Same Pipeline as the embedded default; only the I/O differs."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable
from typing import IO

import redis

from noveld.connectors.errors import DeadLettersFailed, kafka_unreachable
from noveld.connectors.kafka_sinks import KafkaDeadLetters, KafkaEvents
from noveld.connectors.kafka_source import KafkaSource
from noveld.daemon.errors import UserError
from noveld.daemon.exits import EXIT_OK, EXIT_STATE_DIVERGED
from noveld.daemon.lease import WriterLease
from noveld.daemon.metrics import Metrics
from noveld.daemon.outage import Backoff, is_outage, outage_reason
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.progress import Progress
from noveld.daemon.redis_wait import refuse_emptied, wait_for_redis
from noveld.daemon.settings import Settings
from noveld.daemon.signals import graceful_stop
from noveld.daemon.startup import default_store, say_persistence_risk, start_metrics
from noveld.daemon.stepping import step_or_stop
from noveld.models.hdp import live_clusters
from noveld.state.base import CommitOutcome, FingerprintMismatch
from noveld.state.redis_store import RedisStore, StoreConflict

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


def say_to(out: IO[str]) -> Callable[[str], None]:
    """A line-writer in the daemon's stderr style (``noveld: …``), flushed at once: the
    consumer's rebalance callbacks call it from kafka-python's network thread."""

    def say(line: str) -> None:
        out.write(f"noveld: {line}\n")
        out.flush()

    return say


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


def ride_out_outage(
    exc: BaseException,
    pipeline: Pipeline,
    store: RedisStore,
    source: KafkaSource,
    metrics: Metrics | None,
    stop: threading.Event,
    progress_out: IO[str] | None,
    backoff: Backoff,
) -> None:
    """Redis went away mid-batch (G4): go unready, pause consumption (polls keep the group
    membership and /healthz turning), retry with capped backoff, then reload the state from
    Redis and re-seek to its offsets. Whether or not the interrupted commit landed — and even
    if Redis lost its last ~second of AOF — the stored offsets say where to resume, so nothing
    is lost and nothing counted twice."""
    source.pause()
    refuse = refuse_emptied(pipeline, store)

    def resync() -> None:
        refuse()
        source.resync()

    def poll(seconds: float) -> None:
        source.poll_idle(int(seconds * 1000))
        if metrics is not None:
            refresh_lag(metrics, source)  # the backlog grows while Redis is away: show it

    lost = wait_for_redis(
        exc,
        pipeline,
        store,
        metrics,
        stop,
        progress_out,
        idle=poll,
        resync=resync,
        backoff=backoff,
    )
    source.resume()
    if lost and progress_out is not None:
        progress_out.write(
            f"noveld: Redis had lost this replica's claim on {', '.join(lost)} (a failover); "
            "claimed again\n"
        )
    if progress_out is not None and not stop.is_set():
        progress_out.write("noveld: Redis is back; state reloaded, input resumed\n")


def stand_by(
    lease: WriterLease, pipeline: Pipeline, metrics: Metrics | None, progress_out: IO[str] | None
) -> bool:
    """svi: wait (unready, outside the consumer group) until this replica holds the namespace's
    writer lease, then reload the state its predecessor stepped meanwhile and keep the lease
    renewed. False when stopped while waiting."""

    def unready(reason: str) -> None:
        if metrics is not None:
            metrics.set_ready(False, reason)

    with graceful_stop() as stop:
        took = lease.wait(
            stop,
            say_to(progress_out) if progress_out is not None else lambda _line: None,
            unready,
            metrics.turn if metrics is not None else lambda: None,
        )
    if not took:
        return False
    if lease.hold():  # the predecessor stepped the model since this replica loaded it
        pipeline.reload()
    return True


def lease_taken_over(lease: WriterLease) -> bool:
    """After a refused commit: whether the refusal was another writer holding the lease."""
    try:
        return not lease.confirm()
    except Exception as exc:  # Redis away: the usual refusal handling rides it out
        if not is_outage(exc):
            raise
    return False


def lease_lost(lease: WriterLease, progress_out: IO[str] | None) -> int:
    """Say that another writer took the lease over; the exit code (the in-memory model may
    hold a step the store refused, and one writer steps the model)."""
    if progress_out is not None:
        progress_out.write(f"noveld: error: {lease.lost_message()}\n")
    return EXIT_STATE_DIVERGED


# After this many refused commits in a row without a rebalance in between, stop (exit 4)
MAX_REFUSED_IN_A_ROW = 5
# After a refused commit, wait up to the session timeout plus this for the group to rebalance
REBALANCE_GRACE_S = 5.0


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
        if lease is not None and not stand_by(lease, pipeline, metrics, progress_out):
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
            say=None if progress_out is None else say_to(progress_out),
            start_timeout_s=k.startup_timeout_s,
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
    code = EXIT_OK
    refused_in_a_row = 0
    backoff = Backoff()  # across outages, until a commit lands: a flapping Redis
    with graceful_stop() as stop:
        try:
            while not stop.is_set():
                records = source.read_batch(settings.batch.max_docs, settings.batch.max_wait_ms)
                try:
                    source.raise_deferred()  # a partition assigned while Redis was down
                except Exception as exc:
                    if not is_outage(exc):
                        raise
                    ride_out_outage(
                        exc, pipeline, store, source, metrics, stop, progress_out, backoff
                    )
                    continue
                if metrics is not None:
                    metrics.turn()
                    metrics.set_ready(is_ready(source), unready(source))
                if lease is not None and lease.lost_to is not None:
                    code = lease_lost(lease, progress_out)
                    break
                if not records:
                    try:
                        pending = pipeline.retry_pending()
                    except Exception as exc:
                        if not is_outage(exc):
                            raise
                        ride_out_outage(
                            exc, pipeline, store, source, metrics, stop, progress_out, backoff
                        )
                        continue
                    if metrics is not None:
                        metrics.set_outbox(
                            pending, pipeline.held_for_replicas, pipeline.refused_events
                        )
                        refresh_lag(metrics, source)  # idle or stuck: the backlog still shows
                    continue
                first, nxt = source.positions(records)
                try:
                    code = step_or_stop(
                        pipeline,
                        records,
                        first,
                        nxt,
                        progress,
                        progress_out,
                        f"The last invalid records are on topic {k.dlq_topic}; fix the "
                        "producer, then run again to resume.",
                        metrics,
                        reloads_stale=True,
                    )
                except Exception as exc:
                    if not is_outage(exc):
                        raise
                    ride_out_outage(
                        exc, pipeline, store, source, metrics, stop, progress_out, backoff
                    )
                    continue
                backoff.reset()
                if code == EXIT_STATE_DIVERGED and lease is not None and lease_taken_over(lease):
                    code = lease_lost(lease, progress_out)
                    break
                stale = code == EXIT_STATE_DIVERGED and pipeline.refusal is CommitOutcome.STALE
                if stale or (
                    code == EXIT_STATE_DIVERGED and refused_in_a_row < MAX_REFUSED_IN_A_ROW
                ):
                    # fenced (another replica owns a partition now) or already committed by
                    # one: drop the in-memory batch, reload the shared state and go on; the
                    # group rebalance that caused it reaches this consumer at its next poll.
                    # Stale (another replica compacted the vocabulary): nobody else owns the
                    # input, so no rebalance comes: read the refused batch again at once.
                    refused_in_a_row += 0 if stale else 1
                    rebalanced = False
                    try:
                        pipeline.reload()
                        if not stale:
                            if metrics is not None:
                                metrics.set_ready(False, "state reloaded after a refused "
                                                  "commit; waiting for the group to "
                                                  "rebalance")  # fmt: skip
                            # until the rebalance that fenced us arrives, our assignment is
                            # stale: reading on would only be refused again
                            rebalanced = source.await_rebalance(
                                k.session_timeout_ms / 1000 + REBALANCE_GRACE_S,
                                metrics.turn if metrics is not None else None,
                            )
                        source.resync()
                    except Exception as exc:  # Redis went away meanwhile: wait it out
                        if not is_outage(exc):
                            raise
                        ride_out_outage(exc, pipeline, store, source, metrics, stop,
                                        progress_out, backoff)  # fmt: skip
                        rebalanced = False
                    if rebalanced:
                        refused_in_a_row = 0
                    if progress_out is not None:
                        progress_out.write(
                            f"noveld: {store.lease_refusal}; reloaded the shared state and "
                            "reading on from the stored offsets\n"
                            if stale and store.lease_refusal
                            else "noveld: another replica compacted the vocabulary; reloaded the "
                            "shared state and reading on from the stored offsets\n"
                            if stale
                            else "noveld: reloaded the shared state; continuing with the "
                            "partitions the group assigns\n"
                        )
                    code = EXIT_OK
                    continue
                if code != EXIT_OK:
                    break
                refused_in_a_row = 0
                source.acknowledge(nxt)
                if metrics is not None:
                    refresh_lag(metrics, source)
            progress.stopped = stop.is_set()
        finally:
            try:
                pipeline.flush()
            except Exception as exc:
                if not is_outage(exc):
                    raise
                if progress_out is not None:  # the state is as of the last commit that landed
                    progress_out.write(f"noveld: Redis unreachable at shutdown ({exc})\n")
            if lease is not None:  # after the last commit: a standby takes over at once
                lease.release()
            with contextlib.suppress(DeadLettersFailed):  # said; the batch was not committed
                dead.flush()
            for what, close in (
                ("the consumer", source.close),
                ("the events producer", events.close),
                ("the dead-letter producer", dead.close),
            ):
                try:
                    close()
                except Exception as exc:  # a wedged client must not skip the rest, nor trace
                    log.warning("closing %s failed (the state is safe): %r", what, exc)
            if server is not None:
                server.stop()
    return code, progress
