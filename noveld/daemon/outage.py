"""Riding out a Redis outage: recognise connection failures, back off with a
cap, and retry until Redis answers. Policy only; the Kafka and file loops say how to wait and
what to do once it is back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import redis

T = TypeVar("T")

# What a Redis outage looks like from redis-py: refused/reset connections, timeouts, a server
# still loading its AOF after a restart, or a replica that is read-only during a failover; on a
# Redis Cluster also a cluster that is down or failing over (CLUSTERDOWN, MASTERDOWN, TRYAGAIN)
# and the cluster client giving up after its own redirects and retries (ClusterError).
# A Redis at its maxmemory under `noeviction` refuses writes (OOM) until memory is freed: also
# waited out, with its own message.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterError,  # includes ClusterDownError and MasterDownError
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` means "Redis is unreachable for now" (retry) rather than a bug."""
    return isinstance(exc, OUTAGE_ERRORS)


def outage_reason(exc: BaseException) -> str:
    """What an operator should read about a Redis error: the incident, not only the text."""
    text = str(exc)
    if isinstance(exc, redis.exceptions.OutOfMemoryError) or text.startswith("OOM"):
        return (
            f"Redis is out of memory ({text}): at its maxmemory it refuses writes; free memory "
            "or raise maxmemory (docs/operations.md, 'Redis incidents')"
        )
    if isinstance(exc, redis.exceptions.ReadOnlyError):
        return (
            f"Redis refuses writes as a read-only replica ({text}): a failover under way, or "
            "--redis-url names a replica instead of the primary"
        )
    if isinstance(exc, redis.exceptions.AuthenticationError) or any(
        mark in text for mark in ("NOAUTH", "WRONGPASS", "authenticat")
    ):
        return f"Redis rejected the credentials of --redis-url ({text})"
    return f"Redis unreachable ({text})"


@dataclass
class Backoff:
    """Capped exponential backoff: ``first``, ×``factor`` per failure, at most ``cap`` seconds."""

    first: float = 0.1
    factor: float = 2.0
    # A failover completes within seconds (Sentinel ~1.5 s, a cluster ~3 s after the node
    # timeout): with a 5 s cap the daemon slept through the promotion for up to 3 s more
    # (benchmarks/bench_failover.py). One PING a second from each replica costs Redis nothing.
    cap: float = 1.0
    _next: float = 0.0

    def delay(self) -> float:
        """The wait before the next attempt (grows until :meth:`reset`)."""
        self._next = self.first if self._next == 0.0 else min(self._next * self.factor, self.cap)
        return self._next

    def reset(self) -> None:
        """After a success: start again from ``first``."""
        self._next = 0.0


def retry_until_back(
    attempt: Callable[[], T],
    wait: Callable[[float], None],
    stop: threading.Event,
    backoff: Backoff | None = None,
) -> tuple[bool, T | None]:
    """Call ``wait(backoff)`` then ``attempt()`` until an attempt raises no outage error;
    ``(True, its result)``, or ``(False, None)`` once ``stop`` is set. Other errors propagate.
    A ``backoff`` the caller keeps across outages, and resets only once a commit lands, bounds
    a Redis that flaps (answers the probe, then refuses the commit, as one at its maxmemory
    does) to one reload per ``cap`` instead of one per ``first``."""
    backoff = backoff if backoff is not None else Backoff()
    while not stop.is_set():
        wait(backoff.delay())
        if stop.is_set():
            break
        try:
            return True, attempt()
        except Exception as exc:
            if not is_outage(exc):
                raise
    return False, None
