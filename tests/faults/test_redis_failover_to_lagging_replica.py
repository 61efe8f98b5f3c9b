"""Recovery from a failover: Redis whose primary has a replica that takes over, as managed services
(a Redis Cluster with replicas) and self-hosted Sentinel deployments run it. The namespace's
primary is SIGKILLed while its replica lags behind (SIGSTOPped and its link cut, so the last
commits exist only on the primary). The cluster, or the sentinels, promote the replica, which
has *older* offsets than the daemon had committed. The daemon rides out the outage, reloads
the promoted replica's state, re-seeks and re-consumes: every document counted exactly once.
With ``--redis-replicas-to-ack 1`` no event of a lost commit was ever published, so every
document's published cluster assignment is the one the surviving state holds: no two
disagree. (Without the option this test fails: the lost commits' events went out, and the
re-consumed documents, cut into batches differently, were seated differently.) The promoted
node has no replica of its own, so events wait until the failed node rejoins."""

from __future__ import annotations

import json
import signal
import time
from collections import defaultdict

import pytest
import redis
from cli_runner import redis_state
from helpers.kafka_runs import consume_all
from kafka import KafkaProducer
from kafka_daemon import committed_docs, produce, start, stop, wait_until
from redis.exceptions import RedisError
from servers.kafka_broker import KafkaBroker
from servers.ports import unique_name
from servers.redis_cluster import failover_topology

from noveld.synth import SynthConfig, generate

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]
N = 6000
ACK = ["--redis-replicas-to-ack", "1"]


def committed_on(url: str, ns: str) -> int:
    """Committed documents, 0 while the node does not serve the namespace (down, failing over)."""
    try:
        return committed_docs(url, ns)
    except RedisError:
        return 0


def committed_on_replica(url: str, ns: str) -> int:
    """Committed documents as a replica holds them (READONLY: a replica may serve reads)."""
    client = redis.Redis.from_url(url, single_connection_client=True)
    try:
        client.execute_command("READONLY")
        counters = client.hgetall(f"noveld:{{{ns}}}:counters")
        return sum(int(counters.get(k, 0)) for k in (b"docs", b"invalid"))
    finally:
        client.close()


def trickle(bootstrap: str, topic: str, values: list[bytes], chunk: int = 7) -> None:
    """Produce ``values`` a few at a time, as a live feed delivers them."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(0, len(values), chunk):
        for v in values[i : i + chunk]:
            producer.send(topic, value=v)
        producer.flush()
        time.sleep(0.03)
    producer.close()


@pytest.mark.parametrize(
    ("kind", "cut"),
    [("cluster", "mid-stream"), ("cluster", "before-start"), ("sentinel", "mid-stream")],
)
def test_failover_to_a_replica_without_the_last_commits(
    kafka_broker: KafkaBroker, kind: str, cut: str
) -> None:
    """``mid-stream``: the replica has the daemon's claim and first commits. ``before-start``:
    it has nothing of the namespace, not even the daemon's claim on the partition, so the
    promoted replica would refuse every commit as fenced unless the daemon claims it again."""
    topic, ns = unique_name("g4f-in"), unique_name("g4f")
    for t in (topic, f"{ns}.events", f"{ns}.dlq"):
        kafka_broker.create_topic(t)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=N, seed=11))]
    live = N // 3  # documents that arrive while the replica is cut off, a few at a time
    produce(kafka_broker.bootstrap, topic, docs[:live])
    with failover_topology(kind, ns) as setup:
        home, replica, url = setup.home, setup.replica, setup.url
        if kind == "cluster":  # the probe below reads the replica while the cluster is down
            replica.client().config_set("cluster-allow-reads-when-down", "yes")

        def cut_off_replica() -> int:
            """Stop the replica and cut its link (what the primary already sent sits in the
            stopped replica's socket and would still arrive); from here on commits reach the
            primary only. Returns the documents committed by then."""
            replica.kill(signal.SIGSTOP)
            home.client().client_kill_filter(_type="replica")
            return committed_docs(home.url, ns)

        try:
            at_cut = cut_off_replica() if cut == "before-start" else 0
            proc = start(
                kafka_broker.bootstrap, url, ns, topic, "--batch-size", "50",
                "--emit-assignment-batches", *ACK,
            )  # fmt: skip
            wait_until(lambda: committed_docs(home.url, ns) >= live, 60, "the first documents")
            if cut == "mid-stream":
                at_cut = cut_off_replica()
            # a live feed: the daemon's batches are whatever arrived, so the documents it
            # re-consumes after the failover (all there at once) are cut and seated differently
            trickle(kafka_broker.bootstrap, topic, docs[live : 2 * live])
            wait_until(lambda: committed_docs(home.url, ns) >= 2 * live, 60, "the live feed")
            on_primary = committed_docs(home.url, ns)
            home.kill(signal.SIGKILL)  # ...and the commits since the cut are lost with it
        finally:
            replica.kill(signal.SIGCONT)
        survived = committed_on_replica(replica.url, ns)
        assert survived <= at_cut < on_primary, (survived, at_cut, on_primary)
        produce(kafka_broker.bootstrap, topic, docs[2 * live :])
        wait_until(lambda: committed_on(replica.url, ns) >= N, 180, "the promoted replica")
        assert replica.client().info("replication")["role"] == "master"
        # the promoted node has no replica: the events of its commits wait in the outbox...
        assert redis_state(url, ns)["outbox_pending"] > 0
        home.restart()  # ...until the failed node is back; it rejoins as the new replica
        wait_until(lambda: redis_state(url, ns)["outbox_pending"] == 0, 120, "held events")
        err = stop(proc)
        info = redis_state(url, ns)
    assert info["docs"] == N  # the lost commits were consumed again; nothing counted twice
    assert info["offsets"] == {f"{topic}:0": N}
    assert "Redis unreachable" in err and "Redis is back" in err
    assert "holding" in err and "replicas caught up" in err
    assert ("claimed again" in err) == (cut == "before-start"), err

    events = [json.loads(m.value) for m in consume_all(kafka_broker.bootstrap, f"{ns}.events", 1)]
    seats: dict[int, set[str]] = defaultdict(set)
    payloads: dict[str, set[str]] = defaultdict(set)
    for e in events:
        payloads[e["event_id"]].add(json.dumps(e, sort_keys=True))
        if e["type"] == "documents.assigned":
            for a in e["assignments"]:
                seats[a["offset"]].add(a["cluster_id"])
    assert sorted(seats) == list(range(N))  # every document's seat was published
    assert all(len(c) == 1 for c in seats.values())  # none published twice differently
    assert all(len(p) == 1 for p in payloads.values())  # an event id means one event
