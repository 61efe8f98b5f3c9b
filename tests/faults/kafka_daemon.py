"""Helpers for fault tests of the Kafka-mode daemon: start it as a subprocess, observe its
committed state through the public CLI (`noveld state show --json`) and the Kafka topics."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable

import redis
from cli_runner import NOVELD
from kafka import KafkaProducer
from servers.kafka_broker import TEST_SESSION_TIMEOUT_MS

STARTED: list[subprocess.Popen[str]] = []
"""Every daemon a fault test started; ``conftest.reap_daemons`` kills those still running when
the test ends, so a failed assertion never leaves a daemon behind."""


def tracked(proc: subprocess.Popen[str]) -> subprocess.Popen[str]:
    """``proc``, recorded for :data:`STARTED`'s clean-up."""
    STARTED.append(proc)
    return proc


def start(
    bootstrap: str, redis_url: str, ns: str, topic: str, *extra: str
) -> subprocess.Popen[str]:
    """The daemon on ``topic`` with group = namespace = ``ns`` and its own events/DLQ topics."""
    return tracked(subprocess.Popen(
        [
            *NOVELD, "run", "--kafka-bootstrap", bootstrap, "--input-topic", topic,
            "--events-topic", f"{ns}.events", "--dlq-topic", f"{ns}.dlq", "--group", ns,
            "--redis-url", redis_url, "--namespace", ns, "--batch-size", "100",
            "--session-timeout-ms", str(TEST_SESSION_TIMEOUT_MS), *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NOVELD_BATCH__MAX_WAIT_MS": "100"},
    ))  # fmt: skip


def committed_docs(redis_url: str, ns: str) -> int:
    """Valid + invalid documents committed so far (polled often, so read directly)."""
    c = redis.Redis.from_url(redis_url).hgetall(f"noveld:{{{ns}}}:counters")
    return sum(int(c.get(k, 0)) for k in (b"docs", b"invalid"))


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for v in values:
        producer.send(topic, value=v)
    producer.flush()
    producer.close()


def stop(proc: subprocess.Popen[str], grace: float = 20.0) -> str:
    """SIGTERM; the daemon must exit 0 within ``grace`` seconds, without a traceback."""
    import signal

    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=grace + 10)
    assert proc.returncode == 0, err
    assert time.monotonic() - t0 < grace, f"took {time.monotonic() - t0:.1f} s to stop"
    assert "Traceback" not in err
    return err


class SteadyFeed(threading.Thread):
    """Sends ``docs`` round-robin over the topic's ``partitions``, 100 at a time with a
    ``pause``, cycling through them until :attr:`enough` is set — all of them at least once —
    unless :attr:`halt` is set first or ``max_rounds`` passes were sent: replicas that start
    late on a slow machine still meet a stream that grows while the test watches them.
    :attr:`sent` counts the records sent."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        docs: list[bytes],
        partitions: int = 2,
        pause: float = 0.1,
        max_rounds: int | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        self.topic, self.docs, self.partitions = topic, docs, partitions
        self.pause, self.max_rounds = pause, max_rounds
        self.enough = threading.Event()
        self.halt = threading.Event()
        self.sent = 0

    def run(self) -> None:
        docs, i = self.docs, 0
        while not self.halt.is_set() and (i < len(docs) or not self.enough.is_set()):
            if self.max_rounds is not None and i >= self.max_rounds * len(docs):
                break
            self.producer.send(self.topic, value=docs[i % len(docs)], partition=i % self.partitions)
            self.sent += 1
            i += 1
            if i % 100 == 0:
                self.producer.flush()
                time.sleep(self.pause)
        self.producer.flush()
