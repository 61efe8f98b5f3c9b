"""Delivery guarantees of the Kafka-mode daemon with real processes: a real tansu
broker, a real Redis-protocol server and the daemon as a subprocess that gets SIGKILLed,
SIGTERMed and fed poison."""

from __future__ import annotations

import json
import random
import signal
import time

import pytest
from cli_runner import redis_state, wait_for_output
from helpers.kafka_runs import consume_all
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from kafka_daemon import (
    committed_docs,
    produce,
    start,
    stop,
    wait_until,
)
from servers.kafka_broker import KafkaBroker
from servers.ports import unique_name

from noveld.synth import SynthConfig, generate

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]
N = 3000


@pytest.fixture(scope="module")
def stream(kafka_broker: KafkaBroker) -> str:
    """A 1-partition topic of N synthetic documents, shared by the tests that only read it."""
    topic = unique_name("faults-in")
    kafka_broker.create_topic(topic)
    docs = generate(SynthConfig(n_docs=N, n_stories=15, seed=21))
    produce(kafka_broker.bootstrap, topic, [json.dumps(d).encode() for d in docs])
    return topic


def drain(kafka_broker: KafkaBroker, redis_url: str, ns: str, topic: str, *extra: str) -> None:
    for suffix in ("events", "dlq"):
        kafka_broker.create_topic(f"{ns}.{suffix}")
    proc = start(kafka_broker.bootstrap, redis_url, ns, topic, *extra)
    wait_until(lambda: committed_docs(redis_url, ns) >= N, 120, "a clean run to drain")
    stop(proc)


def born_events(kafka_broker: KafkaBroker, ns: str, at_least: int) -> list[dict[str, str]]:
    msgs = consume_all(kafka_broker.bootstrap, f"{ns}.events", at_least)
    events = [json.loads(m.value) for m in msgs]
    return [e for e in events if e["type"] == "cluster.born"]


def test_sigkill_chaos_equals_a_clean_run(
    kafka_broker: KafkaBroker, redis_url: str, stream: str
) -> None:
    """SIGKILL at random points and restart until drained — exact count, exact offsets,
    and (deterministic mode, one partition) the clean run's state hash; the distinct event
    ids on the topic are the confirmed births, the same as the clean run's; the outbox drains."""
    clean = unique_name("clean")
    drain(kafka_broker, redis_url, clean, stream, "--batch-size", "20")
    clean_info = redis_state(redis_url, clean)

    ns = unique_name("chaos")
    for suffix in ("events", "dlq"):
        kafka_broker.create_topic(f"{ns}.{suffix}")
    # kill points: the daemon drains this topic in about a second once running, so kill when
    # the committed count passes random targets (polled every 5 ms) rather than after a delay
    targets = sorted(random.Random(5).sample(range(300, N - 300), 4))
    for target in targets:
        proc = start(kafka_broker.bootstrap, redis_url, ns, stream, "--batch-size", "20")
        deadline = time.monotonic() + 90
        while committed_docs(redis_url, ns) < target and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, "the daemon exited on its own"
    assert committed_docs(redis_url, ns) < N, "the stream drained before the last kill"
    proc = start(kafka_broker.bootstrap, redis_url, ns, stream, "--batch-size", "20")
    wait_until(lambda: committed_docs(redis_url, ns) >= N, 120, "the chaos run to drain")
    wait_until(lambda: redis_state(redis_url, ns)["outbox_pending"] == 0, 30, "the outbox to drain")
    stop(proc)
    info = redis_state(redis_url, ns)
    assert info["docs"] == N
    assert info["offsets"] == {f"{stream}:0": N}
    assert info["digest"] == clean_info["digest"]
    assert info["outbox_pending"] == 0
    births = int(info["births"])
    assert births == clean_info["births"] > 0
    chaos_events = born_events(kafka_broker, ns, births)
    assert len({e["event_id"] for e in chaos_events}) == births  # at least once, no strays
    # same clusters and founding documents as the clean run (event ids also hash the namespace)
    clean_events = born_events(kafka_broker, clean, births)
    assert {(e["cluster_id"], e["founding_doc_id"]) for e in chaos_events} == {
        (e["cluster_id"], e["founding_doc_id"]) for e in clean_events
    }


