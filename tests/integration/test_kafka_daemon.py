"""`noveld run` in production mode: real broker (tansu), real Redis, the daemon a subprocess."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
import redis
from cli_runner import NOVELD, wait_for_output
from helpers.kafka_runs import consume_all, create_topics, start_daemon, stop, wait_for_docs
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from servers.kafka_broker import KafkaBroker
from servers.ports import free_port

from noveld.schema import ASSIGNMENTS_PER_MESSAGE, DocumentsAssigned, parse_event
from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, generate

pytestmark = [pytest.mark.integration, pytest.mark.slow]
N_DOCS = 2000
POISON_AT = 500


def test_daemon_drains_topic_commits_to_redis_and_publishes(
    kafka_bootstrap: str, redis_url: str
) -> None:
    ns = f"k{uuid.uuid4().hex[:6]}"
    topics = create_topics(kafka_bootstrap, ns)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for i, doc in enumerate(generate(SynthConfig(n_docs=N_DOCS - 1, n_stories=12, seed=4))):
        if i == POISON_AT:
            producer.send(
                topics["in"], key=b"poison-key", value=b"{not json", headers=[("trace", b"t-1")]
            )
        producer.send(topics["in"], value=json.dumps(doc).encode())
    producer.flush()
    producer.close()

    client = redis.Redis.from_url(redis_url)
    proc = start_daemon(kafka_bootstrap, redis_url, ns, topics)
    counters = wait_for_docs(client, ns, N_DOCS, proc)
    stop(proc)
    assert counters["docs"] == N_DOCS - 1 and counters["invalid"] == 1

    state = RedisStore(client, ns).read()
    assert state is not None
    assert state.offsets == {f"{topics['in']}:0": N_DOCS}
    assert state.stats.mass(state.stats.active_slots()).sum() == pytest.approx(N_DOCS - 1)
    assert RedisStore(client, ns).outbox_length() == 0

    events = [
        json.loads(m.value)
        for m in consume_all(kafka_bootstrap, topics["events"], counters["births"])
    ]
    born = [e for e in events if e["type"] == "cluster.born"]
    assert len({e["event_id"] for e in born}) == counters["births"] > 0
    assert all(e["born_at"]["topic"] == topics["in"] for e in born)

    dead = consume_all(kafka_bootstrap, topics["dlq"], 1)
    assert len(dead) == 1
    headers = {k: v.decode() for k, v in dead[0].headers}
    assert dead[0].value == b"{not json"
    assert headers["error"] == "not_json" and headers["source_offset"] == str(POISON_AT)
    # the record's own key and headers travel with it, so it can be replayed as it was
    assert dead[0].key == b"poison-key" and headers["trace"] == "t-1"

    # a restart resumes from Redis: nothing is read twice
    proc = start_daemon(kafka_bootstrap, redis_url, ns, topics)
    assert proc.stderr is not None
    wait_for_output(proc.stderr, f"noveld: assigned partitions {topics['in']}[0]", 60)
    time.sleep(2)  # polls after the seek: a re-read from offset 0 would commit a batch by now
    stop(proc)
    again = RedisStore(client, ns).read()
    assert again is not None and again.counters == state.counters


def test_an_oversize_record_is_parked_cut_and_the_daemon_goes_on(
    kafka_bootstrap: str, redis_url: str
) -> None:
    """The DLQ producer used to forward the whole record: past the producer's 1 MiB request
    limit it raised, the daemon died, and every restart died on the same record. The dead
    letter keeps the first max_doc_bytes + 1 bytes and says how long the record was."""
    ns = f"k{uuid.uuid4().hex[:6]}"
    topics = create_topics(kafka_bootstrap, ns)
    big = json.dumps({"id": "big", "text": "word " * 1000}).encode()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    producer.send(topics["in"], value=big)
    for doc in generate(SynthConfig(n_docs=50, n_stories=3, seed=4)):
        producer.send(topics["in"], value=json.dumps(doc).encode())
    producer.flush()
    producer.close()
    client = redis.Redis.from_url(redis_url)
    proc = start_daemon(kafka_bootstrap, redis_url, ns, topics, ("--max-doc-bytes", "1000"))
    counters = wait_for_docs(client, ns, 51, proc)
    stop(proc)
    assert counters["docs"] == 50 and counters["invalid"] == 1
    dead = consume_all(kafka_bootstrap, topics["dlq"], 1)
    assert len(dead) == 1
    headers = {k: v.decode() for k, v in dead[0].headers}
    assert headers["error"] == "oversize" and headers["truncated_from"] == str(len(big))
    assert dead[0].value == big[:1001]


def test_daemon_clusters_embeddings_from_kafka(kafka_bootstrap: str, redis_url: str) -> None:
    """Production mode with `--likelihood vmf`: embeddings in from the broker, state in Redis,
    births out on the events topic, a wrong-dimension embedding on the DLQ topic; with
    `--emit-assignments`, every document's cluster on the events topic too."""
    ns = f"v{uuid.uuid4().hex[:6]}"
    topics = create_topics(kafka_bootstrap, ns)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    cfg = SynthConfig(n_docs=1000, n_stories=10, seed=6, embedding_dim=48, embedding_cosine=0.7)
    for i, doc in enumerate(generate(cfg)):
        if i == 300:
            bad = {"id": "short", "embedding": [0.5, 0.5]}
            producer.send(topics["in"], value=json.dumps(bad).encode())
        producer.send(topics["in"], value=json.dumps(doc).encode())
    producer.flush()
    producer.close()
    client = redis.Redis.from_url(redis_url)
    vmf = ("--likelihood", "vmf", "--embedding-dim", "48", "--emit-assignments")
    proc = start_daemon(kafka_bootstrap, redis_url, ns, topics, vmf)
    counters = wait_for_docs(client, ns, 1001, proc)
    stop(proc)
    assert counters["docs"] == 1000 and counters["invalid"] == 1 and counters["births"] >= 5
    messages = consume_all(kafka_bootstrap, topics["events"], 1000 + counters["births"])
    events = [json.loads(m.value) for m in messages]
    born = [e for e in events if e["type"] == "cluster.born"]
    assert len(born) == counters["births"]
    assigned = {e["event_id"]: e for e in events if e["type"] == "document.assigned"}
    assert sorted(e["position"]["offset"] for e in assigned.values()) == [
        o for o in range(1001) if o != 300
    ]  # every valid record once, the dead letter (offset 300) not at all
    assert all(e["position"]["topic"] == topics["in"] for e in assigned.values())
    assert all(m.key.decode() == json.loads(m.value)["cluster_id"] for m in messages)
    members = {e["cluster_id"] for e in assigned.values()}
    assert {e["cluster_id"] for e in born} <= members and len(members) >= 5
    assert all(not t.startswith("\x00") for e in born for t, _ in e["top_terms"])
    dead = consume_all(kafka_bootstrap, topics["dlq"], 1)
    assert len(dead) == 1
    assert {k: v.decode() for k, v in dead[0].headers}["error"] == "wrong_dimension"


