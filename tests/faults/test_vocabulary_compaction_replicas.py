"""Two Kafka-mode replicas share a namespace whose vocabulary they compact as stories fade
(scale-out, vocabulary compaction): whenever one compacts, the other's next batch is
refused as stale; it reloads the shared state and reads that batch again from the stored
offsets, without waiting for a rebalance. Nothing is lost or counted twice."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request

import pytest
import redis
from cli_runner import redis_state
from kafka_daemon import SteadyFeed, start, wait_until
from servers.kafka_broker import KafkaBroker
from servers.ports import free_port, unique_name
from streams import fading_stories

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]


def replica(bootstrap: str, redis_url: str, ns: str, port: int) -> subprocess.Popen[str]:
    return start(bootstrap, redis_url, ns, f"{ns}.in", "--batch-size", "50",
                 "--half-life", "50", "--compact-vocabulary-at", "100", "--featurizer", "words",
                 "--metrics-port", str(port))  # fmt: skip


def metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def test_replicas_reload_after_each_others_compactions_and_count_every_document_once(
    kafka_broker: KafkaBroker, redis_url: str
) -> None:
    ns = unique_name("vocab")
    for suffix, parts in (("in", 2), ("events", 1), ("dlq", 1)):
        kafka_broker.create_topic(f"{ns}.{suffix}", partitions=parts)
    docs = [json.dumps(d).encode() for d in fading_stories(6000, seed=9)]
    # a steady stream over both partitions until a stale reload has been seen (the replicas
    # may start late on a slow machine), at least the 6,000 documents
    feeder = SteadyFeed(kafka_broker.bootstrap, f"{ns}.in", docs, pause=0.05, max_rounds=20)
    ports = [free_port(), free_port()]
    a = replica(kafka_broker.bootstrap, redis_url, ns, ports[0])
    b = replica(kafka_broker.bootstrap, redis_url, ns, ports[1])
    feeder.start()
    stale = compactions = 0.0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for p in (a, b):
                if p.poll() is not None:
                    raise AssertionError(f"replica exited {p.poll()}: {p.communicate()[1][-3000:]}")
            try:
                stale = sum(metric(p, "noveld_stale_vocabulary_reloads_total") for p in ports)
                compactions = sum(metric(p, "noveld_vocabulary_compactions_total") for p in ports)
            except OSError:  # metrics server not up yet
                pass
            if stale >= 1:
                break
            time.sleep(0.2)
        feeder.enough.set()
        feeder.join()
        wait_until(
            lambda: int(redis.Redis.from_url(redis_url).hget(f"noveld:{{{ns}}}:counters", "docs")
                        or 0) == feeder.sent,
            90,
            f"all {feeder.sent} documents committed",
        )  # fmt: skip
    finally:
        feeder.halt.set()
        feeder.join()
        for p in (a, b):
            if p.poll() is None:
                p.terminate()
    errs = []
    for p in (a, b):
        _, err = p.communicate(timeout=60)
        errs.append(err)
        assert p.returncode == 0, err
        assert "Traceback" not in err
    assert compactions >= 1 and stale >= 1, (compactions, stale)
    assert any("another replica compacted the vocabulary" in e for e in errs)
    final = redis_state(redis_url, ns)
    assert final["docs"] == feeder.sent  # nothing lost, nothing counted twice
    assert sum(final["offsets"].values()) == feeder.sent
    r = redis.Redis.from_url(redis_url)
    assert int(r.hget(f"noveld:{{{ns}}}:meta", "vocab_gen")) >= 1
    distinct = {w for d in docs for w in json.loads(d)["text"].split()}
    assert final["vocab"] < len(distinct) / 2  # the faded stories' words left
