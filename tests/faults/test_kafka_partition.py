"""The events producer after a network partition longer than its delivery timeout (a real
tansu broker behind a proxy that stops forwarding, as a lost route does).

kafka-python 3.0's idempotent producer — its default — never sent again after such a
partition: once the broker answered it refreshed its metadata, but every batch waited for
good, and the daemon's outbox grew until a restart (a 150 s partition in the audit; here the
delivery timeout is cut to 3 s so a 9 s partition is enough)."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka_daemon import produce, start, stop, wait_until
from servers.kafka_broker import KafkaBroker
from servers.ports import free_port
from servers.process import skip_not_owned
from servers.proxies import PartitionProxy

from noveld.connectors import kafka_sinks
from noveld.connectors.errors import DeliveryFailed
from noveld.connectors.kafka_sinks import KafkaEvents

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]

SHORT_TIMEOUTS = {"request_timeout_ms": 1500, "delivery_timeout_ms": 3000}
"""Producer timeouts (kafka-python's are 30 s and 120 s) so a test-sized partition outlasts
the delivery timeout: the batches in flight expire, which is what wedged the producer."""


@pytest.fixture
def partitionable() -> Iterator[tuple[KafkaBroker, PartitionProxy]]:
    """A broker that advertises a PartitionProxy's port, so every client goes through it."""
    if os.environ.get("NOVELD_TEST_KAFKA"):
        skip_not_owned("Kafka broker", "NOVELD_TEST_KAFKA", "put behind a proxy")
    broker_port = free_port()
    with PartitionProxy(broker_port) as proxy, KafkaBroker(broker_port, proxy.port) as broker:
        yield broker, proxy


def event(n: int) -> dict[str, Any]:
    """A minimal event: what KafkaEvents needs to key and send it."""
    return {"event_id": f"e{n}-{uuid.uuid4().hex[:6]}", "type": "cluster.born", "cluster_id": n}


def event_ids_on(bootstrap: str, topic: str) -> set[str]:
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    try:
        return {json.loads(m.value)["event_id"] for m in consumer}
    finally:
        consumer.close()


def test_events_flow_again_after_a_partition_longer_than_the_delivery_timeout(
    partitionable: tuple[KafkaBroker, PartitionProxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, proxy = partitionable
    topic = f"events-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic)
    monkeypatch.setattr(kafka_sinks, "PUBLISH_WAIT_S", 1.0)  # the outbox's retry, sooner
    sink = KafkaEvents(broker.bootstrap, topic, SHORT_TIMEOUTS)
    try:
        first = event(0)
        sink.publish([first])
        pending = [event(1)]  # what the outbox holds through the partition
        proxy.partition()
        failures = 0
        until = time.monotonic() + 9
        while time.monotonic() < until:
            with pytest.raises(DeliveryFailed):
                sink.publish(pending)
            failures += 1
        proxy.heal()
        healed = time.monotonic()
        pending.append(event(2))
        delivered_after_s = None
        while time.monotonic() - healed < 30:
            try:
                sink.publish(pending)
            except DeliveryFailed:
                continue
            delivered_after_s = time.monotonic() - healed
            break
        assert failures >= 3
        assert delivered_after_s is not None, "the producer never delivered after the heal"
    finally:
        sink.close()
    on_topic = event_ids_on(broker.bootstrap, topic)
    assert {first["event_id"], *(e["event_id"] for e in pending)} <= on_topic


def test_closing_during_a_partition_ends_the_producer_in_bounded_time(
    partitionable: tuple[KafkaBroker, PartitionProxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kafka-python's close flushes first and, when the flush times out, raises and leaves the
    producer open with its network thread running (and its ``__del__`` prints a traceback at
    exit). The sink's close gives up on the unsent events (the outbox keeps them) and ends
    the producer."""
    broker, proxy = partitionable
    topic = f"events-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic)
    monkeypatch.setattr(kafka_sinks, "PUBLISH_WAIT_S", 1.0)
    sink = KafkaEvents(broker.bootstrap, topic)  # kafka-python's timeouts: the event stays unsent
    sink.publish([event(0)])
    proxy.partition()
    with pytest.raises(DeliveryFailed):
        sink.publish([event(1)])
    started = time.monotonic()
    sink.close()  # raised KafkaTimeoutError before
    assert time.monotonic() - started < kafka_sinks.PRODUCER_MAX_BLOCK_MS / 1000 + 5
    alive = [t.name for t in threading.enumerate() if t.name.startswith("kafka-python-producer")]
    assert alive == []
    proxy.heal()


def scrape(port: int, path: str) -> tuple[int, str]:
    """(status, body) of one of the daemon's HTTP endpoints."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:  # not listening yet
        return 0, ""


def test_a_kafka_outage_shows_in_readyz_and_metrics(
    partitionable: tuple[KafkaBroker, PartitionProxy], redis_url: str
) -> None:
    """/readyz stayed "ready" and every metric froze through a 100 s broker outage; only one
    stderr line told. Now /readyz names it, noveld_kafka_reachable drops to 0, and /healthz
    stays 200 (a liveness restart would not help)."""
    broker, proxy = partitionable
    ns = f"ko{uuid.uuid4().hex[:6]}"
    topic = f"{ns}.in"
    for t in (topic, f"{ns}.events", f"{ns}.dlq"):
        broker.create_topic(t)
    produce(broker.bootstrap, topic, [json.dumps({"id": "a", "text": "storm flood"}).encode()])
    port = free_port()
    proc = start(broker.bootstrap, redis_url, ns, topic, "--metrics-port", str(port))
    try:
        wait_until(lambda: scrape(port, "/readyz")[0] == 200, 60, "ready")
        wait_until(lambda: "noveld_kafka_reachable 1.0" in scrape(port, "/metrics")[1], 30, "up")
        proxy.partition()
        wait_until(lambda: "Kafka does not answer" in scrape(port, "/readyz")[1], 60, "unready")
        assert "noveld_kafka_reachable 0.0" in scrape(port, "/metrics")[1]
        assert scrape(port, "/healthz")[0] == 200
        proxy.heal()
        wait_until(lambda: scrape(port, "/readyz")[0] == 200, 60, "ready again")
        assert "noveld_kafka_reachable 1.0" in scrape(port, "/metrics")[1]
    finally:
        proxy.heal()
        stop(proc, grace=40)
