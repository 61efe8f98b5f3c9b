"""How long a Redis failover stalls the Kafka daemon.

    python benchmarks/bench_failover.py [--topology cluster|sentinel|both] [--repeat 3]
                                        [--rate 400] [--replicas-to-ack 1]

A live feed (``--rate`` documents a second, from ``--data``, in chunks every 50 ms) runs through
``noveld run`` (a subprocess) on a private tansu broker with Redis in the given topology
(tests/servers/): ``cluster``, three shards with a replica each (cluster-node-timeout 2 s);
``sentinel``, a primary, its replica and three sentinels (down-after-milliseconds 1 s). Once the
daemon has committed for a few seconds, the namespace's primary is SIGKILLed. Per run, seconds
after the SIGKILL:

- ``promoted``: the replica answers as the primary (detection and election: Redis's part);
- ``first commit``: the daemon's first commit on the promoted node (adds its backoff, the
  reload and the re-seek: noveld's part);
- ``caught up``: every document produced before the SIGKILL is committed again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis
from kafka import KafkaProducer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import add_data_option, machine  # noqa: E402
from servers.kafka_broker import TEST_SESSION_TIMEOUT_MS, KafkaBroker  # noqa: E402
from servers.ports import unique_name  # noqa: E402
from servers.redis_cluster import failover_topology  # noqa: E402
from servers.redis_server import RedisServer  # noqa: E402

NOVELD = [sys.executable, "-m", "noveld.daemon.cli"]


def committed(server: RedisServer, ns: str) -> int | None:
    """Documents committed on ``server`` (None while it does not answer or is a replica)."""
    try:
        with server.client(socket_timeout=0.5, socket_connect_timeout=0.5) as c:
            if c.info("replication")["role"] != "master":
                return None
            return int(c.hget(f"noveld:{{{ns}}}:counters", "docs") or 0)
    except redis.RedisError:
        return None


class Feed(threading.Thread):
    """Produces ``rate`` documents a second until stopped; ``sent`` counts them."""

    def __init__(self, bootstrap: str, topic: str, lines: list[bytes], rate: int) -> None:
        super().__init__(daemon=True)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        self.topic, self.lines, self.rate = topic, lines, rate
        self.sent = 0
        self.done = threading.Event()

    def run(self) -> None:
        chunk = max(1, self.rate // 20)
        while not self.done.is_set():
            t = time.monotonic()
            for _ in range(chunk):
                self.producer.send(self.topic, value=self.lines[self.sent % len(self.lines)])
                self.sent += 1
            self.producer.flush()
            time.sleep(max(0.0, 0.05 - (time.monotonic() - t)))
        self.producer.close()


def one_run(
    broker: KafkaBroker, kind: str, lines: list[bytes], a: argparse.Namespace
) -> dict[str, float]:
    topic, ns = unique_name("fo-in"), unique_name("fo")
    for t in (topic, f"{ns}.events", f"{ns}.dlq"):
        broker.create_topic(t)
    with failover_topology(kind, ns) as setup:
        url, home, replica = setup.url, setup.home, setup.replica
        proc = subprocess.Popen(
            [
                *NOVELD, "run", "--kafka-bootstrap", broker.bootstrap, "--input-topic", topic,
                "--events-topic", f"{ns}.events", "--dlq-topic", f"{ns}.dlq", "--group", ns,
                "--redis-url", url, "--namespace", ns, "--batch-size", "256",
                "--session-timeout-ms", str(TEST_SESSION_TIMEOUT_MS),
                "--redis-replicas-to-ack", str(a.replicas_to_ack), "--quiet",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "NOVELD_BATCH__MAX_WAIT_MS": "100"},
        )  # fmt: skip
        feed = Feed(broker.bootstrap, topic, lines, a.rate)
        feed.start()
        try:
            deadline = time.monotonic() + 60
            while (committed(home, ns) or 0) < 3 * a.rate:
                assert time.monotonic() < deadline, "the daemon did not start committing"
                time.sleep(0.05)
            produced_before = feed.sent
            home.kill(signal.SIGKILL)
            t0 = time.monotonic()
            promoted = first = caught = None
            base = None
            while caught is None and time.monotonic() - t0 < 120:
                now = committed(replica, ns)
                if now is not None:
                    if promoted is None:
                        promoted, base = time.monotonic() - t0, now
                    elif first is None and now != base:
                        first = time.monotonic() - t0
                    if first is not None and now >= produced_before:
                        caught = time.monotonic() - t0
                time.sleep(0.02)
        finally:
            feed.done.set()
            feed.join()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return {"promoted": promoted or float("nan"), "first commit": first or float("nan"),
            "caught up": caught or float("nan")}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--topology", choices=["cluster", "sentinel", "both"], default="both")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--rate", type=int, default=400, help="documents a second in the live feed")
    p.add_argument("--replicas-to-ack", type=int, default=1)
    add_data_option(p)
    a = p.parse_args()
    lines = [
        json.dumps({"id": f"d{i}", "text": json.loads(line)["text"]}).encode()
        for i, line in enumerate(a.data.read_text().splitlines())
    ]
    print(f"machine: {machine()}")
    kinds = ["cluster", "sentinel"] if a.topology == "both" else [a.topology]
    with KafkaBroker() as broker:
        for kind in kinds:
            for i in range(a.repeat):
                r = one_run(broker, kind, lines, a)
                print(
                    f"{kind} run {i + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in r.items()),
                    flush=True,
                )


if __name__ == "__main__":
    main()
