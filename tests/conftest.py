"""Shared fixtures: real servers from tests/servers/, or existing ones named by
NOVELD_TEST_REDIS / NOVELD_TEST_KAFKA."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers.kafka_broker import KAFKA_ENV, KafkaBroker
from servers.redis_server import REDIS_ENV, RedisServer


def _flushall(url: str) -> None:
    with redis.Redis.from_url(url) as client:
        client.flushall()


@pytest.fixture(scope="session")
def _shared_redis() -> Iterator[RedisServer]:
    """One server for the whole session (started on first use)."""
    external = os.environ.get(REDIS_ENV)
    if external:
        yield RedisServer.external(external).start()
        return
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(_shared_redis: RedisServer) -> str:
    """URL of the session-wide Redis-protocol server, emptied (FLUSHALL) before each test."""
    _flushall(_shared_redis.url)
    return _shared_redis.url


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh server owned by this test alone, which it may kill, SIGSTOP and restart.
    Under NOVELD_TEST_REDIS: the external server, emptied; ``kill``/``restart`` then skip."""
    external = os.environ.get(REDIS_ENV)
    if external:
        server = RedisServer.external(external).start()
        _flushall(server.url)
        yield server
        return
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A session-wide Kafka-protocol broker (tansu, in memory), or NOVELD_TEST_KAFKA's.
    Shared: tests use their own topic and group names (``servers.ports.unique_name``)."""
    external = os.environ.get(KAFKA_ENV)
    if external:
        yield KafkaBroker.external(external).start()
        return
    with KafkaBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: KafkaBroker) -> str:
    """host:port of the session-wide broker."""
    return kafka_broker.bootstrap
