"""The Redis-outage policy: which errors mean "retry later", the capped backoff, the retry loop."""

from __future__ import annotations

import threading

import pytest
import redis

from noveld.daemon.outage import Backoff, is_outage, outage_reason, retry_until_back


def test_connection_failures_are_outages_and_bugs_are_not() -> None:
    assert is_outage(redis.exceptions.ConnectionError("refused"))
    assert is_outage(redis.exceptions.TimeoutError("slow"))
    assert is_outage(redis.exceptions.BusyLoadingError("loading AOF"))
    assert not is_outage(redis.exceptions.ResponseError("WRONGTYPE"))
    assert not is_outage(ValueError("bug"))


def test_a_cluster_that_is_down_or_failing_over_is_an_outage() -> None:
    assert is_outage(redis.exceptions.ClusterDownError("CLUSTERDOWN The cluster is down"))
    assert is_outage(redis.exceptions.MasterDownError("MASTERDOWN"))
    assert is_outage(redis.exceptions.TryAgainError("TRYAGAIN"))
    assert is_outage(redis.exceptions.ClusterError("TTL exhausted."))
    assert is_outage(redis.exceptions.SlotNotCoveredError("slot 7 not covered"))
    assert not is_outage(redis.exceptions.MovedError("7 127.0.0.1:7001"))  # followed, not seen


def test_each_incident_is_named_for_the_operator() -> None:
    oom = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'")
    assert is_outage(oom)  # waited out: freeing memory or raising maxmemory ends it
    assert outage_reason(oom).startswith("Redis is out of memory")
    read_only = redis.exceptions.ReadOnlyError("You can't write against a read only replica.")
    assert "read-only replica" in outage_reason(read_only)
    assert "--redis-url names a replica" in outage_reason(read_only)
    for auth in (
        redis.exceptions.AuthenticationError("invalid username-password pair"),
        redis.exceptions.ConnectionError("HELLO must be called with the client authenticated"),
        redis.exceptions.ResponseError("NOAUTH Authentication required."),
    ):
        assert outage_reason(auth).startswith("Redis rejected the credentials"), auth
    refused = redis.exceptions.ConnectionError("Error 111 connecting. Connection refused.")
    assert outage_reason(refused) == f"Redis unreachable ({refused})"


def test_backoff_grows_to_its_cap_and_resets() -> None:
    b = Backoff(first=0.1, factor=2.0, cap=1.0)
    delays = [b.delay() for _ in range(6)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    b.reset()
    assert b.delay() == 0.1


def test_default_backoff_asks_at_least_once_a_second() -> None:
    """A failover is over in seconds; a longer wait between retries is stall after it
    (benchmarks/bench_failover.py measured up to 3 s more with a 5 s cap)."""
    b = Backoff()
    delays = [b.delay() for _ in range(20)]
    assert max(delays) <= 1.0
    assert delays[0] <= 0.1  # a blip (a reconnect) costs next to nothing


def test_retry_until_back_waits_between_outage_errors_and_returns_the_result() -> None:
    waits: list[float] = []
    errors = [redis.exceptions.ConnectionError("refused"), redis.exceptions.TimeoutError("slow")]

    def attempt() -> str:
        if errors:
            raise errors.pop(0)
        return "back"

    assert retry_until_back(attempt, waits.append, threading.Event()) == (True, "back")
    assert waits == [0.1, 0.2, 0.4]  # a wait before each of the three attempts


def test_retry_until_back_stops_on_the_signal_and_lets_bugs_through() -> None:
    stop = threading.Event()

    def refused() -> None:
        raise redis.exceptions.ConnectionError("refused")

    def stop_on_third(seconds: float) -> None:
        if seconds >= 0.4:
            stop.set()

    assert retry_until_back(refused, stop_on_third, stop) == (False, None)

    def bug() -> None:
        raise ValueError("bug")

    with pytest.raises(ValueError, match="bug"):
        retry_until_back(bug, lambda s: None, threading.Event())


def test_a_redis_that_answers_but_refuses_writes_is_not_back_yet() -> None:
    """A demoted primary or a Redis at its maxmemory answers PING and reads: the daemon must
    not reload the state (and fail the next commit, and reload again) until writes go through."""
    import io

    from noveld.daemon.redis_wait import wait_for_redis

    class Store:
        probes = 0

        def ping(self) -> None: ...

        def probe_write(self) -> None:
            self.probes += 1
            if self.probes <= 3:
                raise redis.exceptions.ReadOnlyError("You can't write against a read only replica.")

        def restore_claims(self) -> list[str]:
            return []

    class Pipeline:
        reloads = 0

        def reload(self) -> None:
            self.reloads += 1

    store, pipeline, out = Store(), Pipeline(), io.StringIO()
    exc = redis.exceptions.ReadOnlyError("You can't write against a read only replica.")
    lost = wait_for_redis(exc, pipeline, store, None, threading.Event(), out, idle=lambda s: None)  # type: ignore[arg-type]
    assert lost == [] and store.probes == 4 and pipeline.reloads == 1
    assert "read-only replica" in out.getvalue()


def test_a_backoff_kept_across_outages_goes_on_growing_until_reset() -> None:
    """The run keeps one backoff until a commit lands: a Redis that comes back only to fail
    the next commit is asked less and less often, not ten times a second."""
    waits: list[float] = []
    backoff = Backoff()

    def back_at_once() -> str:
        return "back"

    for _ in range(3):  # three outages, no commit landing in between
        retry_until_back(back_at_once, waits.append, threading.Event(), backoff)
    assert waits == [0.1, 0.2, 0.4]
    backoff.reset()  # a commit landed
    retry_until_back(back_at_once, waits.append, threading.Event(), backoff)
    assert waits[-1] == 0.1
