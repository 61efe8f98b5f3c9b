"""Clients for a Redis URL: a plain server, a cluster (found by asking the server) or the primary
a set of Sentinels names; a namespace's keys share one hash slot, so any of them will do."""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster

from noveld.state.redis_url import SentinelURL, is_sentinel_url, parse_sentinel_url


def connect(
    url: str, timeout_s: float = 5.0, socket_timeout_s: float | None = None
) -> redis.Redis | RedisCluster:
    """A client for ``url``: a cluster client when the server runs in cluster mode (``INFO
    cluster``), so a cluster's configuration endpoint works as given; the Sentinel-managed
    primary for a ``redis+sentinel://`` URL; else a plain one. All of a namespace's keys share
    one hash slot, so its scripts and transactions stay on one node. Raises
    ``redis.RedisError`` when the server does not answer, ``ValueError`` for a bad URL.

    ``socket_timeout_s`` bounds the wait for any reply: without it a hung server, or a network
    that silently drops packets, blocks the caller until TCP gives up (hours)."""
    if is_sentinel_url(url):
        return sentinel_primary(parse_sentinel_url(url), timeout_s, socket_timeout_s)
    client = redis.Redis.from_url(
        url, socket_connect_timeout=timeout_s, socket_timeout=socket_timeout_s
    )
    try:
        clustered = bool(int(client.info("cluster").get("cluster_enabled", 0)))
    except redis.ResponseError:  # INFO renamed or disabled: take the server as it presents
        clustered = False
    if not clustered:
        return client
    client.close()
    return RedisCluster.from_url(  # reads the slot map
        url, socket_connect_timeout=timeout_s, socket_timeout=socket_timeout_s
    )


def sentinel_primary(
    target: SentinelURL, timeout_s: float = 5.0, socket_timeout_s: float | None = None
) -> redis.Redis:
    """A client of the primary the sentinels name for ``target.service``. Its connections ask
    the sentinels again whenever they (re)connect, so after a failover the daemon's outage
    ride-out lands on the promoted replica; a demoted primary's READONLY reply also drops the
    connection. Raises ``MasterNotFoundError`` (a ``ConnectionError``) when no sentinel
    answers or none knows the service."""
    from redis.sentinel import MasterNotFoundError, Sentinel

    # a sentinel that does not answer within the timeout is skipped, not waited for
    sentinel_kwargs: dict[str, Any] = {
        "socket_connect_timeout": timeout_s,
        "socket_timeout": timeout_s,
    }
    if target.sentinel_password is not None:
        sentinel_kwargs["password"] = target.sentinel_password
        sentinel_kwargs["username"] = target.sentinel_username
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels), sentinel_kwargs=sentinel_kwargs, socket_connect_timeout=timeout_s
    )
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        target.service,
        db=target.db,
        username=target.username,
        password=target.password,
        socket_timeout=socket_timeout_s,
    )
    try:
        client.ping()
    except MasterNotFoundError as exc:  # its message dumps every sentinel's connection repr
        why = "; ".join(
            _sentinel_trouble(s, a)
            for s, a in zip(sentinel.sentinels, target.sentinels, strict=True)
        )
        raise MasterNotFoundError(
            f"no sentinel answered with a primary for service {target.service!r} ({why})"
        ) from exc
    return client


def _sentinel_trouble(sentinel: redis.Redis, address: tuple[str, int]) -> str:
    """What one sentinel says when asked for the service: its error, or that it answers."""
    where = f"{address[0]}:{address[1]}"
    try:
        sentinel.ping()
    except redis.RedisError as exc:
        return f"{where}: {exc}"
    return f"{where}: answers, but does not name a primary for it"
