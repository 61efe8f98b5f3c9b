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


def test_kafka_produce_consume_and_commit_in_a_group(kafka_bootstrap: str) -> None:
    """The broker speaks enough Kafka for noveld: topics, produce, group consume, offsets."""
    import uuid

    from harness import TEST_SESSION_TIMEOUT_MS
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for i in range(10):
        producer.send(topic, key=str(i % 2).encode(), value=f"m{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id="g",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=TEST_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=1000,
        consumer_timeout_ms=20000,
    )
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 10:
            break
    consumer.commit()
    committed = sum(consumer.committed(TopicPartition(topic, p)) or 0 for p in (0, 1))
    consumer.close()
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(10))
    assert committed == 10
