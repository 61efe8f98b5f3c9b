"""The one batch loop of every run: read a batch from a source, step the pipeline (which
commits it), acknowledge its positions. What only a file run or only the Kafka daemon does
comes in through :class:`LoopHooks`."""

from __future__ import annotations

import gc
import threading
from dataclasses import dataclass, field

from noveld.connectors.source import Record, Source
from noveld.daemon.exits import EXIT_OK
from noveld.daemon.metrics import Metrics
from noveld.daemon.outage import Backoff
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.progress import Progress
from noveld.daemon.reporter import Reporter
from noveld.daemon.signals import graceful_stop
from noveld.daemon.stepping import step_or_stop


@dataclass
class Resumed:
    """How a run goes on after riding out an outage: the exit code to stop with (EXIT_OK: go
    on), a batch to step again (its commit did not land and its input cannot give it again),
    and the input opened again when the old one was replaced."""

    code: int = EXIT_OK
    again: list[Record] = field(default_factory=list)
    source: Source | None = None


class LoopHooks:
    """What a kind of run adds to the loop; the defaults do nothing. A hook that returns an
    exit code other than EXIT_OK stops the loop with it."""

    def leave_on_stop(self) -> bool:
        """A stop was requested: whether to leave the loop now (else read on, e.g. to process
        what was already taken from a pipe)."""
        return True

    def before_read(self) -> int:
        """Before each read."""
        return EXIT_OK

    def after_read(self) -> int:
        """After each read, before the batch is looked at (may raise an outage)."""
        return EXIT_OK

    def idle(self) -> bool:
        """Nothing was read: whether the run is over (may raise an outage)."""
        return False

    def rides_out(self, exc: Exception) -> bool:
        """Whether :meth:`ride_out` waits out ``exc`` (else it propagates)."""
        return False

    def ride_out(
        self, exc: Exception, records: list[Record], stop: threading.Event, backoff: Backoff
    ) -> Resumed:
        """Wait out an outage met while reading or stepping ``records``."""
        raise exc

    def after_step(self, code: int, stop: threading.Event, backoff: Backoff) -> int | None:
        """After a step that raised nothing: the exit code to go on with (EXIT_OK: the batch
        is committed), or None to drop the batch and read on."""
        return code

    def committed(self) -> None:
        """After a batch's commit, once its positions are acknowledged."""

    def finished(self) -> None:
        """After the loop ended without an exception (what is left to say)."""

    def shut_down(self, code: int) -> int:
        """Whatever the loop's end: the last flush and the release of what the run holds;
        the exit code (it may change it)."""
        return code


@dataclass
class Loop:
    """The parts the loop drives."""

    pipeline: Pipeline
    source: Source
    progress: Progress
    report: Reporter
    metrics: Metrics | None
    max_docs: int
    max_wait_ms: int
    breaker_advice: str
    reloads_stale: bool = False


def settle_heap() -> None:
    """Put every object alive after the first batch (imports, compiled kernels, the loaded
    state) out of the cyclic collector's reach, once per process: a full collection then walks
    only what later batches made. On a 2-core machine a full collection took 230-290 ms and
    landed in a commit now and then (the commit latency's tail); frozen, 2-12 ms. Objects
    frozen stay freed by reference counting; only a cycle among them is never collected.
    Called once per run: ``gc.get_freeze_count`` walks every frozen object (~50 ns each)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()


def run(loop: Loop, hooks: LoopHooks) -> int:
    """Drive ``loop.source`` through the pipeline until the hooks, the input or a signal
    (SIGINT/SIGTERM, after the current batch) end it; the exit code."""
    code = EXIT_OK
    backoff = Backoff()  # across outages, until a commit lands: a flapping Redis
    again: list[Record] = []  # a batch to step again: its commit did not land
    settled = False  # settle_heap after the first batch
    with graceful_stop() as stop:
        try:
            while True:
                if stop.is_set() and hooks.leave_on_stop():
                    break
                code = hooks.before_read()
                if code != EXIT_OK:
                    break
                records = again or loop.source.read_batch(loop.max_docs, loop.max_wait_ms)
                again = []
                try:
                    code = hooks.after_read()
                    if code != EXIT_OK:
                        break
                    if not records:
                        if hooks.idle():
                            break
                        continue
                    first, nxt = loop.source.positions(records)
                    code = step_or_stop(
                        loop.pipeline,
                        records,
                        first,
                        nxt,
                        loop.progress,
                        loop.report.out,
                        loop.breaker_advice,
                        loop.metrics,
                        reloads_stale=loop.reloads_stale,
                    )
                except Exception as exc:
                    if not hooks.rides_out(exc):
                        raise
                    resumed = hooks.ride_out(exc, records, stop, backoff)
                    if resumed.source is not None:
                        loop.source = resumed.source
                    code, again = resumed.code, resumed.again
                    if code != EXIT_OK:
                        break
                    continue
                backoff.reset()
                if not settled:
                    settle_heap()
                    settled = True
                verdict = hooks.after_step(code, stop, backoff)
                if verdict is None:
                    code = EXIT_OK
                    continue
                code = verdict
                if code != EXIT_OK:
                    break
                loop.source.acknowledge(nxt)
                hooks.committed()
            loop.progress.stopped = stop.is_set()
            hooks.finished()
        finally:
            code = hooks.shut_down(code)
    return code
