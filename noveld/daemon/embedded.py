"""The embedded default: JSONL file or stdin in, in-process state with snapshots, events to stdout.

Exit codes: 0 done (input exhausted or SIGINT/SIGTERM after a clean snapshot); 1 an I/O error
(the CLI names it); 2 usage; 3 circuit breaker; 4 state refused the commit; 5 Redis unreachable
(see :func:`_redis_lost`); 6 the namespace's state in Redis is gone or damaged.
Configuration and state errors are raised as :class:`UserError` for the CLI to print.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from types import FrameType
from typing import IO, Any

import redis

from noveld.connectors.decode import Invalid
from noveld.connectors.errors import DeadLettersFailed
from noveld.connectors.jsonl import DlqFileSink, JsonlSource, Record, TimedSource
from noveld.daemon.exits import (
    EXIT_CIRCUIT_OPEN,
    EXIT_IO,
    EXIT_OK,
    EXIT_REDIS_UNREACHABLE,
    EXIT_STATE_DAMAGED,
    EXIT_STATE_DIVERGED,
)
from noveld.daemon.lease import WriterLease
from noveld.daemon.metrics import Metrics, MetricsServer
from noveld.daemon.outage import Backoff, is_outage, outage_reason, retry_until_back
from noveld.daemon.pipeline import BatchObserver, CircuitOpen, Pipeline, StateDiverged
from noveld.daemon.progress import Progress
from noveld.daemon.settings import Settings
from noveld.models.hdp import live_clusters
from noveld.schema import InvalidReason, stored_json
from noveld.state.base import CommitOutcome, FingerprintMismatch, StateStore, partition_key
from noveld.state.dir_lock import StateDirBusy, hold_state_dir
from noveld.state.memory import MemoryStore
from noveld.state.redis.connect import connect
from noveld.state.redis.reasons import StoreConflict
from noveld.state.redis.store import RedisStore
from noveld.state.redis_url import redacted

STATE_DAMAGED_ADVICE = (
    "Keys of the namespace were deleted, evicted (a maxmemory-policy that evicts) or flushed, "
    "or Redis restarted without them, or another writer shares this one's uid slot; restore "
    "the namespace from a backup (noveld state import) or start a new one (docs/operations.md, "
    "'Redis incidents')"
)


ANOTHER_WRITER_ADVICE = (
    "The state may well be intact: another noveld process writes this namespace too — two file "
    "or stdin runs on one namespace share its uid slot 0 (give each its own --namespace), or "
    "noveld state set-offset moved the offset of the input this run reads (stop a run before "
    "setting its offset). Stop the other writer and run again. Otherwise: "
)
"""Said first for the conflicts another live writer causes (an offset gap, a uid slot ahead
of this writer): with an intact namespace, restoring a backup would throw commits away."""


def state_damaged(exc: StoreConflict) -> str:
    """The message of a run stopped because the stored state does not hold together."""
    advice = (ANOTHER_WRITER_ADVICE if exc.another_writer else "") + STATE_DAMAGED_ADVICE
    return f"the namespace's state in Redis is gone or damaged: {exc}. {advice}"


class UserError(RuntimeError):
    """A problem the user can fix (bad config, incompatible state, unreadable input)."""


def write_all(fd: int, data: bytes) -> None:
    """Write every byte to ``fd``, however many ``write(2)`` calls it takes.

    A write to a full pipe that a signal interrupts returns the bytes written so far. Python's
    text layer over an unbuffered stream (``PYTHONUNBUFFERED=1``, as the container image sets)
    ignores that count, so a SIGTERM while a slow reader held up stdout silently lost the rest
    of the batch's events, after their commit had taken them out of the outbox."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class StdoutEvents:
    """Event sink writing one JSON object per line (UTF-8)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.count = 0
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation: a StringIO
            self._fd = None

    def publish(self, events: Sequence[dict[str, Any]]) -> None:
        """Write all of it (a line is delivered once the pipe has it); an event read back from
        a store is written as stored (:func:`stored_json`)."""
        text = "".join([stored_json(ev) + "\n" for ev in events])
        self.stream.flush()  # anything written through the stream itself goes first
        if self._fd is None:
            self.stream.write(text)
            self.stream.flush()
        else:
            write_all(self._fd, text.encode())
        self.count += len(events)


class CollectingEvents:
    """Event sink that keeps events in a list (evaluate, demo, tests)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def publish(self, events: Sequence[dict[str, Any]]) -> None:
        """Append."""
        self.events.extend(events)


