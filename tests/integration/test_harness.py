"""The test servers (tests/servers/) are real: Redis runs Lua and keeps fsynced writes across
SIGKILL; the Kafka broker does topics, produce, group consume and committed offsets."""

from __future__ import annotations

import os
import signal
import time

import pytest
import redis
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from servers.kafka_broker import TEST_HEARTBEAT_INTERVAL_MS, TEST_SESSION_TIMEOUT_MS, KafkaBroker
from servers.ports import unique_name
from servers.redis_server import RedisServer, supports_waitaof

pytestmark = pytest.mark.integration


def test_redis_round_trip_and_lua(redis_url: str) -> None:
    """SET/GET and EVAL work, and the shared server starts each test empty."""
    with redis.Redis.from_url(redis_url) as c:
        assert c.dbsize() == 0
        assert c.set("k", "v")
        assert c.get("k") == b"v"
        script = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCRBY', KEYS[1], 2)"
        assert c.eval(script, 1, "n", "40") == 42
        assert c.get("n") == b"42"


@pytest.mark.faults
def test_aof_survives_sigkill_and_restart(redis_server: RedisServer) -> None:
    """Writes acknowledged by WAITAOF (or 1.5 s of everysec) are back after SIGKILL + restart,
    on the same URL."""
    url, old_pid = redis_server.url, redis_server.pid
    with redis_server.client() as c:
        c.mset({f"key:{i}": i for i in range(100)})
        assert c.eval("return redis.call('INCR', KEYS[1])", 1, "counter") == 1
        if supports_waitaof(c):
            assert c.waitaof(1, 0, 1000) == [1, 0]
        else:
            time.sleep(1.5)  # appendfsync everysec
    redis_server.kill(signal.SIGKILL)
    assert not redis_server.running
    assert old_pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid, 0)  # exactly our process is gone (and reaped)
    with (
        redis.Redis.from_url(url, socket_connect_timeout=0.5) as c,
        pytest.raises(redis.ConnectionError),
    ):
        c.ping()
    redis_server.restart()
    assert redis_server.url == url and redis_server.pid != old_pid
    with redis_server.client() as c:
        assert c.mget([f"key:{i}" for i in range(100)]) == [str(i).encode() for i in range(100)]
        assert c.get("counter") == b"1"


@pytest.mark.faults
def test_sigstop_pauses_and_sigcont_resumes(redis_server: RedisServer) -> None:
    """kill(SIGSTOP) leaves the process alive but silent; SIGCONT brings it back."""
    redis_server.kill(signal.SIGSTOP)
    try:
        assert redis_server.running
        with redis_server.client(socket_timeout=0.3) as c, pytest.raises(redis.TimeoutError):
            c.ping()
    finally:
        redis_server.kill(signal.SIGCONT)
    with redis_server.client() as c:
        assert c.ping()


def test_failed_start_reports_the_server_log() -> None:
    """A server that cannot start fails fast with its own log in the error."""
    server = RedisServer(extra_args=["--no-such-directive", "1"])
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match="no-such-directive"):
            server.start(timeout=10)
    finally:
        server.stop()
    assert time.monotonic() - started < 5


def test_external_servers_are_never_killed() -> None:
    """Servers named by NOVELD_TEST_REDIS/KAFKA are not ours: kill/restart skip the test."""
    redis_ext = RedisServer.external("redis://127.0.0.1:1/0")
    kafka_ext = KafkaBroker.external("127.0.0.1:1")
    assert redis_ext.url == "redis://127.0.0.1:1/0" and kafka_ext.bootstrap == "127.0.0.1:1"
    for action in (redis_ext.kill, redis_ext.restart, kafka_ext.kill):
        with pytest.raises(pytest.skip.Exception, match="may not"):
            action()
    redis_ext.stop()
    kafka_ext.stop()


def _consumer(bootstrap: str, topic: str, group: str) -> KafkaConsumer:
    return KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=TEST_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=TEST_HEARTBEAT_INTERVAL_MS,
        consumer_timeout_ms=20_000,
    )


def test_kafka_produce_group_consume_and_commit(kafka_broker: KafkaBroker) -> None:
    """Topic creation, produce, group consume with manual commit, committed offsets read back
    (by the consumer and by the admin API), and a new member resumes after them."""
    topic, group = unique_name("harness"), unique_name("g")
    partitions = [TopicPartition(topic, p) for p in (0, 1)]
    kafka_broker.create_topic(topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    for i in range(10):
        producer.send(topic, key=str(i % 2).encode(), value=f"m{i}".encode())
    producer.flush()

    consumer = _consumer(kafka_broker.bootstrap, topic, group)
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 10:
            break
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(10))
    consumer.commit()
    committed = {tp.partition: consumer.committed(tp) for tp in partitions}
    consumer.close()
    assert sum(c or 0 for c in committed.values()) == 10

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    try:
        if hasattr(admin, "list_group_offsets"):  # kafka-python ≥ 3
            offsets = admin.list_group_offsets(group)[group]
        else:
            offsets = admin.list_consumer_group_offsets(group)
    finally:
        admin.close()
    assert {tp.partition: meta.offset for tp, meta in offsets.items()} == committed

    producer.send(topic, key=b"0", value=b"after-commit")
    producer.flush()
    producer.close()
    resumed = _consumer(kafka_broker.bootstrap, topic, group)
    try:
        assert next(iter(resumed)).value == b"after-commit"
    finally:
        resumed.close()
