"""svi in production mode keeps one writer per namespace (its global step does not
commute): a second replica stands by, unready and outside the consumer group, while the first
holds the writer lease; it takes over when the first stops renewing it (here: SIGSTOPped past
the lease), and the first, resumed, finds its lease taken over and stops (exit 4) instead of
stepping the model again. Real broker, real Redis, real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.error
import urllib.request

import pytest
import redis
from kafka_daemon import committed_docs, produce, start, stop, wait_until
from servers.kafka_broker import TEST_SESSION_TIMEOUT_MS, KafkaBroker
from servers.ports import free_port, unique_name

from noveld.synth import SynthConfig, generate

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]
LEASE_MS = 2000


def probe(port: int, path: str = "/readyz") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""  # not serving yet


def test_svi_replicas_take_turns_and_a_lapsed_writer_stops(
    kafka_broker: KafkaBroker, redis_url: str
) -> None:
    ns = unique_name("svi")
    for suffix, parts in (("in", 2), ("events", 1), ("dlq", 1)):
        kafka_broker.create_topic(f"{ns}.{suffix}", partitions=parts)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=2500, seed=8))]
    client = redis.Redis.from_url(redis_url)
    lease_key = f"noveld:{{{ns}}}:lease"
    ports = [free_port(), free_port()]

    def replica(port: int) -> subprocess.Popen[str]:
        lease = ("--redis-writer-lease-ms", str(LEASE_MS))
        svi = ("--model", "svi", *lease, "--metrics-port", str(port))
        return start(kafka_broker.bootstrap, redis_url, ns, f"{ns}.in", *svi)

    produce(kafka_broker.bootstrap, f"{ns}.in", docs[:1000])
    a = replica(ports[0])
    wait_until(lambda: committed_docs(redis_url, ns) == 1000, 90, "the first replica's commits")
    holder = client.get(lease_key)
    assert holder is not None
    b = replica(ports[1])
    wait_until(lambda: "standby: writer" in probe(ports[1])[1], 60, "the second to stand by")
    status, body = probe(ports[1])
    assert status == 503 and holder.decode() in body, (status, body)
    assert probe(ports[1], "/healthz")[0] == 200  # standing by is healthy: its loop turns
    assert probe(ports[0])[0] == 200  # the writer reads every partition

    a.send_signal(signal.SIGSTOP)  # its lease lapses; its group membership too
    try:
        produce(kafka_broker.bootstrap, f"{ns}.in", docs[1000:2000])
        wait_until(
            lambda: committed_docs(redis_url, ns) == 2000,
            LEASE_MS / 1000 + TEST_SESSION_TIMEOUT_MS / 1000 + 60,
            "the standby to take over and commit the new documents",
        )
        assert client.get(lease_key) not in (None, holder)
        assert probe(ports[1])[0] == 200
    finally:
        a.send_signal(signal.SIGCONT)
    _, err_a = a.communicate(timeout=60)  # resumed, it finds its lease taken over
    assert a.returncode == 4, err_a
    assert "took over the svi writer lease" in err_a or "the writer lease is held" in err_a
    assert "Traceback" not in err_a

    produce(kafka_broker.bootstrap, f"{ns}.in", docs[2000:])
    wait_until(lambda: committed_docs(redis_url, ns) == 2500, 60, "the rest committed")
    err_b = stop(b)
    assert "took over the svi writer lease" in err_b
    assert client.get(lease_key) is None  # given up at the graceful stop

    offsets = {k.decode(): int(v) for k, v in client.hgetall(f"noveld:{{{ns}}}:offsets").items()}
    assert sum(offsets.values()) == 2500  # nothing lost, nothing counted twice
    writers = [fields[b"w"] for _, fields in client.xrange(f"noveld:{{{ns}}}:log")]
    turns = [w for i, w in enumerate(writers) if i == 0 or writers[i - 1] != w]
    assert turns == [holder, writers[-1]] and writers[-1] != holder  # one handover, no overlap