def test_assignment_batches_cover_every_input_partition_in_order(
    kafka_bootstrap: str, redis_url: str
) -> None:
    """`--emit-assignment-batches` on a three-partition input: each `documents.assigned`
    message holds one input partition's documents in offset order and is keyed by that
    partition, and together they seat every document exactly once."""
    ns = f"b{uuid.uuid4().hex[:6]}"
    topics = create_topics(kafka_bootstrap, ns, input_partitions=3)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for i, doc in enumerate(generate(SynthConfig(n_docs=900, n_stories=8, seed=9))):
        producer.send(topics["in"], value=json.dumps(doc).encode(), partition=i % 3)
    producer.flush()
    producer.close()
    client = redis.Redis.from_url(redis_url)
    proc = start_daemon(kafka_bootstrap, redis_url, ns, topics, ("--emit-assignment-batches",))
    counters = wait_for_docs(client, ns, 900, proc)
    stop(proc)
    assert counters["docs"] == 900
    messages = consume_all(kafka_bootstrap, topics["events"], counters["births"] + 3)
    batches: dict[str, DocumentsAssigned] = {}
    for m in messages:
        ev = parse_event(m.value)
        if isinstance(ev, DocumentsAssigned):
            assert m.key.decode() == f"{ev.topic}:{ev.partition}"
            batches[ev.event_id] = ev
        else:
            assert m.key.decode() == ev.cluster_id
    seats: dict[tuple[int, int], str] = {}
    for ev in batches.values():
        offsets = [a.offset for a in ev.assignments]
        assert ev.topic == topics["in"] and 1 <= len(offsets) <= ASSIGNMENTS_PER_MESSAGE
        assert offsets == sorted(offsets) and (offsets[0], offsets[-1]) == (
            ev.first_offset,
            ev.last_offset,
        )
        for a in ev.assignments:
            assert (ev.partition, a.offset) not in seats  # seated once
            seats[ev.partition, a.offset] = a.cluster_id
    assert sorted(seats) == [(p, o) for p in range(3) for o in range(300)]
    born = {json.loads(m.value)["cluster_id"] for m in messages if b"cluster.born" in m.value}
    assert len(born) == counters["births"] and born <= set(seats.values())


