"""G4 (DESIGN §6): redis-server (AOF everysec) lost mid-stream, two ways. ``killed``: SIGKILL,
then a restart on the same port. ``hung``: SIGSTOP, then SIGCONT — a server that stops
answering without closing its connections, as a network that drops packets looks; only the
socket timeout (``--redis-socket-timeout``) can tell, and without it the daemon blocks for as
long as TCP keeps the connection. Either way the daemon goes unready and pauses, does not crash
or restart, and when Redis answers again it reloads the state and re-seeks to the stored
offsets: every document counted exactly once, nothing lost — even the commits Redis lost from
its last second of AOF are redone from Kafka."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from cli_runner import NOVELD, redis_state
from harness import KafkaBroker, RedisServer, free_port, unique_name
from kafka_daemon import committed_docs, produce, start, stop, wait_until

from noveld.synth import SynthConfig, generate

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]
N = 8000


def ready(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=3).status == 200
    except urllib.error.HTTPError:
        return False


def healthy(port: int) -> bool:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3).status == 200


@pytest.mark.parametrize("loss", ["killed", "hung"])
def test_g4_redis_lost_and_back_mid_stream(kafka_broker: KafkaBroker, loss: str) -> None:
    topic, ns = unique_name("g4-in"), unique_name("g4")
    for t in (topic, f"{ns}.events", f"{ns}.dlq"):
        kafka_broker.create_topic(t)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=N, seed=8))]
    produce(kafka_broker.bootstrap, topic, docs[: N // 2])
    port = free_port()
    with RedisServer(appendonly=True) as server:
        proc = start(kafka_broker.bootstrap, server.url, ns, topic, "--batch-size", "50",
                     "--metrics-port", str(port), "--redis-socket-timeout", "2")  # fmt: skip
        wait_until(lambda: committed_docs(server.url, ns) >= N // 4, 60, "first commits")
        wait_until(lambda: ready(port), 30, "ready")
        server.kill(signal.SIGKILL if loss == "killed" else signal.SIGSTOP)
        produce(kafka_broker.bootstrap, topic, docs[N // 2 :])  # input keeps arriving
        wait_until(lambda: not ready(port), 30, "unready during the outage")
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


def test_g4_redis_killed_under_a_stdin_run_stops_cleanly_and_resumes() -> None:
    """Without Kafka there is no input to pause: a ``noveld run --input -`` whose Redis dies
    stops with exit 5 and says how far the input is committed (no traceback); piping the same
    input again once Redis is back resumes after that line: every document counted once."""
    lines = [json.dumps(d) + "\n" for d in generate(SynthConfig(n_docs=2000, seed=3))]
    ns = unique_name("g4-stdin")
    run = [*NOVELD, "run", "--input", "-", "--namespace", ns, "--batch-size", "50"]
    with RedisServer(extra_args=["--appendfsync", "always"]) as server:
        proc = subprocess.Popen(
            [*run, "--redis-url", server.url],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.writelines(lines[:1000])
        proc.stdin.flush()
        wait_until(lambda: committed_docs(server.url, ns) >= 1000, 60, "the first lines")
        server.kill(signal.SIGKILL)
        # the run may stop before it reads these (an idle turn already found Redis gone)
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.writelines(lines[1000:])
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
        assert proc.wait(timeout=60) == 5
        err = proc.stderr.read()
        server.restart()
        again = subprocess.run(
            [*run, "--redis-url", server.url], input="".join(lines), capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        info = redis_state(server.url, ns)
    assert "Redis unreachable" in err and "Traceback" not in err, err
    assert "The first 1000 lines of stdin are committed" in err
    assert again.returncode == 0, again.stderr
    assert info["docs"] == 2000
    assert info["offsets"] == {"-:0": 2000}
