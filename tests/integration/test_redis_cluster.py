"""The state on a real Redis Cluster (three primaries, tests/servers/): the URL of any node
is enough, each namespace lives whole on the node that holds its hash slot, and the state is
the one a single server holds for the same input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from cli_runner import NOVELD, noveld, redis_state
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from redis.cluster import RedisCluster
from redis.exceptions import MovedError, RedisError
from servers.kafka_broker import TEST_SESSION_TIMEOUT_MS
from servers.redis_cluster import RedisClusterServers
from servers.redis_server import RedisServer

from noveld.state.redis.connect import connect
from noveld.state.redis.store import RedisStore
from noveld.state.redis.values import stream_entries
from noveld.synth import SynthConfig, generate, write_jsonl


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterServers]:
    with RedisClusterServers(3) as servers:
        yield servers


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "stream.jsonl"
    write_jsonl(SynthConfig(n_docs=3000, n_stories=15, seed=11), path)
    return path


def events(stdout: str) -> list[dict[str, Any]]:
    """The events without what names the namespace (its name, and the ids hashed from it)."""
    out = []
    for line in stdout.splitlines():
        event = json.loads(line)
        del event["event_id"], event["namespace"]
        out.append(event)
    assert out
    return out


def namespaces_on_every_node(cluster: RedisClusterServers) -> list[str]:
    """One namespace per node (names chosen by their keys' hash slots)."""
    by_node: dict[int, str] = {}
    for i in range(1000):
        ns = f"n{i}"
        by_node.setdefault(cluster.node_of(f"noveld:{{{ns}}}:meta").port, ns)
        if len(by_node) == len(cluster.servers):
            return list(by_node.values())
    raise AssertionError("no namespace for some node")


def test_each_namespace_lives_on_its_node_with_the_single_servers_state(
    cluster: RedisClusterServers, stream: Path, redis_url: str, tmp_path: Path
) -> None:
    single = ["--input", str(stream), "--dlq", str(tmp_path / "dlq.jsonl")]
    reference = noveld("run", *single, "--redis-url", redis_url, "--namespace", "ref")
    assert reference.returncode == 0, reference.stderr
    expected = redis_state(redis_url, "ref")
    for ns in namespaces_on_every_node(cluster):
        out = noveld("run", *single, "--redis-url", cluster.url, "--namespace", ns)
        assert out.returncode == 0, out.stderr
        assert events(out.stdout) == events(reference.stdout)
        info = redis_state(cluster.url, ns)
        assert info["digest"] == expected["digest"] and info["docs"] == 3000
        home = cluster.node_of(f"noveld:{{{ns}}}:meta")
        for server in cluster.servers:
            keys = server.client().keys(f"noveld:{{{ns}}}:*")
            assert bool(keys) == (server is home), (ns, server.port)
        again = noveld("run", *single, "--redis-url", cluster.url, "--namespace", ns)
        assert again.returncode == 0 and again.stdout == ""  # resumed at the end
        assert redis_state(cluster.url, ns)["docs"] == 3000
    # export a namespace and import it as a new one (wherever its slot is)
    source, target = namespaces_on_every_node(cluster)[:2]
    backup = tmp_path / "backup.npz"
    for verb, ns in (("export", source), ("import", f"{target}x")):
        out = noveld("state", verb, str(backup), "--redis-url", cluster.url, "--namespace", ns)
        assert out.returncode == 0, out.stderr
    assert redis_state(cluster.url, f"{target}x")["digest"] == expected["digest"]


def test_the_kafka_daemon_commits_to_a_cluster(
    cluster: RedisClusterServers, kafka_bootstrap: str
) -> None:
    """Production mode with the state on the cluster: every document committed, births on the
    events topic, a clean SIGTERM."""
    ns = f"k{uuid.uuid4().hex[:6]}"
    topics = {"in": f"{ns}.in", "events": f"{ns}.events", "dlq": f"{ns}.dlq"}
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for doc in generate(SynthConfig(n_docs=1500, n_stories=8, seed=5)):
        producer.send(topics["in"], value=json.dumps(doc).encode())
    producer.flush()
    producer.close()
    proc = subprocess.Popen(
        [
            *NOVELD, "run",
            "--kafka-bootstrap", kafka_bootstrap,
            "--input-topic", topics["in"],
            "--events-topic", topics["events"],
            "--dlq-topic", topics["dlq"],
            "--group", ns,
            "--redis-url", cluster.url,
            "--namespace", ns,
            "--session-timeout-ms", str(TEST_SESSION_TIMEOUT_MS),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NOVELD_BATCH__MAX_WAIT_MS": "200"},
    )  # fmt: skip
    home = cluster.node_of(f"noveld:{{{ns}}}:meta").client()
    deadline = time.monotonic() + 120
    docs = 0
    while time.monotonic() < deadline and docs < 1500:
        assert proc.poll() is None, proc.communicate()[1]
        docs = int(home.hget(f"noveld:{{{ns}}}:counters", "docs") or 0)
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert docs == 1500
    births = int(home.hget(f"noveld:{{{ns}}}:counters", "births") or 0)
    consumer = KafkaConsumer(
        topics["events"],
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    born = [m for m in consumer if b'"cluster.born"' in m.value]
    consumer.close()
    assert births >= 4 and len(born) == births


def test_a_plain_client_would_be_redirected(cluster: RedisClusterServers) -> None:
    """Why the daemon needs the cluster client: a namespace on another node answers MOVED."""
    first = cluster.servers[0]
    ns = next(
        n
        for n in namespaces_on_every_node(cluster)
        if cluster.node_of(f"noveld:{{{n}}}:meta") is not first
    )
    with pytest.raises(MovedError):
        first.client().hget(f"noveld:{{{ns}}}:meta", "seq")


def test_a_server_that_hides_info_is_used_as_a_single_server(tmp_path: Path) -> None:
    """Managed services may disable INFO: then the server is taken as it presents itself."""
    with RedisServer(extra_args=["--rename-command", "INFO", ""]) as server:
        client = connect(server.url)
        assert isinstance(client, redis.Redis) and not isinstance(client, RedisCluster)
        source = tmp_path / "in.jsonl"
        write_jsonl(SynthConfig(n_docs=300, n_stories=3, seed=2), source)
        out = noveld(
            "run", "--input", str(source), "--redis-url", server.url, "--namespace", "hidden",
            "--dlq", str(tmp_path / "dlq.jsonl"),
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert redis_state(server.url, "hidden")["docs"] == 300


def test_cluster_transactions_give_stream_fields_as_a_mapping(
    cluster: RedisClusterServers,
) -> None:
    """The store reads the delta log inside a transaction, where redis-py's cluster client
    leaves XRANGE unparsed; ``stream_entries`` gives both clients' replies one shape."""
    client = connect(cluster.url)
    assert isinstance(client, RedisCluster)
    client.xadd("{t}log", {"w": b"a", "d": b"\x00\x01"})
    pipe = client.pipeline(transaction=True)
    pipe.xrange("{t}log", "-", "+")
    (raw,) = pipe.execute()
    plain = client.xrange("{t}log", "-", "+")
    assert stream_entries(raw) == stream_entries(plain)
    assert stream_entries(raw)[0][1] == {b"w": b"a", b"d": b"\x00\x01"}


def test_the_store_pings_the_node_that_holds_its_namespace() -> None:
    """The daemon's "is Redis back?" probe asks the namespace's node, not whichever node the
    client defaults to: with that node down the probe fails although the others answer."""
    with RedisClusterServers(3) as own:
        first = own.servers[0]
        ns = next(
            n
            for n in namespaces_on_every_node(own)
            if own.node_of(f"noveld:{{{n}}}:meta") is not first
        )
        store = RedisStore(connect(own.url), ns)
        assert store.client.get_default_node().port == first.port  # a plain PING's target
        store.ping()
        own.node_of(f"noveld:{{{ns}}}:meta").kill()
        with pytest.raises(RedisError):
            store.ping()
        assert first.client().ping()  # the node the client was given still answers