class FileDeadLetters:
    """Dead-letter sink appending to a JSONL file."""

    def __init__(self, sink: DlqFileSink) -> None:
        self.sink = sink

    def send(self, record: Record, reason: InvalidReason, detail: str) -> None:
        """Append one dead letter."""
        self.sink.write(record, Invalid(reason, detail))

    def flush(self) -> None:
        """fsync, so dead letters are durable before their offsets are committed."""
        self.sink.flush()


@contextmanager
def graceful_stop() -> Iterator[threading.Event]:
    """SIGINT/SIGTERM request a stop after the current batch (the loop polls the event)."""
    flag = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        flag.set()

    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def source_name(input_path: str) -> str:
    """Offsets key of an input: the path as given (``-`` for stdin), as in record positions."""
    return input_path


def default_store(settings: Settings, snapshot: bool = True) -> StateStore:
    """RedisStore when ``redis.url`` is set, else the in-process store (+ snapshots)."""
    if settings.redis.url is None:
        store = MemoryStore(
            settings.state.dir if snapshot else None, settings.state.snapshot_interval_s
        )
        try:
            store.check_writable()
        except OSError as exc:
            raise UserError(f"cannot save state in {settings.state.dir}: {exc}") from exc
        return store
    url = settings.redis.url.get_secret_value()
    try:
        client = connect(url, socket_timeout_s=settings.redis.socket_timeout_s)
    except ValueError as exc:
        raise UserError(f"bad Redis URL ({redacted(url)}): {exc}") from exc
    except TypeError as exc:  # a query option redis-py's connections do not take
        raise UserError(f"bad Redis URL ({redacted(url)}): an option it cannot use: {exc}") from exc
    except redis.RedisError as exc:
        raise UserError(f"cannot reach Redis ({redacted(url)}): {exc}") from exc
    shared = RedisStore(
        client,
        settings.namespace,
        replicas_to_ack=settings.redis.replicas_to_ack,
        replica_ack_timeout_ms=settings.redis.replica_ack_timeout_ms,
    )
    try:
        problem = shared.unfit_server()
    except redis.RedisError as exc:
        raise UserError(f"cannot start: {outage_reason(exc)}") from exc
    except (TypeError, ValueError) as exc:  # the URL's query options, met at the first connection
        raise UserError(f"bad Redis URL ({redacted(url)}): an option it cannot use: {exc}") from exc
    if problem is not None:
        raise UserError(f"the Redis at {redacted(url)} cannot hold noveld's state: {problem}")
    return shared


def say_persistence_risk(store: StateStore, out: IO[str] | None) -> None:
    """One start-up line when the namespace's Redis would forget acknowledged commits in a
    crash (:meth:`RedisStore.persistence_risk`); silent for the in-process store."""
    if out is None or not isinstance(store, RedisStore):
        return
    try:
        risk = store.persistence_risk()
    except redis.RedisError:  # the run itself will report an unreachable Redis
        return
    if risk is not None:
        out.write(f"noveld: warning: {risk}\n")
        out.flush()


