"""The harness's Redis server is real: Lua runs, and AOF survives SIGKILL."""

from __future__ import annotations

import pytest
import redis
from harness import RedisServer

pytestmark = pytest.mark.integration


def test_lua_round_trip(redis_url: str) -> None:
    c = redis.Redis.from_url(redis_url)
    assert (
        c.eval(
            "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])", 1, "k", "v"
        )
        == b"v"
    )


@pytest.mark.faults
def test_acknowledged_writes_survive_sigkill(redis_server: RedisServer) -> None:
    c = redis.Redis.from_url(redis_server.url)
    c.set("durable", "yes")
    c.execute_command("WAITAOF", 1, 0, 2000)  # fsynced locally before we kill
    redis_server.restart()
    assert redis.Redis.from_url(redis_server.url).get("durable") == b"yes"
