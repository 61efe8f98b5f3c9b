"""The Kafka daemon as a subprocess against a real broker and Redis, for the integration tests
that run it: its topics, its start and stop, what it committed and what it published."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

import redis
from cli_runner import NOVELD
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic
from servers.kafka_broker import TEST_SESSION_TIMEOUT_MS


def consume_all(bootstrap: str, topic: str, at_least: int, timeout: float = 30) -> list[Any]:
    """Every message of ``topic`` from its start: once ``at_least`` came, or after
    ``timeout`` seconds with what came."""
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=2000,
    )  # fmt: skip
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out += list(consumer)
        if len(out) >= at_least:
            break
    consumer.close()
    return out


def wait_for_docs(
    client: redis.Redis, ns: str, n: int, proc: subprocess.Popen[str], timeout_s: float = 120
) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    counters: dict[str, int] = {}
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        counters = {
            k.decode(): int(v) for k, v in client.hgetall(f"noveld:{{{ns}}}:counters").items()
        }
        if counters.get("docs", 0) + counters.get("invalid", 0) >= n:
            return counters
        time.sleep(0.2)
    raise AssertionError(f"daemon did not drain the topic in time: {counters}")


def create_topics(bootstrap: str, ns: str, input_partitions: int = 1) -> dict[str, str]:
    """The namespace's input, events and DLQ topics (one partition each unless told), by role."""
    topics = {"in": f"{ns}.in", "events": f"{ns}.events", "dlq": f"{ns}.dlq"}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics(
        [NewTopic(t, input_partitions if role == "in" else 1, 1) for role, t in topics.items()]
    )
    admin.close()
    return topics


def start_daemon(
    bootstrap: str,
    redis_url: str,
    ns: str,
    topics: dict[str, str],
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *NOVELD,
            "run",
            "--kafka-bootstrap",
            bootstrap,
            "--input-topic",
            topics["in"],
            "--events-topic",
            topics["events"],
            "--dlq-topic",
            topics["dlq"],
            "--group",
            ns,
            "--redis-url",
            redis_url,
            "--namespace",
            ns,
            "--session-timeout-ms",
            str(TEST_SESSION_TIMEOUT_MS),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NOVELD_BATCH__MAX_WAIT_MS": "200", **(env or {})},
    )


def stop(proc: subprocess.Popen[str]) -> str:
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert time.monotonic() - t0 < 20
    assert "Traceback" not in err
    assert "noveld: stopped by signal" in err  # the summary does not say "done"
    return err
