"""One pipeline step of a run's loop, and the operator's word on each reason to stop
(diverged or damaged state, dead letters refused, the circuit breaker)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

from noveld.connectors.errors import DeadLettersFailed
from noveld.connectors.jsonl import Record
from noveld.daemon.exits import (
    EXIT_CIRCUIT_OPEN,
    EXIT_IO,
    EXIT_OK,
    EXIT_STATE_DAMAGED,
    EXIT_STATE_DIVERGED,
)
from noveld.daemon.metrics import Metrics
from noveld.daemon.pipeline import CircuitOpen, Pipeline, StateDiverged
from noveld.daemon.progress import Progress
from noveld.daemon.reporter import Reporter
from noveld.state.base import CommitOutcome
from noveld.state.redis.reasons import StoreConflict

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
    report = Reporter(progress_out)
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
        if not (reloads_stale and exc.outcome is CommitOutcome.STALE):
            report.error(f"{exc}")
        return EXIT_STATE_DIVERGED
    except StoreConflict as exc:
        report.error(f"{state_damaged(exc)}. Stopping.")
        return EXIT_STATE_DAMAGED
    except DeadLettersFailed as exc:
        report.error(
            f"cannot write dead letters ({exc}); stopping without committing this batch, which "
            "the next start reads again. Does the DLQ topic exist?"
        )
        return EXIT_IO
    except CircuitOpen as exc:
        progress.update(exc.report)
        why = progress.dominant_reason()
        why = f"{why[:1].upper()}{why[1:]}. " if why else ""
        report.say(f"circuit breaker open: {exc}. {why}{breaker_advice}")
        return EXIT_CIRCUIT_OPEN
