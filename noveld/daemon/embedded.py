"""The embedded default: JSONL file or stdin in, in-process state with snapshots, events to stdout.

Exit codes: 0 done (input exhausted or SIGINT/SIGTERM after a clean snapshot); 1 an I/O error
(the CLI names it); 2 usage; 3 circuit breaker; 4 state refused the commit; 5 Redis unreachable
(see :func:`_redis_lost`); 6 the namespace's state in Redis is gone or damaged.
Configuration and state errors are raised as :class:`UserError` for the CLI to print.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from typing import IO, Any

import redis

from noveld.connectors.jsonl import DlqFileSink, Record, TimedSource
from noveld.daemon.errors import UserError
from noveld.daemon.exits import (
    EXIT_OK,
    EXIT_REDIS_UNREACHABLE,
    EXIT_STATE_DIVERGED,
)
from noveld.daemon.file_input import (
    input_name,
    open_source,
    renamed_from,
    same_file_as,
    source_name,
    take_file_runs_lease,
)
from noveld.daemon.outage import Backoff, is_outage, outage_reason
from noveld.daemon.pipeline import BatchObserver, Pipeline
from noveld.daemon.progress import Progress
from noveld.daemon.redis_wait import refuse_emptied, wait_for_redis
from noveld.daemon.settings import Settings
from noveld.daemon.signals import graceful_stop
from noveld.daemon.sinks import FileDeadLetters, StdoutEvents
from noveld.daemon.startup import default_store, say_persistence_risk, start_metrics
from noveld.daemon.stepping import step_or_stop
from noveld.models.hdp import live_clusters
from noveld.state.base import FingerprintMismatch, StateStore, partition_key
from noveld.state.dir_lock import StateDirBusy, hold_state_dir
from noveld.state.redis_store import RedisStore


def _redis_lost(
    why: str, input_path: str, committed: int | None, progress_out: IO[str] | None
) -> int:
    """Stop a file or stdin run that cannot go on without Redis (stopped while waiting for it,
    or stdin whose lost commits cannot be read again), saying where a new run resumes."""
    if progress_out is not None:
        where = input_name(input_path)
        kept = (
            f"The first {committed} lines of {where} are committed"
            if committed is not None
            else f"Redis keeps {where} as of its last commit"
        )
        progress_out.write(
            f"noveld: error: {why}; stopping. {kept}; run again with the same input to resume "
            "after them.\n"
        )
    return EXIT_REDIS_UNREACHABLE


def run_file(
    settings: Settings,
    input_path: str,
    events_out: IO[str] | None = None,
    progress_out: IO[str] | None = None,
    events_sink: Any = None,
    observer: BatchObserver | None = None,
    snapshot: bool = True,
    on_start: Callable[[Pipeline], None] | None = None,
    store: StateStore | None = None,
    breaker_advice: str | None = None,
) -> tuple[int, Progress, Pipeline]:
    """Run the pipeline over a JSONL file (or ``-``) until exhausted or signalled.

    ``on_start`` sees the pipeline once it is built (benchmarks and tools inspect its state);
    ``store`` replaces the default in-process store (e.g. a RedisStore). The default store's
    state dir is held for the whole run (:func:`hold_state_dir`): a second run on it is refused.
    ``breaker_advice`` follows the circuit breaker's message (default: where the invalid
    records are, and that a new run resumes after fixing the producer).
    """
    args = (events_out, progress_out, events_sink, observer, snapshot, on_start, store,
            breaker_advice)  # fmt: skip
    state_dir = settings.state.dir
    if store is not None or settings.redis.url is not None or not snapshot or state_dir is None:
        return _run_file(settings, input_path, *args)
    with ExitStack() as held:
        try:
            held.enter_context(hold_state_dir(state_dir))
        except StateDirBusy as exc:
            raise UserError(str(exc)) from exc
        except OSError as exc:  # the directory cannot be created, or its lock file written
            raise UserError(f"cannot save state in {state_dir}: {exc}") from exc
        return _run_file(settings, input_path, *args)


def _run_file(
    settings: Settings,
    input_path: str,
    events_out: IO[str] | None,
    progress_out: IO[str] | None,
    events_sink: Any,
    observer: BatchObserver | None,
    snapshot: bool,
    on_start: Callable[[Pipeline], None] | None,
    store: StateStore | None,
    breaker_advice: str | None,
) -> tuple[int, Progress, Pipeline]:
    """:func:`run_file` with the state dir held (or none to hold)."""
    if store is None:
        store = default_store(settings, snapshot)
        say_persistence_risk(store, progress_out)
    sink = events_sink if events_sink is not None else StdoutEvents(events_out or sys.stdout)
    dlq_path = settings.dlq_path()
    try:
        dlq = DlqFileSink(dlq_path)
    except OSError as exc:
        raise UserError(f"cannot open DLQ file {dlq_path}: {exc}") from exc
    try:
        pipeline = Pipeline(settings, store, sink, FileDeadLetters(dlq), observer)
    except FingerprintMismatch as exc:
        raise UserError(str(exc)) from exc
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    except redis.RedisError as exc:
        raise UserError(f"cannot start: {outage_reason(exc)}") from exc
    topic = source_name(input_path)
    key = partition_key(topic, 0)
    other = same_file_as(input_path, pipeline.state.offsets)
    if other is not None and key not in pipeline.state.offsets:
        raise UserError(
            f"{input_path} is the same file as {other[0]}, which this state has committed up "
            f"to line {other[1]:,}: run with --input {other[0]} to resume it (resumption is "
            "keyed by the path as given), or use another --state-dir (with --redis-url, another "
            "--namespace) to read it "
            "again from the start"
        )
    renamed = (  # only for an input the state has not seen: a resume does not pay for it
        None
        if key in pipeline.state.offsets
        else renamed_from(input_path, pipeline.inputs, pipeline.state.offsets)
    )
    if renamed is not None:
        path, n = renamed
        raise UserError(
            f"{input_path} begins with the {n:,} lines this state holds from {path}: it is that "
            "file renamed (rotated?), and read as a new input those lines would be counted "
            f"twice. To read only what follows them: tail -n +{n + 1} {input_path} > REST.jsonl "
            "and run with --input REST.jsonl"
        )
    lease = None
    if isinstance(store, RedisStore):
        try:
            store.claim([key])  # fences any other process still committing this input
            lease, behind = take_file_runs_lease(store, settings)
            if behind:
                pipeline.reload()
        except redis.RedisError as exc:
            raise UserError(f"cannot start: {outage_reason(exc)}") from exc
    resume_at = pipeline.next_offset(topic, 0)
    source = open_source(settings, input_path, resume_at, pipeline.inputs.get(key))
    pipeline.input_checksum = lambda _key, offset: source.checksum_at(offset)
    if resume_at and progress_out is not None:
        where, note = (
            (
                "stdin",
                "; a different stream on stdin needs its own --state-dir (with --redis-url, "
                "its own --namespace)",
            )
            if input_path == "-"
            else (input_path, "")
        )
        progress_out.write(
            f"noveld: resuming {where} after line {resume_at:,} (the state holds lines 1 to "
            f"{resume_at:,} already{note})\n"
        )
    progress = Progress(progress_out, settings.progress_interval_s)
    progress.clusters = live_clusters(pipeline.state.stats)
    metrics, server = start_metrics(settings, pipeline)
    if on_start is not None:
        on_start(pipeline)
    code = EXIT_OK
    with graceful_stop() as stop:
        try:
            first = source.next_offset
            held: list[Record] = []  # stdin's batch to step again: its commit did not land
            draining = False  # stopping: a pipe's read-ahead is processed, not dropped
            drained_from = 0
            backoff = Backoff()  # across outages, until a commit lands: a flapping Redis
            while True:
                if stop.is_set() and not draining:
                    if not isinstance(source, TimedSource):  # a file resumes where it stopped
                        break
                    draining = True
                    source.stop_reading()
                    drained_from = source.next_offset
                if lease is not None and lease.lost_to is not None:
                    if progress_out is not None:
                        progress_out.write(f"noveld: error: {lease.lost_message()}\n")
                    code = EXIT_STATE_DIVERGED
                    break
                records = held or source.read_batch(settings.batch.max_docs)
                held = []
                if metrics is not None:
                    metrics.turn()
                try:
                    if not records:
                        if source.exhausted or draining:
                            break
                        pipeline.retry_pending()
                        continue
                    nxt = source.next_offset
                    code = step_or_stop(
                        pipeline,
                        records,
                        {key: first},
                        {key: nxt},
                        progress,
                        progress_out,
                        breaker_advice
                        or f"The last invalid records are in {dlq_path}; fix the producer, "
                        "then run again to resume.",
                        metrics,
                    )
                except Exception as exc:
                    if not (is_outage(exc) and isinstance(store, RedisStore)):
                        raise
                    refuse = refuse_emptied(pipeline, store, key)
                    back = wait_for_redis(exc, pipeline, store, metrics, stop, progress_out,
                                          resync=refuse, backoff=backoff)  # fmt: skip
                    if back is None:
                        code = _redis_lost("stopped while Redis was unreachable", input_path,
                                           None, progress_out)  # fmt: skip
                        break
                    if metrics is not None:
                        metrics.set_ready(True)
                    stored = pipeline.next_offset(topic, 0)
                    if source.rereadable:  # a file can be read again from wherever Redis is
                        source.close()
                        source = open_source(settings, input_path, stored, pipeline.inputs.get(key))
                    elif stored == first and records:
                        held = records
                    elif stored != source.next_offset:  # lines Redis lost are gone from stdin
                        code = _redis_lost(
                            f"Redis came back without the commits of lines {stored + 1} to "
                            f"{first} of {input_name(input_path)} (lost "
                            "in the outage), which cannot be read again",
                            input_path,
                            stored,
                            progress_out,
                        )
                        break
                    first = stored
                    if progress_out is not None:
                        progress_out.write(
                            f"noveld: Redis is back; state reloaded, input resumed after line "
                            f"{stored}\n"
                        )
                    continue
                backoff.reset()
                if code != EXIT_OK:
                    break
                first = nxt
            progress.stopped = stop.is_set()
            if draining and source.next_offset > drained_from and progress_out is not None:
                progress_out.write(
                    f"noveld: stopping: processed the {source.next_offset - drained_from:,} "
                    f"lines already read from {input_name(input_path)}; lines still in the "
                    "pipe were not read\n"
                )
            if source.held_tail and not source.rereadable and progress_out is not None:
                progress_out.write(
                    f"noveld: {input_name(input_path)} ended inside a line "
                    f"({source.held_tail_bytes:,} bytes, no newline, not JSON): not processed "
                    "and not committed — did its writer stop mid-line? Given the stream again, "
                    f"a run resumes at that line ({source.next_offset + 1:,})\n"
                )
            elif source.held_tail and progress_out is not None:
                cr = source.held_tail_cr
                progress_out.write(
                    f"noveld: the last line of {input_path} has no newline and is not JSON (yet): "
                    "left unread for the next run, in case a writer is still appending it"
                    + (
                        " (it holds carriage returns: if the file's lines end in CR alone, "
                        "convert them to newlines — noveld reads such a file as one line)"
                        if cr
                        else ""
                    )
                    + "\n"
                )
        finally:
            if code != EXIT_REDIS_UNREACHABLE:  # else there is nothing to flush to
                try:
                    pipeline.flush()
                except Exception as exc:
                    if not (is_outage(exc) and isinstance(store, RedisStore)):
                        raise
                    code = _redis_lost(f"Redis unreachable at the end ({exc})", input_path,
                                       None, progress_out)  # fmt: skip
            if lease is not None:
                lease.release()
            dlq.flush()
            source.close()
            if server is not None:
                server.stop()
    return code, progress, pipeline
