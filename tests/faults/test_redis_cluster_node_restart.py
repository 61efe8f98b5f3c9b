"""Recovery on a Redis Cluster: SIGKILL of the node that holds the namespace's hash slot,
mid-stream. The daemon pauses and does not crash; when the node is back (same port, its AOF and
cluster config) and the cluster answers again, it reloads and re-seeks: every document counted
exactly once, as on a single server (test_redis_outage_recovery.py)."""

from __future__ import annotations

import json
import signal
import time

import pytest
from cli_runner import redis_state
from kafka_daemon import committed_docs, produce, start, stop, wait_until
from redis.exceptions import RedisError
from servers.kafka_broker import KafkaBroker
from servers.ports import unique_name
from servers.redis_cluster import RedisClusterServers

from noveld.synth import SynthConfig, generate

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]
N = 6000


def committed_on(url: str, ns: str) -> int:
    """Committed documents, 0 while the node still answers CLUSTERDOWN after its restart."""
    try:
        return committed_docs(url, ns)
    except RedisError:
        return 0


def test_the_namespaces_cluster_node_killed_and_restarted(kafka_broker: KafkaBroker) -> None:
    topic, ns = unique_name("g4c-in"), unique_name("g4c")
    for t in (topic, f"{ns}.events", f"{ns}.dlq"):
        kafka_broker.create_topic(t)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=N, seed=9))]
    produce(kafka_broker.bootstrap, topic, docs[: N // 2])
    with RedisClusterServers(3) as cluster:
        home = cluster.node_of(f"noveld:{{{ns}}}:meta")
        entry = next(s for s in cluster.servers if s is not home)  # the URL the daemon gets
        proc = start(kafka_broker.bootstrap, entry.url, ns, topic, "--batch-size", "50")
        wait_until(lambda: committed_docs(home.url, ns) >= N // 4, 60, "first commits")
        home.kill(signal.SIGKILL)
        produce(kafka_broker.bootstrap, topic, docs[N // 2 :])  # input keeps arriving
        time.sleep(3)  # a few seconds down: retries with backoff, no exit
        assert proc.poll() is None, proc.communicate()[1]
        home.restart()
        wait_until(lambda: committed_on(home.url, ns) >= N, 120, "the topic to drain")
        err = stop(proc)
        info = redis_state(entry.url, ns)
    assert info["docs"] == N  # nothing lost, nothing counted twice
    assert info["offsets"] == {f"{topic}:0": N}
    assert "Redis unreachable" in err and "Redis is back" in err
