"""Fencing of a stale writer: two replicas in one consumer group share one namespace; one is
SIGSTOPped past its session timeout while documents keep arriving, then resumed. The other takes
over its partition (bumping the fencing epoch); the stopped one's stale batch is refused, it
reloads the shared state and carries on. Nothing is lost or counted twice. The paused replica
reaches Redis through a proxy that holds its next commit in flight, so it is always paused with
a batch it read before the takeover: the stale commit happens on every run."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from cli_runner import redis_state
from kafka_daemon import SteadyFeed, start, wait_until
from servers.kafka_broker import TEST_SESSION_TIMEOUT_MS, KafkaBroker
from servers.ports import free_port, unique_name
from servers.process import skip_not_owned
from servers.proxies import PartitionProxy
from servers.redis_server import REDIS_ENV

import noveld
from noveld.synth import SynthConfig, generate

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]


def replica(bootstrap: str, redis_url: str, ns: str, port: int) -> subprocess.Popen[str]:
    """One replica of the group: the fault tests' daemon on ``{ns}.in``, with metrics."""
    return start(bootstrap, redis_url, ns, f"{ns}.in", "--batch-size", "200",
                 "--metrics-port", str(port))  # fmt: skip


def fenced_total(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("noveld_fenced_commits_total "):
            return float(line.split()[1])
    raise AssertionError("noveld_fenced_commits_total not exported")


def offsets(redis_url: str, ns: str) -> dict[str, int]:
    """Committed next offsets (read straight from the store's offsets hash: polled often)."""
    raw = redis.Redis.from_url(redis_url).hgetall(f"noveld:{{{ns}}}:offsets")
    return {k.decode(): int(v) for k, v in raw.items()}


def committed_docs(redis_url: str, ns: str) -> int:
    return int(redis.Redis.from_url(redis_url).hget(f"noveld:{{{ns}}}:counters", "docs") or 0)


def commit_script_sha() -> bytes:
    """The SHA1 that names the store's commit script in EVALSHA (found wherever it lives)."""
    script = next(Path(noveld.__file__).parent.rglob("commit.lua"))
    return hashlib.sha1(script.read_bytes()).hexdigest().encode()


@pytest.fixture
def proxied_redis(redis_url: str) -> Iterator[tuple[str, PartitionProxy]]:
    """The test's Redis behind a :class:`PartitionProxy`: its URL through the proxy, and the
    proxy."""
    parts = urlsplit(redis_url)
    if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
        skip_not_owned("Redis server", REDIS_ENV, "put behind a proxy")
    with PartitionProxy(parts.port) as proxy:
        netloc = f"{parts.netloc.rsplit(':', 1)[0]}:{proxy.port}"
        yield urlunsplit(parts._replace(netloc=netloc)), proxy
        proxy.heal()


def test_a_paused_replica_is_fenced_and_nothing_counts_twice(
    kafka_broker: KafkaBroker, redis_url: str, proxied_redis: tuple[str, PartitionProxy]
) -> None:
    a_redis_url, proxy = proxied_redis
    ns = unique_name("g6")
    for suffix, parts in (("in", 2), ("events", 1), ("dlq", 1)):
        kafka_broker.create_topic(f"{ns}.{suffix}", partitions=parts)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=6000, seed=6))]
    # at least the 6,000 documents, and on (cycling through them) until the takeover has been
    # seen: a partition that no longer grows could not show the other replica moving it forward
    feeder = SteadyFeed(kafka_broker.bootstrap, f"{ns}.in", docs)
    ports = [free_port(), free_port()]
    a = replica(kafka_broker.bootstrap, a_redis_url, ns, ports[0])
    b = replica(kafka_broker.bootstrap, redis_url, ns, ports[1])
    feeder.start()
    try:
        # both partitions committed: each replica owns one (or one owns both; then the pause
        # below still has to hand everything to the other)
        wait_until(lambda: len(offsets(redis_url, ns)) == 2, 60, "both partitions committed")
        epochs_before = redis.Redis.from_url(redis_url).hgetall(f"noveld:{{{ns}}}:epochs")
        # A's next commit stays in the proxy: A is paused holding a batch it read before the
        # takeover (once the group is balanced, A owns a partition and commits within seconds)
        proxy.partition_at(commit_script_sha())
        assert proxy.holding.wait(TEST_SESSION_TIMEOUT_MS / 1000 + 60), "A never committed"
        a.send_signal(signal.SIGSTOP)
        before = offsets(redis_url, ns)
        # past A's session timeout B must own both partitions and move both forward
        wait_until(
            lambda: all(v > before[k] for k, v in offsets(redis_url, ns).items()),
            TEST_SESSION_TIMEOUT_MS / 1000 + 30,
            "the other replica to take over every partition",
        )
        feeder.enough.set()
        epochs_after = redis.Redis.from_url(redis_url).hgetall(f"noveld:{{{ns}}}:epochs")
        assert any(int(epochs_after[k]) > int(v) for k, v in epochs_before.items())
        proxy.heal()  # the held commit reaches Redis now, with A's superseded epoch
        a.send_signal(signal.SIGCONT)
        wait_until(
            lambda: a.poll() is not None or fenced_total(ports[0]) > 0,
            TEST_SESSION_TIMEOUT_MS / 1000 + 30,
            "A's stale commit to be refused",
        )
        if a.poll() is not None or b.poll() is not None:  # nobody crashed
            crashed = a if a.poll() is not None else b
            raise AssertionError(
                f"replica exited {crashed.poll()}: {crashed.communicate()[1][-3000:]}"
            )
        fenced = fenced_total(ports[0])
        feeder.join()
        wait_until(
            lambda: committed_docs(redis_url, ns) == feeder.sent,
            90,
            f"all {feeder.sent} documents committed",
        )
    finally:
        feeder.halt.set()
        feeder.join()
        proxy.heal()
        for p in (a, b):
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
    errs = []
    for p in (a, b):
        _, err = p.communicate(timeout=60)
        errs.append(err)
        assert p.returncode == 0, err
        assert "Traceback" not in err
    final = redis_state(redis_url, ns)
    assert final["docs"] == feeder.sent  # nothing lost, nothing counted twice
    assert sum(offsets(redis_url, ns).values()) == feeder.sent
    assert fenced  # A's stale batch was refused: it said so and reloaded
    assert "reloaded the shared state" in errs[0]