def start_metrics(
    settings: Settings, pipeline: Pipeline
) -> tuple[Metrics | None, MetricsServer | None]:
    """Metrics and their HTTP server when ``metrics_port`` is set (0 = any free port)."""
    if settings.metrics_port is None:
        return None, None
    metrics = Metrics(pipeline.model.kind)
    metrics.clusters_active.set(live_clusters(pipeline.state.stats))
    metrics.vocabulary.set(len(pipeline.state.vocab))
    try:
        server = MetricsServer(metrics, settings.metrics_port).start()
    except OSError as exc:
        raise UserError(f"cannot serve metrics on port {settings.metrics_port}: {exc}") from exc
    if settings.metrics_port == 0:  # the port picked is the operator's to know
        sys.stderr.write(f"noveld: metrics on port {server.port} (/metrics, /healthz, /readyz)\n")
    metrics.set_ready(True)
    return metrics, server


def step_or_stop(
    pipeline: Pipeline,
    records: Sequence[Record],
    first: dict[str, int],
    nxt: dict[str, int],
    progress: Progress,
    progress_out: IO[str] | None,
    breaker_advice: str,
    metrics: Metrics | None = None,
    reloads_stale: bool = False,
) -> int:
    """One pipeline step; EXIT_OK to go on, or the exit code after explaining why to stop
    (EXIT_STATE_DIVERGED unexplained for a stale vocabulary when the caller ``reloads_stale``:
    reading on after a reload is the normal course there, not an error)."""
    try:
        rep = pipeline.step(records, first, nxt)
        progress.update(rep)
        if metrics is not None:
            metrics.observe(rep)
        return EXIT_OK
    except StateDiverged as exc:
        if metrics is not None:
            if exc.outcome is CommitOutcome.REPLAY:  # already applied: skipped, counted
                metrics.replayed.inc()
                metrics.documents.labels(outcome="replayed").inc(len(records))
            elif exc.outcome is CommitOutcome.STALE:
                metrics.stale.inc()
            else:
                metrics.fenced.inc()
        if progress_out is not None and not (reloads_stale and exc.outcome is CommitOutcome.STALE):
            progress_out.write(f"noveld: error: {exc}\n")
        return EXIT_STATE_DIVERGED
    except StoreConflict as exc:
        if progress_out is not None:
            progress_out.write(f"noveld: error: {state_damaged(exc)}. Stopping.\n")
        return EXIT_STATE_DAMAGED
    except DeadLettersFailed as exc:
        if progress_out is not None:
            progress_out.write(
                f"noveld: error: cannot write dead letters ({exc}); stopping without committing "
                "this batch, which the next start reads again. Does the DLQ topic exist?\n"
            )
        return EXIT_IO
    except CircuitOpen as exc:
        progress.update(exc.report)
        if progress_out is not None:
            progress_out.write(f"noveld: circuit breaker open: {exc}. {breaker_advice}\n")
        return EXIT_CIRCUIT_OPEN


def _input_name(input_path: str) -> str:
    """How messages name an input: ``stdin`` for ``-``, else its path."""
    return "stdin" if input_path == "-" else input_path


def _redis_lost(
    why: str, input_path: str, committed: int | None, progress_out: IO[str] | None
) -> int:
    """Stop a file or stdin run that cannot go on without Redis (stopped while waiting for it,
    or stdin whose lost commits cannot be read again), saying where a new run resumes."""
    if progress_out is not None:
        where = _input_name(input_path)
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


