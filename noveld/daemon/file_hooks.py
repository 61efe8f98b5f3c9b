"""What a file or stdin run adds to the batch loop: the end of the input, draining a pipe's
read-ahead on a stop, the svi writer lease, a Redis outage (re-reading a file, or holding
stdin's batch) and the final flush."""

from __future__ import annotations

import threading

from noveld.connectors.file_sinks import DlqFileSink
from noveld.connectors.jsonl import JsonlSource, Record
from noveld.connectors.timed_source import TimedSource
from noveld.daemon.exits import EXIT_OK, EXIT_REDIS_UNREACHABLE, EXIT_STATE_DIVERGED
from noveld.daemon.file_input import input_name, open_source
from noveld.daemon.lease import WriterLease
from noveld.daemon.lookahead import Lookahead, read_ahead
from noveld.daemon.metrics import Metrics
from noveld.daemon.outage import Backoff, is_outage
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.redis_wait import refuse_emptied, wait_for_redis
from noveld.daemon.reporter import Reporter
from noveld.daemon.runner import LoopHooks, Resumed
from noveld.daemon.settings import Settings
from noveld.daemon.startup import Servers
from noveld.state.base import StateStore, partition_key
from noveld.state.redis.store import RedisStore


def redis_lost(why: str, input_path: str, committed: int | None, report: Reporter) -> int:
    """Stop a file or stdin run that cannot go on without Redis (stopped while waiting for it,
    or stdin whose lost commits cannot be read again), saying where a new run resumes."""
    if not report.silent:
        where = input_name(input_path)
        kept = (
            f"The first {committed} lines of {where} are committed"
            if committed is not None
            else f"Redis keeps {where} as of its last commit"
        )
        report.error(
            f"{why}; stopping. {kept}; run again with the same input to resume after them."
        )
    return EXIT_REDIS_UNREACHABLE


