"""Riding out a Redis outage: retry until it answers, reload the state, and refuse to go
on over a namespace that came back without state other runs committed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import IO

from noveld.daemon.metrics import Metrics
from noveld.daemon.outage import Backoff, outage_reason, retry_until_back
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.reporter import Reporter
from noveld.state.redis.store import RedisStore


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
    """Redis went away: go unready, retry with capped backoff until it answers, then
    reload the state from it, claiming again the inputs a failover lost the claim on. Between
    tries ``idle(seconds)`` (default: sleep, waking on a signal; the Kafka loop polls to keep
    its group membership), and after the reload ``resync()`` (the Kafka loop re-seeks).
    ``backoff`` is the run's, kept across outages until a commit lands (see
    :func:`retry_until_back`). The lost claims, or None if a signal stopped the wait first."""
    reason = outage_reason(exc)
    if metrics is not None:
        metrics.set_ready(False, reason)
    Reporter(progress_out).say(f"{reason}; pausing input, retrying")

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
