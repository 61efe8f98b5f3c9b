"""Shared fixtures: real servers from tests/harness.py (or NOVELD_TEST_REDIS)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import KafkaBroker, RedisServer


@pytest.fixture(scope="session")
def _shared_redis() -> Iterator[str]:
    external = os.environ.get("NOVELD_TEST_REDIS")
    if external:
        yield external
        return
    with RedisServer() as server:
        yield server.url


@pytest.fixture
def redis_url(_shared_redis: str) -> str:
    """URL of a session-wide Redis-protocol server, emptied before each test."""
    redis.Redis.from_url(_shared_redis).flushall()
    return _shared_redis


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A server owned by this test alone (fault tests kill and restart it)."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """host:port of a session-wide Kafka-protocol broker (or NOVELD_TEST_KAFKA)."""
    external = os.environ.get("NOVELD_TEST_KAFKA")
    if external:
        yield external
        return
    with KafkaBroker() as broker:
        yield broker.bootstrap