def test_produce_sends_every_line_and_reports(kafka_bootstrap: str, tmp_path: Any) -> None:
    topic = f"p{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"id": f"x{i}", "text": f"word{i % 7} other"}) for i in range(300)]
    src.write_text("\n".join(lines[:150]) + "\n\n" + "\n".join(lines[150:]) + "\n")
    out = subprocess.run(
        [*NOVELD, "produce", str(src), "--topic", topic, "--kafka-bootstrap", kafka_bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "sent 300 records" in out.stderr and "1 blank lines skipped" in out.stderr
    got = [m.value.decode() for m in consume_all(kafka_bootstrap, topic, 300)]
    assert got == lines


def test_produce_to_unreachable_broker_is_a_clear_error(tmp_path: Any) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "text": "b"}\n')
    out = subprocess.run(
        [
            *NOVELD,
            "produce",
            str(src),
            "--topic",
            "t",
            "--kafka-bootstrap",
            f"127.0.0.1:{free_port()}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "cannot reach Kafka" in out.stderr
    assert "Traceback" not in out.stderr


def test_missing_topics_stop_the_start_with_their_names(
    kafka_bootstrap: str, redis_url: str
) -> None:
    """A missing events topic stalled every batch for 60 s (the producer's metadata wait), a
    missing DLQ topic crashed the daemon at the first invalid record, in a loop, and a missing
    input topic left it silent and never consuming: all are named at start-up, exit 2."""
    ns = f"k{uuid.uuid4().hex[:6]}"
    topics = {"in": f"{ns}.in", "events": f"{ns}.events", "dlq": f"{ns}.dlq"}
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(topics["in"], 1, 1)])
    admin.close()
    proc = start_daemon(kafka_bootstrap, redis_url, ns, topics)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert f"topics {topics['events']}, {topics['dlq']} not found on the cluster" in err
    assert "Traceback" not in err
    absent = {**topics, "in": f"{ns}.nothing"}
    proc = start_daemon(kafka_bootstrap, redis_url, ns, absent)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and f"{ns}.nothing" in err, err


class SilentListener:
    """A TCP server on a free loopback port that accepts every connection and never answers
    (a hung broker, or a TLS listener waiting for a handshake the client does not start)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.accepted.append(conn)

    def __enter__(self) -> SilentListener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        self._thread.join(timeout=5)
        for conn in self.accepted:
            conn.close()


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_a_broker_that_accepts_and_never_answers_stops_the_start(
    redis_url: str, protocol: str
) -> None:
    """The TLS client waited for a handshake with no time limit inside kafka-python's
    constructors: the daemon hung at start-up forever. Now it gives up within a bound and
    says which address and which client got no answer, with the TLS hint, exit 2."""
    ns = f"h{uuid.uuid4().hex[:6]}"
    with SilentListener() as silent:
        bootstrap = f"127.0.0.1:{silent.port}"
        t0 = time.monotonic()
        proc = start_daemon(
            bootstrap,
            redis_url,
            ns,
            {"in": f"{ns}.in", "events": f"{ns}.events", "dlq": f"{ns}.dlq"},
            ("--kafka-security-protocol", protocol),
            env={"NOVELD_KAFKA__STARTUP_TIMEOUT_S": "3"},  # the bound (default 15 s), shorter
        )
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"still starting after 60 s: {err[-2000:]}") from None
        took = time.monotonic() - t0
        assert silent.accepted  # it did connect
    assert proc.returncode == 2, err
    assert took < 20, took
    assert f"cannot reach Kafka at {bootstrap} ({protocol})" in err
    assert "security_protocol" in err and "TLS" in err
    assert "Traceback" not in err
    if protocol == "SSL":
        assert "no answer within 3 s" in err and "producer" in err


def test_partition_assignments_and_revocations_are_logged(
    kafka_bootstrap: str, redis_url: str
) -> None:
    """Which partitions a replica owns was invisible (logged at INFO, which nothing shows):
    every assignment and revocation is now one stderr line. A alone gets both partitions; when
    B joins, A gives them up and each replica is assigned one."""
    ns = f"a{uuid.uuid4().hex[:6]}"
    topics = create_topics(kafka_bootstrap, ns, input_partitions=2)
    client = redis.Redis.from_url(redis_url)

    def claims() -> int:
        return sum(int(v) for v in client.hgetall(f"noveld:{{{ns}}}:epochs").values())

    def wait_claims(n: int, procs: list[subprocess.Popen[str]]) -> None:
        deadline = time.monotonic() + 60
        while claims() < n:
            for p in procs:
                assert p.poll() is None, p.communicate()[1]
            assert time.monotonic() < deadline, f"{claims()} claims, wanted {n}"
            time.sleep(0.2)

    a = start_daemon(kafka_bootstrap, redis_url, ns, topics)
    b = None
    try:
        wait_claims(2, [a])  # A owns both partitions
        b = start_daemon(kafka_bootstrap, redis_url, ns, topics)
        wait_claims(4, [a, b])  # the rebalance: A claims one again, B the other
        time.sleep(1)
    finally:
        err_a = stop(a)
        err_b = stop(b) if b is not None else ""
    t = topics["in"]
    lines_a = [ln for ln in err_a.splitlines() if "partitions" in ln]
    lines_b = [ln for ln in err_b.splitlines() if "partitions" in ln]
    assert lines_a[0] == f"noveld: assigned partitions {t}[0,1]", err_a
    assert f"noveld: revoked partitions {t}[0,1]" in lines_a[1:], err_a
    mine = {ln for ln in lines_a[1:] if ln.startswith("noveld: assigned partitions")}
    theirs = {ln for ln in lines_b if ln.startswith("noveld: assigned partitions")}
    assert {f"noveld: assigned partitions {t}[0]", f"noveld: assigned partitions {t}[1]"} == (
        mine | theirs
    ), (err_a, err_b)
    assert "Traceback" not in err_a + err_b


def metrics_text(port: int) -> str:
    """The daemon's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text: str = resp.read().decode()
    return text


def readyz(port: int) -> str:
    """The body of the daemon's /readyz (200 or 503)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return str(resp.read().decode())
    except urllib.error.HTTPError as exc:
        return str(exc.read().decode())
    except OSError:
        return "(no answer)"


def test_a_stored_offset_past_the_log_end_holds_the_partition(
    kafka_broker: KafkaBroker, redis_url: str
) -> None:
    """The input topic deleted and re-created under a namespace that had read 100 records:
    the state's next offset (100) is past the new log's end (30). The daemon used to wait
    silently forever on this broker (a real Kafka answers "out of range", the consumer resets
    to the log start and every record is counted again). Now it holds the partition, says so
    once, is not ready, and reads it once an operator resets the stored offset."""
    ns = f"e{uuid.uuid4().hex[:6]}"
    topics = create_topics(kafka_broker.bootstrap, ns)
    key = f"{topics['in']}:0"
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=130, seed=8))]
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    for value in docs[:100]:
        producer.send(topics["in"], value=value)
    producer.flush()
    client = redis.Redis.from_url(redis_url)
    proc = start_daemon(kafka_broker.bootstrap, redis_url, ns, topics)
    wait_for_docs(client, ns, 100, proc)
    stop(proc)

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.delete_topics([topics["in"]])
    deadline = time.monotonic() + 30
    while topics["in"] in admin.list_topics():
        assert time.monotonic() < deadline, "topic not deleted"
        time.sleep(0.2)
    admin.close()
    kafka_broker.create_topic(topics["in"])
    for value in docs[100:]:
        producer.send(topics["in"], value=value)
    producer.flush()
    producer.close()

    port = free_port()
    proc = start_daemon(
        kafka_broker.bootstrap, redis_url, ns, topics, ("--metrics-port", str(port))
    )
    try:
        deadline = time.monotonic() + 60
        while "past the log end" not in (body := readyz(port)):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, body
            time.sleep(0.2)
        assert f"{key} (stored offset 100, log end 30)" in body
        # its lag is 0 and the other partitions commit on: only this gauge tells an alert
        wait_until_metric = time.monotonic() + 30
        while "noveld_partitions_held 1.0" not in (text := metrics_text(port)):
            assert time.monotonic() < wait_until_metric, text
            time.sleep(0.2)
        time.sleep(2)  # held: nothing read, nothing counted
        state = RedisStore(client, ns).read()
        assert state is not None and state.offsets == {key: 100}
        assert state.counters["docs"] == 100
        operator = subprocess.run(  # a new topic: read it from the start
            [*NOVELD, "state", "set-offset", key, "0", "--redis-url", redis_url,
             "--namespace", ns],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert operator.returncode == 0, operator.stderr
        assert f"{key}: stored offset 100 → 0" in operator.stderr
        counters = wait_for_docs(client, ns, 130, proc, timeout_s=60)
        assert counters["docs"] == 130
    finally:
        err = stop(proc)
    said = [ln for ln in err.splitlines() if ln.startswith(f"noveld: warning: partition {key}:")]
    assert len(said) == 2, err  # once held, once read again (logged at WARNING)
    assert f"{key}: the stored offset 100 is past the log end 30" in said[0]
    assert "is within the log again (end 30)" in said[1]
    again = RedisStore(client, ns).read()
    assert again is not None and again.offsets == {key: 30}


def test_not_ready_before_the_group_assigns_partitions(
    kafka_broker: KafkaBroker, redis_url: str
) -> None:
    """From the moment /readyz answers, it says "not ready" until the group has assigned the
    daemon its partitions (it answered "ready" for the first loop turn)."""
    ns = f"r{uuid.uuid4().hex[:6]}"
    topics = create_topics(kafka_broker.bootstrap, ns)
    port = free_port()
    proc = start_daemon(
        kafka_broker.bootstrap, redis_url, ns, topics, ("--metrics-port", str(port))
    )
    try:
        bodies: list[str] = []
        deadline = time.monotonic() + 60
        while not bodies or bodies[-1] != "ready":
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, bodies[-3:]
            body = readyz(port)
            if body != "(no answer)":
                bodies.append(body.strip())
            time.sleep(0.01)
        assert bodies[0].startswith("not ready"), bodies[:3]
        assert any("no partitions assigned" in b for b in bodies)
    finally:
        stop(proc)