def wait_for_redis(
    exc: BaseException,
    pipeline: Pipeline,
    store: RedisStore,
    metrics: Metrics | None,
    stop: threading.Event,
    progress_out: IO[str] | None,
    idle: Callable[[float], None] | None = None,
    resync: Callable[[], None] | None = None,
    backoff: Backoff | None = None,
) -> list[str] | None:
    """Redis went away (G4): go unready, retry with capped backoff until it answers, then
    reload the state from it, claiming again the inputs a failover lost the claim on. Between
    tries ``idle(seconds)`` (default: sleep, waking on a signal; the Kafka loop polls to keep
    its group membership), and after the reload ``resync()`` (the Kafka loop re-seeks).
    ``backoff`` is the run's, kept across outages until a commit lands (see
    :func:`retry_until_back`). The lost claims, or None if a signal stopped the wait first."""
    reason = outage_reason(exc)
    if metrics is not None:
        metrics.set_ready(False, reason)
    if progress_out is not None:
        progress_out.write(f"noveld: {reason}; pausing input, retrying\n")

    def wait(seconds: float) -> None:
        (idle or stop.wait)(seconds)
        if metrics is not None:
            metrics.turn()

    def reconnect() -> list[str]:
        store.ping()
        store.probe_write()  # answering is not enough: an OOM or read-only Redis answers too
        lost = store.restore_claims()
        pipeline.reload()
        if resync is not None:
            resync()
        return lost

    back, lost = retry_until_back(reconnect, wait, stop, backoff)
    return lost if back else None


def emptied_matters(pipeline: Pipeline, store: RedisStore) -> bool:
    """Whether a namespace that came back empty must stop the daemon: events may have left for
    commits it no longer has (their ids would be handed out again). Not so when events leave
    only for commits a replica holds (``redis.replicas_to_ack``) and this process has published
    none: the empty namespace is a failover to a replica that never had a commit, and the
    input is consumed again from the start (what the stored offsets say)."""
    return store.replicas_to_ack == 0 or pipeline.published > 0


def refuse_emptied(
    pipeline: Pipeline, store: RedisStore, own: str | None = None
) -> Callable[[], None]:
    """What a run checks once Redis is back from an outage: whether the namespace came back
    without the state of inputs other than its own (``own``; None, as in Kafka mode: any
    state; no persistence, a flush). Going on would lose them without a word and hand out
    their cluster ids again under event ids already used — the start-up warning promises exit 6
    (:meth:`RedisStore.emptied`; :func:`emptied_matters`). The run's own input alone is not a
    loss: a file is read again from its first line into the same clusters and events, and
    stdin stops with exit 5 saying from where to pipe it again."""
    others = set(pipeline.state.offsets) - {own}

    def refuse() -> None:
        if others and not pipeline.state.offsets and emptied_matters(pipeline, store):
            raise store.emptied()

    return refuse


def same_file_as(input_path: str, offsets: dict[str, int]) -> tuple[str, int] | None:
    """Another spelling of ``input_path`` (``./news.jsonl`` for ``news.jsonl``) with committed
    lines in ``offsets``, and how many; None if there is none (or the input is stdin)."""
    if input_path == "-":
        return None
    for key, committed in sorted(offsets.items()):
        path, _, partition = key.rpartition(":")
        if path in ("", "-", input_path) or partition != "0" or committed <= 0:
            continue
        try:
            if os.path.samefile(path, input_path):
                return path, committed
        except OSError:  # not a file here (a Kafka topic, a file since removed)
            continue
    return None


def renamed_from(
    input_path: str, inputs: dict[str, dict[str, int]], offsets: dict[str, int]
) -> tuple[str, int] | None:
    """Another file input of the state whose committed lines this file begins with — the same
    file renamed (``feed.jsonl`` rotated to ``feed.jsonl.1``), which read as a new input would
    be counted twice — and how many lines; None if there is none. One pass over the file's
    first lines, up to the longest such prefix."""
    wanted: dict[int, list[str]] = {}
    for key, kept in inputs.items():
        path, _, partition = key.rpartition(":")
        if path not in ("", "-") and partition == "0" and 0 < kept["offset"] == offsets.get(key):
            wanted.setdefault(kept["offset"], []).append(key)
    if not wanted or input_path == "-":
        return None
    try:
        source = JsonlSource(input_path)
    except OSError:
        return None  # open_source names the problem
    try:
        if not source.rereadable:
            return None
        for n in sorted(wanted):
            if not source.skip_to(n):
                return None
            for key in wanted[n]:
                if inputs[key]["crc32"] == source.checksum:
                    return key.rpartition(":")[0], n
    finally:
        source.close()
    return None