def test_lagging_kafka_offsets_replay_nothing(
    kafka_broker: KafkaBroker, redis_url: str, stream: str
) -> None:
    """A crash between the Redis commit and the (advisory) Kafka offset commit leaves
    Kafka's committed offsets behind the state's. Emulated by rewinding the group's Kafka
    offsets to 0: the restarted daemon seeks to the offsets stored with the state, so nothing
    is processed twice and the model is unchanged."""
    ns = unique_name("g2")
    drain(kafka_broker, redis_url, ns, stream)
    before = redis_state(redis_url, ns)
    rewind = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=ns,
                           enable_auto_commit=False)  # fmt: skip
    tp = TopicPartition(stream, 0)
    rewind.assign([tp])
    rewind.commit({tp: OffsetAndMetadata(0, "", -1)})
    assert rewind.committed(tp) == 0
    rewind.close()
    proc = start(kafka_broker.bootstrap, redis_url, ns, stream)
    assert proc.stderr is not None
    wait_for_output(proc.stderr, f"noveld: assigned partitions {stream}[0]", 60)
    time.sleep(2)  # polls after the seek: a re-read from offset 0 would commit a batch by now
    stop(proc)
    after = redis_state(redis_url, ns)
    assert after["docs"] == before["docs"] == N
    assert after["digest"] == before["digest"]
    assert after["batches"] == before["batches"]


def test_sigterm_mid_stream_exits_promptly_and_replays_nothing(
    kafka_broker: KafkaBroker, redis_url: str
) -> None:
    topic = unique_name("g7-in")
    kafka_broker.create_topic(topic)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=20000, seed=3))]
    produce(kafka_broker.bootstrap, topic, docs)
    ns = unique_name("g7")
    for suffix in ("events", "dlq"):
        kafka_broker.create_topic(f"{ns}.{suffix}")
    proc = start(kafka_broker.bootstrap, redis_url, ns, topic)
    wait_until(lambda: committed_docs(redis_url, ns) > 0, 60, "the first commit")
    stop(proc, grace=10.0)  # exit 0 within the grace period
    first = redis_state(redis_url, ns)
    assert 0 < first["docs"] < 20000, "SIGTERM did not arrive mid-stream"
    assert first["offsets"] == {f"{topic}:0": first["docs"]}  # committed exactly up to there
    proc = start(kafka_broker.bootstrap, redis_url, ns, topic)
    wait_until(lambda: committed_docs(redis_url, ns) >= 20000, 120, "the restart to drain")
    stop(proc)
    final = redis_state(redis_url, ns)
    assert final["docs"] == 20000  # the restart continued exactly where the first run stopped


def test_all_poison_trips_the_breaker(kafka_broker: KafkaBroker, redis_url: str) -> None:
    """(The second half; 1 poison record in 1,000 is tests/integration/test_kafka_daemon.py):
    a topic of nothing but bad records stops the daemon with exit 3 and a clear message."""
    topic = unique_name("g8-in")
    kafka_broker.create_topic(topic)
    produce(kafka_broker.bootstrap, topic, [b"{broken" for _ in range(300)])
    ns = unique_name("g8")
    for suffix in ("events", "dlq"):
        kafka_broker.create_topic(f"{ns}.{suffix}")
    proc = start(kafka_broker.bootstrap, redis_url, ns, topic, "--max-consecutive-invalid", "50")
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 3, err
    assert "circuit breaker open" in err and "Traceback" not in err
    info = redis_state(redis_url, ns)
    assert info["invalid"] == 50 and info["docs"] == 0  # stopped right after the 50th
    assert info["offsets"] == {f"{topic}:0": 50}  # a fixed producer resumes after them
    assert len(consume_all(kafka_broker.bootstrap, f"{ns}.dlq", 50)) == 50


def test_incompatible_settings_are_refused(
    kafka_broker: KafkaBroker, redis_url: str, stream: str
) -> None:
    ns = unique_name("g12")
    drain(kafka_broker, redis_url, ns, stream)
    proc = start(kafka_broker.bootstrap, redis_url, ns, stream, "--beta", "0.5")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "beta" in err and "different model settings" in err and "Traceback" not in err
    assert redis_state(redis_url, ns)["docs"] == N  # untouched
