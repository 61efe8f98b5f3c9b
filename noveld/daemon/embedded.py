"""The embedded default: JSONL file or stdin in, in-process state with snapshots, events to stdout.

Exit codes: 0 done (input exhausted or SIGINT/SIGTERM after a clean snapshot); 1 an I/O error
(the CLI names it); 2 usage; 3 circuit breaker; 4 state refused the commit; 5 Redis unreachable
(see :func:`~noveld.daemon.file_hooks.redis_lost`); 6 the namespace's state in Redis is gone
or damaged.
Configuration and state errors are raised as :class:`UserError` for the CLI to print.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

import redis

from noveld.connectors.file_sinks import DlqFileSink
from noveld.daemon.errors import UserError
from noveld.daemon.file_hooks import FileHooks
from noveld.daemon.file_input import (
    open_source,
    renamed_from,
    same_file_as,
    source_name,
    take_file_runs_lease,
)
from noveld.daemon.lookahead import read_ahead
from noveld.daemon.outage import outage_reason
from noveld.daemon.pipeline import BatchObserver, Pipeline
from noveld.daemon.progress import Progress
from noveld.daemon.reporter import Reporter
from noveld.daemon.runner import Loop, run
from noveld.daemon.settings import Settings
from noveld.daemon.sinks import FileDeadLetters, StdoutEvents
from noveld.daemon.startup import (
    default_store,
    refuse_a_file_as_state_dir,
    say_persistence_risk,
    start_metrics,
)
from noveld.models.hdp import live_clusters
from noveld.state.base import FingerprintMismatch, StateStore, partition_key
from noveld.state.dir_lock import LOCK_NAME, StateDirBusy, hold_state_dir
from noveld.state.redis.store import RedisStore

STDIN_POLL_MS = 200
"""How long a read of stdin (or a pipe) waits for a first line before the loop turns again
(signals, /healthz, events held back for replicas); a file's reads never wait."""


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
    tail_fate: str | None = None,
) -> tuple[int, Progress, Pipeline]:
    """Run the pipeline over a JSONL file (or ``-``) until exhausted or signalled.

    ``on_start`` sees the pipeline once it is built (benchmarks and tools inspect its state);
    ``store`` replaces the default in-process store (e.g. a RedisStore). The default store's
    state dir is held for the whole run (:func:`hold_state_dir`): a second run on it is refused.
    ``breaker_advice`` follows the circuit breaker's message (default: where the invalid
    records are, and that a new run resumes after fixing the producer). ``tail_fate`` says
    what becomes of a file's unterminated last line (default: read by the next run, or by
    none when no state is saved).
    """
    saved = store is not None or settings.redis.url is not None
    state_dir = settings.state.dir
    if tail_fate is None and not (saved or (snapshot and state_dir is not None)):
        tail_fate = "not processed (no state is saved, so no later run resumes at it)"
    args = (events_out, progress_out, events_sink, observer, snapshot, on_start, store,
            breaker_advice, tail_fate)  # fmt: skip
    if saved or not snapshot or state_dir is None:
        return _run_file(settings, input_path, *args)
    refuse_a_file_as_state_dir(state_dir)
    created = _first_missing(state_dir)  # the directories this run creates, if any
    with ExitStack() as held:
        try:
            held.enter_context(hold_state_dir(state_dir))
        except StateDirBusy as exc:
            raise UserError(str(exc)) from exc
        except OSError as exc:  # the directory cannot be created, or its lock file written
            raise UserError(f"cannot save state in {state_dir}: {exc}") from exc
        try:
            return _run_file(settings, input_path, *args)
        except UserError:  # refused before reading: leave no empty directory behind
            if created is not None:
                _remove_if_unused(state_dir, created)
            raise


def _first_missing(state_dir: Path) -> Path | None:
    """The outermost of ``state_dir`` and its parents that does not exist yet (None: the
    directory is there already)."""
    missing = None
    for path in (state_dir, *state_dir.parents):
        if path.exists():
            break
        missing = path
    return missing


def _remove_if_unused(state_dir: Path, created: Path) -> None:
    """Remove a state dir this run created and saved nothing in (only its lock file), with
    the parents it created for it."""
    try:
        if {p.name for p in state_dir.iterdir()} <= {LOCK_NAME}:
            (state_dir / LOCK_NAME).unlink(missing_ok=True)
            for path in (state_dir, *state_dir.parents):
                path.rmdir()
                if path == created:
                    break
    except OSError:  # then it stays; harmless
        pass


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
    tail_fate: str | None,
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
    source = read_ahead(
        open_source(settings, input_path, resume_at, pipeline.inputs.get(key)),
        pipeline.prefetches,
        pipeline.prepare,
    )
    report = Reporter(progress_out)
    if resume_at:
        where, note = (
            (
                "stdin",
                "; a different stream on stdin needs its own --state-dir (with --redis-url, "
                "its own --namespace)",
            )
            if input_path == "-"
            else (input_path, "")
        )
        report.say(
            f"resuming {where} after line {resume_at:,} (the state holds lines 1 to "
            f"{resume_at:,} already{note})"
        )
    progress = Progress(progress_out, settings.progress_interval_s)
    progress.clusters = live_clusters(pipeline.state.stats)
    metrics, server = start_metrics(settings, pipeline)
    hooks = FileHooks(settings, input_path, source, pipeline, store, dlq, lease, metrics, server,
                      report)  # fmt: skip
    if tail_fate is not None:
        hooks.tail_fate = tail_fate
    # the input read now, which an outage may have opened again
    pipeline.input_checksum = lambda _key, offset: hooks.source.checksum_at(offset)
    progress.follow(lambda: hooks.source.share_read())  # the input an outage may reopen
    if on_start is not None:
        on_start(pipeline)
    loop = Loop(
        pipeline,
        source,
        progress,
        report,
        metrics,
        settings.batch.max_docs,
        STDIN_POLL_MS,
        breaker_advice
        or f"The last invalid records are in {dlq_path}; fix the producer, then run again to "
        "resume.",
    )
    code = run(loop, hooks)
    return code, progress, pipeline
