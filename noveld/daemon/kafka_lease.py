"""The svi writer lease in the Kafka daemon: a replica stands by until it holds the lease,
and stops once another writer has taken it over."""

from __future__ import annotations

from noveld.daemon.exits import EXIT_STATE_DIVERGED
from noveld.daemon.lease import WriterLease
from noveld.daemon.metrics import Metrics
from noveld.daemon.outage import is_outage
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.reporter import Reporter
from noveld.daemon.signals import graceful_stop


def stand_by(
    lease: WriterLease, pipeline: Pipeline, metrics: Metrics | None, report: Reporter
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
            report.say_now,
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


def lease_lost(lease: WriterLease, report: Reporter) -> int:
    """Say that another writer took the lease over; the exit code (the in-memory model may
    hold a step the store refused, and one writer steps the model)."""
    report.error(lease.lost_message())
    return EXIT_STATE_DIVERGED
