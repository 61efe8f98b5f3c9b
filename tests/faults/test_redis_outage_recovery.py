"""Recovery from a Redis outage: redis-server (AOF everysec) lost mid-stream, two ways. ``killed``:
SIGKILL, then a restart on the same port. ``hung``: SIGSTOP, then SIGCONT — a server that stops
answering without closing its connections, as a network that drops packets looks; only the
socket timeout (``--redis-socket-timeout``) can tell, and without it the daemon blocks for as
long as TCP keeps the connection. Either way the daemon goes unready and pauses, does not crash
or restart, and when Redis answers again it reloads the state and re-seeks to the stored
offsets: every document counted exactly once, nothing lost — even the commits Redis lost from
its last second of AOF are redone from Kafka. A file or stdin run (no Kafka) waits for Redis the
same way; stdin stops with exit 5 only if Redis came back without commits it cannot re-read."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cli_runner import NOVELD, redis_state
from kafka_daemon import committed_docs, produce, start, stop, tracked, wait_until
from servers.kafka_broker import KafkaBroker
from servers.ports import free_port, unique_name
from servers.redis_server import RedisServer

from noveld.synth import SynthConfig, generate

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]
N = 8000


def ready(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=3).status == 200
    except urllib.error.HTTPError:
        return False


def lag(port: int) -> float:
    """Sum of ``noveld_consumer_lag_messages`` as the daemon exports it."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("noveld_consumer_lag_messages{")
    )


def healthy(port: int) -> bool:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3).status == 200