def open_source(
    settings: Settings, input_path: str, start: int, committed: dict[str, int] | None = None
) -> JsonlSource | TimedSource:
    """The input from line ``start`` on; stdin's reads close a batch after ``max_wait_ms``.
    ``committed`` is the checksum the state keeps of the input's lines (``offset``, ``crc32``):
    when it covers exactly the lines skipped to ``start``, they must match it."""
    try:
        base = JsonlSource(
            input_path, start_offset=start, max_line_bytes=settings.limits.max_doc_bytes
        )
    except OSError as exc:
        raise UserError(f"cannot read input {input_path}: {exc}") from exc
    if (
        committed is not None
        and committed["offset"] == start == base.next_offset
        and base.checksum != committed["crc32"]
    ):
        base.close()
        raise UserError(_changed_input(input_path, start))
    if base.next_offset < start:  # fewer lines than the state has committed from it
        base.close()
        if not base.rereadable:
            where = _input_name(input_path)
            raise UserError(
                f"{where} ended after {base.next_offset:,} lines but the state already holds "
                f"lines 1 to {start:,} of it: another stream, or the same one cut short, so "
                "nothing was read. A different stream needs its own --state-dir (with "
                "--redis-url, its own --namespace)"
            )
        raise UserError(
            f"{input_path} has {base.next_offset:,} complete lines but the state already holds "
            f"lines 1 to {start:,} of it: this is not the file the state was built from "
            f"(truncated, rotated or replaced?). {_NEW_FILE_ADVICE.format(input_path)}"
        )
    if not base.rereadable:  # stdin, a pipe, a device: read by a thread, never blocking
        return TimedSource(base, settings.batch.max_wait_ms / 1000)
    return base


def _changed_input(input_path: str, lines: int) -> str:
    """Why a run refuses to resume an input whose first lines are not the ones committed."""
    if input_path == "-":
        return (
            f"the first {lines:,} lines of stdin are not the lines this state holds from stdin "
            "(their checksum differs): a different stream on stdin needs its own --state-dir "
            "(with --redis-url, its own --namespace), or the same stream must be given again "
            "to resume"
        )
    return (
        f"the first {lines:,} lines of {input_path} are not the lines the state holds from it "
        "(their checksum differs): the file was changed, rotated or replaced since. "
        + _NEW_FILE_ADVICE.format(input_path)
    )


_NEW_FILE_ADVICE = (
    "Give a new file its own --state-dir (with --redis-url, its own --namespace), or read it "
    "into this model from its start: `noveld state set-offset {}:0 0` with this run's "
    "--state-dir (or --redis-url and --namespace)"
)


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
                            f"{first} of {_input_name(input_path)} (lost "
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
                    f"lines already read from {_input_name(input_path)}; lines still in the "
                    "pipe were not read\n"
                )
            if source.held_tail and not source.rereadable and progress_out is not None:
                progress_out.write(
                    f"noveld: {_input_name(input_path)} ended inside a line "
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


def take_file_runs_lease(store: RedisStore, settings: Settings) -> tuple[WriterLease | None, bool]:
    """svi keeps one writer per namespace (DESIGN §6): a file or stdin run takes the writer
    lease, or is refused while another writer (a daemon, another run) holds it. Also whether
    the state must be loaded again (a writer committed between the load and the lease)."""
    if settings.model.kind != "svi":
        return None, False
    lease = WriterLease(store, settings.redis.writer_lease_ms)
    holder = lease.try_take()
    if holder is not None:
        raise UserError(
            f"writer {holder} holds the svi writer lease of namespace {settings.namespace!r} "
            "(a running svi daemon or run): svi's global step does not commute, so one process "
            "at a time steps a namespace's model. Stop it first, or give another --namespace"
        )
    return lease, lease.hold()