class FileHooks(LoopHooks):
    """The file or stdin run's part of the loop (:mod:`noveld.daemon.runner`)."""

    def __init__(
        self,
        settings: Settings,
        input_path: str,
        source: JsonlSource | TimedSource | Lookahead,
        pipeline: Pipeline,
        store: StateStore,
        dlq: DlqFileSink,
        lease: WriterLease | None,
        metrics: Metrics | None,
        server: Servers | None,
        report: Reporter,
    ) -> None:
        self.settings = settings
        self.input_path = input_path
        self.topic = input_path  # the offsets key's topic: the path as given
        self.key = partition_key(self.topic, 0)
        self.source = source
        self.pipeline = pipeline
        self.store = store
        self.dlq = dlq
        self.lease = lease
        self.metrics = metrics
        self.server = server
        self.report = report
        self.draining = False  # stopping: a pipe's read-ahead is processed, not dropped
        self.tail_fate = "left unread for the next run, in case a writer is still appending it"
        """What the message on an unterminated last line says becomes of it (evaluate has
        no next run: there it is not scored)."""
        self.drained_from = 0

    def leave_on_stop(self) -> bool:
        """A file resumes where it stopped; a pipe first gives what it has read already."""
        if self.draining:
            return False
        if not isinstance(self.source, TimedSource):
            return True
        self.draining = True
        self.source.stop_reading()
        self.drained_from = self.source.next_offset
        return False

    def before_read(self) -> int:
        """Stop when another writer took the svi writer lease over."""
        if self.lease is not None and self.lease.lost_to is not None:
            self.report.error(self.lease.lost_message())
            return EXIT_STATE_DIVERGED
        return EXIT_OK

    def after_read(self) -> int:
        """A turn of the loop (for /healthz)."""
        if self.metrics is not None:
            self.metrics.turn()
        return EXIT_OK

    def idle(self) -> bool:
        """Over at the end of the input (or of a drained read-ahead); else deliver events
        held back for replicas meanwhile."""
        if self.source.exhausted or self.draining:
            return True
        self.pipeline.retry_pending()
        return False

    def rides_out(self, exc: Exception) -> bool:
        """Only a Redis outage is waited out (the in-process store has none)."""
        return is_outage(exc) and isinstance(self.store, RedisStore)

    def ride_out(
        self, exc: Exception, records: list[Record], stop: threading.Event, backoff: Backoff
    ) -> Resumed:
        """Wait for Redis, then go on from the offset it holds: a file is read again from
        there, stdin's batch is stepped again if its commit did not land, and a run whose
        lost lines stdin cannot give again stops."""
        store, pipeline, source, metrics = self.store, self.pipeline, self.source, self.metrics
        assert isinstance(store, RedisStore)
        first = source.acknowledged
        refuse = refuse_emptied(pipeline, store, self.key)
        back = wait_for_redis(exc, pipeline, store, metrics, stop, self.report.out,
                              resync=refuse, backoff=backoff)  # fmt: skip
        if back is None:
            return Resumed(
                redis_lost(
                    "stopped while Redis was unreachable", self.input_path, None, self.report
                )
            )
        if metrics is not None:
            metrics.set_ready(True)
        stored = pipeline.next_offset(self.topic, 0)
        resumed = Resumed()
        if source.rereadable:  # a file can be read again from wherever Redis is
            source.close()
            source = read_ahead(
                open_source(self.settings, self.input_path, stored, pipeline.inputs.get(self.key)),
                pipeline.prefetches,
                pipeline.prepare,
            )
            self.source = resumed.source = source
        elif stored == first and records:
            resumed.again = records
        elif stored != source.next_offset:  # lines Redis lost are gone from stdin
            resumed.code = redis_lost(
                f"Redis came back without the commits of lines {stored + 1} to "
                f"{first} of {input_name(self.input_path)} (lost "
                "in the outage), which cannot be read again",
                self.input_path,
                stored,
                self.report,
            )
            return resumed
        source.acknowledge({self.key: stored})
        self.report.say(f"Redis is back; state reloaded, input resumed after line {stored}")
        return resumed

    def finished(self) -> None:
        """Say what of the input was left unread: a pipe's lines after a stop, a last line
        without its newline."""
        source, report, where = self.source, self.report, input_name(self.input_path)
        if self.draining and source.next_offset > self.drained_from:
            report.say(
                f"stopping: processed the {source.next_offset - self.drained_from:,} "
                f"lines already read from {where}; lines still in the "
                "pipe were not read"
            )
        if source.held_tail and not source.rereadable:
            report.say(
                f"{where} ended inside a line "
                f"({source.held_tail_bytes:,} bytes, no newline, not JSON): not processed "
                "and not committed — did its writer stop mid-line? Given the stream again, "
                f"a run resumes at that line ({source.next_offset + 1:,})"
            )
        elif source.held_tail:
            report.say(
                f"the last line of {self.input_path} has no newline and is not JSON (yet): "
                + self.tail_fate
                + (
                    " (it holds carriage returns: if the file's lines end in CR alone, "
                    "convert them to newlines — noveld reads such a file as one line)"
                    if source.held_tail_cr
                    else ""
                )
            )

    def shut_down(self, code: int) -> int:
        """The final flush (a snapshot; nothing to flush to without Redis), then release the
        lease, make the dead letters durable and close the input and the metrics server."""
        if code != EXIT_REDIS_UNREACHABLE:  # else there is nothing to flush to
            try:
                self.pipeline.flush()
            except Exception as exc:
                if not (is_outage(exc) and isinstance(self.store, RedisStore)):
                    raise
                code = redis_lost(f"Redis unreachable at the end ({exc})", self.input_path,
                                  None, self.report)  # fmt: skip
        if self.lease is not None:
            self.lease.release()
        self.dlq.flush()
        self.source.close()
        if self.server is not None:
            self.server.stop()
        return code