@pytest.mark.parametrize("loss", ["killed", "hung"])
def test_redis_lost_and_back_mid_stream(kafka_broker: KafkaBroker, loss: str) -> None:
    topic, ns = unique_name("g4-in"), unique_name("g4")
    for t in (topic, f"{ns}.events", f"{ns}.dlq"):
        kafka_broker.create_topic(t)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=N, seed=8))]
    produce(kafka_broker.bootstrap, topic, docs[: N // 2])
    port = free_port()
    with RedisServer(appendonly=True) as server:
        proc = start(kafka_broker.bootstrap, server.url, ns, topic, "--batch-size", "50",
                     "--metrics-port", str(port), "--redis-socket-timeout", "2")  # fmt: skip
        # all the first half: its lag is 0 before the outage, so only a refresh shows more
        wait_until(lambda: committed_docs(server.url, ns) >= N // 2, 60, "the first half")
        wait_until(lambda: ready(port), 30, "ready")
        server.kill(signal.SIGKILL if loss == "killed" else signal.SIGSTOP)
        produce(kafka_broker.bootstrap, topic, docs[N // 2 :])  # input keeps arriving
        wait_until(lambda: not ready(port), 30, "unready during the outage")
        # the backlog shows while commits cannot: the stall and lag alerts need it
        wait_until(lambda: lag(port) > 0, 30, "the consumer lag metric to show the backlog")
        time.sleep(3)  # an outage of a few seconds: retries with backoff, no exit
        assert proc.poll() is None, proc.communicate()[1]
        assert healthy(port) and not ready(port)
        if loss == "killed":
            server.restart()
        else:
            server.kill(signal.SIGCONT)
        wait_until(lambda: ready(port), 60, "ready again after Redis is back")
        wait_until(lambda: committed_docs(server.url, ns) >= N, 120, "the topic to drain")
        err = stop(proc)
        info = redis_state(server.url, ns)
    assert info["docs"] == N  # nothing lost, nothing counted twice
    assert info["offsets"] == {f"{topic}:0": N}
    assert "Redis unreachable" in err and "Redis is back" in err
    assert err.count("Redis unreachable") == 1  # one outage, reported once


def test_an_idle_daemon_notices_redis_gone(kafka_broker: KafkaBroker) -> None:
    """With no input arriving the loop never touched Redis: /readyz said "ready" through a
    Redis outage until the next document came. An idle turn now reaches Redis every 5 s."""
    topic, ns = unique_name("g4i-in"), unique_name("g4i")
    for t in (topic, f"{ns}.events", f"{ns}.dlq"):
        kafka_broker.create_topic(t)
    produce(kafka_broker.bootstrap, topic, [json.dumps({"id": "a", "text": "storm"}).encode()])
    port = free_port()
    with RedisServer() as server:
        proc = start(kafka_broker.bootstrap, server.url, ns, topic, "--metrics-port", str(port),
                     "--redis-socket-timeout", "2")  # fmt: skip
        wait_until(lambda: committed_docs(server.url, ns) >= 1 and ready(port), 60, "ready")
        server.kill(signal.SIGKILL)  # and no more input
        wait_until(lambda: not ready(port), 30, "unready with Redis gone, though idle")
        assert proc.poll() is None and healthy(port)
        server.restart()
        wait_until(lambda: ready(port), 60, "ready again")
        stop(proc)


def stdin_run(url: str, ns: str) -> subprocess.Popen[str]:
    """``noveld run --input -`` against ``url``, fed by the test through a pipe."""
    return tracked(subprocess.Popen(
        [*NOVELD, "run", "--input", "-", "--namespace", ns, "--batch-size", "50",
         "--redis-url", url],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    ))  # fmt: skip


def feed(proc: subprocess.Popen[str], lines: list[str], close: bool = False) -> None:
    assert proc.stdin is not None
    proc.stdin.writelines(lines)
    proc.stdin.flush()
    if close:
        proc.stdin.close()


def test_redis_killed_under_a_stdin_run_is_waited_for() -> None:
    """A ``noveld run --input -`` whose Redis dies waits for it (more input piling up in the
    pipe), reloads the state and goes on: every document counted once. Whether the batch in
    flight was committed or not, the stored offset says which (it is stepped again if not)."""
    lines = [json.dumps(d) + "\n" for d in generate(SynthConfig(n_docs=2000, seed=3))]
    ns = unique_name("g4-stdin")
    with RedisServer(extra_args=["--appendfsync", "always"]) as server:
        proc = stdin_run(server.url, ns)
        feed(proc, lines[:1000])
        wait_until(lambda: committed_docs(server.url, ns) >= 1000, 60, "the first lines")
        server.kill(signal.SIGKILL)
        feed(proc, lines[1000:], close=True)
        time.sleep(3)  # an outage of a few seconds: the run waits, it does not exit
        assert proc.poll() is None, proc.communicate()[1]
        server.restart()
        assert proc.wait(timeout=60) == 0, proc.communicate()[1]
        assert proc.stderr is not None
        err = proc.stderr.read()
        info = redis_state(server.url, ns)
    assert "Redis unreachable" in err and "Redis is back" in err and "Traceback" not in err, err
    assert info["docs"] == 2000  # nothing lost, nothing counted twice
    assert info["offsets"] == {"-:0": 2000}


def test_redis_back_without_the_commits_of_a_stdin_run_stops_and_resumes() -> None:
    """Redis comes back *without* the run's commits (no persistence: it restarts empty). A file
    could be read again from the start; stdin cannot, so the run stops with exit 5 and says from
    where the input must come again. Piping it again resumes there: every document counted
    once."""
    lines = [json.dumps(d) + "\n" for d in generate(SynthConfig(n_docs=2000, seed=3))]
    ns = unique_name("g4-stdin-lost")
    with RedisServer(appendonly=False) as server:
        proc = stdin_run(server.url, ns)
        feed(proc, lines[:1000])
        wait_until(lambda: committed_docs(server.url, ns) >= 1000, 60, "the first lines")
        server.kill(signal.SIGKILL)
        feed(proc, lines[1000:], close=True)  # the next commit finds Redis gone
        time.sleep(1)
        assert proc.poll() is None, proc.communicate()[1]  # waiting for Redis
        server.restart()
        assert proc.wait(timeout=60) == 5
        assert proc.stderr is not None
        err = proc.stderr.read()
        again = subprocess.run(
            [*NOVELD, "run", "--input", "-", "--namespace", ns, "--batch-size", "50",
             "--redis-url", server.url],
            input="".join(lines), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        info = redis_state(server.url, ns)
    assert "Traceback" not in err, err
    assert "Redis came back without the commits of lines 1 to 1000 of stdin" in err, err
    assert "The first 0 lines of stdin are committed" in err, err
    assert again.returncode == 0, again.stderr
    assert info["docs"] == 2000
    assert info["offsets"] == {"-:0": 2000}


def test_a_file_run_whose_redis_comes_back_empty_stops(tmp_path: Path) -> None:
    """Redis without persistence restarted under a file run into a namespace that also held
    an archive (a warm start): the run reloaded an empty namespace and went on from line 0 —
    the archive's state gone without an error, its cluster ids handed out again under event
    ids already used, exit 0 — although its own start-up warning promises exit 6. It now
    stops with exit 6, as the Kafka daemon does."""
    archive, path = tmp_path / "archive.jsonl", tmp_path / "in.jsonl"
    archive.write_text(
        "".join(json.dumps(d) + "\n" for d in generate(SynthConfig(n_docs=500, seed=4)))
    )
    path.write_text(
        "".join(json.dumps(d) + "\n" for d in generate(SynthConfig(n_docs=40_000, seed=5)))
    )
    ns = unique_name("g4-empty")
    with RedisServer(appendonly=False) as server:
        first = subprocess.run(
            [*NOVELD, "run", "--input", str(archive), "--namespace", ns, "--redis-url",
             server.url], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert first.returncode == 0, first.stderr
        proc = tracked(subprocess.Popen(
            [*NOVELD, "run", "--input", str(path), "--namespace", ns, "--batch-size", "20",
             "--redis-url", server.url],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
        wait_until(lambda: committed_docs(server.url, ns) >= 2500, 60, "the first commits")
        server.kill(signal.SIGKILL)
        time.sleep(1)
        server.restart()  # nothing persisted: the namespace is gone
        assert proc.wait(timeout=120) == 6
        assert proc.stderr is not None
        err = proc.stderr.read()
    assert "came back from the outage without any state" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("then", ["restart", "sigterm"])
def test_redis_killed_under_a_file_run(tmp_path: Path, then: str) -> None:
    """A file run whose Redis dies (AOF everysec: the restarted server may lack its last
    second of commits) waits for it, reloads and reads the file again from the stored offset:
    every document counted once. SIGTERM while it waits stops it with exit 5 and where to
    resume; a second run finishes the file."""
    n = 40_000
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in generate(SynthConfig(n_docs=n, seed=5))))
    ns = unique_name("g4-file")
    run = [*NOVELD, "run", "--input", str(path), "--namespace", ns, "--batch-size", "20"]
    with RedisServer(appendonly=True) as server:
        proc = tracked(subprocess.Popen(
            [*run, "--redis-url", server.url],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
        wait_until(lambda: committed_docs(server.url, ns) >= 2000, 60, "the first commits")
        server.kill(signal.SIGKILL)
        time.sleep(2)
        assert proc.poll() is None, proc.communicate()[1]
        if then == "restart":
            server.restart()
            assert proc.wait(timeout=120) == 0, proc.communicate()[1]
        else:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 5
            server.restart()
        assert proc.stderr is not None
        err = proc.stderr.read()
        if then == "sigterm":
            again = subprocess.run(
                [*run, "--redis-url", server.url], capture_output=True, text=True, timeout=300
            )
            assert again.returncode == 0, again.stderr
        info = redis_state(server.url, ns)
    assert "Redis unreachable" in err and "Traceback" not in err, err
    if then == "restart":
        assert "Redis is back" in err, err
    else:
        assert "stopped while Redis was unreachable" in err, err
        assert f"Redis keeps {path} as of its last commit" in err, err
    assert info["docs"] == n  # nothing lost, nothing counted twice
    assert info["offsets"] == {f"{path}:0": n}


def test_a_rebalance_during_the_outage_waits_for_redis(kafka_broker: KafkaBroker) -> None:
    """Another member joins and leaves the group while Redis is down: the daemon's assignment
    callback cannot claim its partitions or read their offsets then. It must not die (an
    exception in a rebalance callback broke kafka-python's poll: traceback, exit 1); the
    partitions wait, paused, and are claimed once Redis is back — every document counted once."""
    from kafka import KafkaConsumer

    topic, ns = unique_name("g4-rb"), unique_name("g4rb")
    kafka_broker.create_topic(topic, partitions=2)
    for t in (f"{ns}.events", f"{ns}.dlq"):
        kafka_broker.create_topic(t)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=2000, seed=4))]
    produce(kafka_broker.bootstrap, topic, docs[:1000])
    with RedisServer(appendonly=True) as server:
        proc = start(kafka_broker.bootstrap, server.url, ns, topic, "--batch-size", "50",
                     "--session-timeout-ms", "6000", "--redis-socket-timeout", "2")  # fmt: skip
        wait_until(lambda: committed_docs(server.url, ns) >= 1000, 60, "the first half")
        server.kill(signal.SIGKILL)
        produce(kafka_broker.bootstrap, topic, docs[1000:])
        other = KafkaConsumer(topic, bootstrap_servers=kafka_broker.bootstrap, group_id=ns,
                              session_timeout_ms=6000, enable_auto_commit=False)  # fmt: skip
        deadline = time.monotonic() + 30
        while not other.assignment() and time.monotonic() < deadline:
            other.poll(timeout_ms=200)  # joins: the daemon's partitions are reassigned
        assert other.assignment(), "the second member never got a partition"
        other.close()  # leaves: everything goes back to the daemon, Redis still down
        time.sleep(4)
        assert proc.poll() is None, proc.communicate()[1]
        server.restart()
        wait_until(lambda: committed_docs(server.url, ns) >= 2000, 120, "the topic to drain")
        err = stop(proc)
        info = redis_state(server.url, ns)
    assert info["docs"] == 2000  # nothing lost, nothing counted twice
    assert sum(info["offsets"].values()) == 2000
    assert "Traceback" not in err and "Redis is back" in err


def test_a_namespace_emptied_by_an_outage_stops_the_daemon_and_its_restarts(
    kafka_broker: KafkaBroker,
) -> None:
    """Redis comes back without persistence, empty. The daemon used to reload "nothing", seek
    every partition to 0 and start the model again — silently, with cluster ids (and so event
    ids) from c0 again; a restarted daemon did the same. Now it stops with exit 6, and so does
    every restart (the consumer group's committed offsets witness that the namespace had read
    the topic), until the operator says the namespace may start from nothing."""
    topic, ns = unique_name("g4-empty"), unique_name("g4e")
    for t in (topic, f"{ns}.events", f"{ns}.dlq"):
        kafka_broker.create_topic(t)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=1500, seed=6))]
    produce(kafka_broker.bootstrap, topic, docs[:1000])
    with RedisServer(appendonly=False) as server:
        proc = start(kafka_broker.bootstrap, server.url, ns, topic, "--redis-socket-timeout", "2")
        wait_until(lambda: committed_docs(server.url, ns) >= 1000, 60, "the first part")
        server.kill(signal.SIGKILL)
        produce(kafka_broker.bootstrap, topic, docs[1000:])  # its commit meets the outage
        time.sleep(3)
        assert proc.poll() is None, proc.communicate()[1]  # riding the outage out
        server.restart()  # no AOF, no RDB: empty
        assert proc.wait(timeout=60) == 6
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert "came back from the outage without any state" in err, err

        again = start(kafka_broker.bootstrap, server.url, ns, topic)
        assert again.wait(timeout=60) == 6
        assert again.stderr is not None
        refused = again.stderr.read()
        assert f"consumer group '{ns}' has read {topic}:0 up to 1000" in refused, refused
        assert committed_docs(server.url, ns) == 0  # refused before reading anything

        fresh = start(kafka_broker.bootstrap, server.url, ns, topic, "--accept-empty-state")
        wait_until(lambda: committed_docs(server.url, ns) >= 1500, 60, "the topic again")
        stop(fresh)
        info = redis_state(server.url, ns)
    assert info["docs"] == 1500 and info["offsets"] == {f"{topic}:0": 1500}
    for out in (err, refused):
        assert "Traceback" not in out
