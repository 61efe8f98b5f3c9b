"""End-to-end production mode: Kafka topic → `noveld run` (subprocess) → Redis + events topic.

    python benchmarks/bench_kafka_e2e.py [--data FILE] [--times 5] [--batch-size 500]

Starts a private tansu broker and Redis-protocol server (tests/harness.py), produces the data,
starts the daemon and measures the time from its first committed batch until the topic is
drained (so consumer-group join time is excluded and reported separately).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import DEFAULT_DATA, machine  # noqa: E402
from harness import TEST_SESSION_TIMEOUT_MS, KafkaBroker, RedisServer  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--times", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=500)
    a = p.parse_args()
    lines = [line for line in a.data.read_bytes().splitlines() if line.strip()] * a.times
    print(f"machine: {machine()}")
    with KafkaBroker() as broker, RedisServer() as server:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(t, 1, 1) for t in ("in", "events", "dlq")])
        admin.close()
        t0 = time.perf_counter()
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5, batch_size=256 * 1024
        )
        for line in lines:
            producer.send("in", value=line)
        producer.flush()
        producer.close()
        print(f"produced {len(lines):,} docs in {time.perf_counter() - t0:.1f} s")
        client = redis.Redis.from_url(server.url)
        cmd = [
            sys.executable,
            "-m",
            "noveld.daemon.cli",
            "run",
            "--quiet",
            "--kafka-bootstrap",
            broker.bootstrap,
            "--input-topic",
            "in",
            "--events-topic",
            "events",
            "--dlq-topic",
            "dlq",
            "--redis-url",
            server.url,
            "--namespace",
            "bench",
            "--batch-size",
            str(a.batch_size),
            "--session-timeout-ms",
            str(TEST_SESSION_TIMEOUT_MS),
        ]
        t_start = time.perf_counter()
        proc = subprocess.Popen(cmd, env={**os.environ, "NOVELD_BATCH__MAX_WAIT_MS": "100"})
        first_seen = None
        done = 0
        while done < len(lines):
            done = int(client.hget("noveld:{bench}:counters", "docs") or 0)
            if done and first_seen is None:
                first_seen = (time.perf_counter(), done)
            time.sleep(0.05)
        t_end = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert first_seen is not None
        t_first, n_first = first_seen
        rate = (done - n_first) / (t_end - t_first)
        print(f"start-up incl. group join: {t_first - t_start:.1f} s")
        print(
            f"drained {done:,} docs; steady state {rate:,.0f} docs/s "
            f"(batch {a.batch_size}, commit every batch)"
        )


if __name__ == "__main__":
    main()
