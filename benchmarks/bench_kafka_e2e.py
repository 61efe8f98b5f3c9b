"""End-to-end production mode: Kafka topic → `noveld run` (subprocess) → Redis + events topic.

    python benchmarks/bench_kafka_e2e.py [--data FILE] [--times 5] [--batch-size 500]
                                         [--featurizer hybrid --likelihood hybrid]
                                         [--emit-assignments [batch]] [--ui on|watched]

Starts a private tansu broker and Redis-protocol server (tests/servers/), produces the data,
starts the daemon and measures the time from its first committed batch until the topic is
drained (so consumer-group join time is excluded and reported separately). The commit-stage p99
is read from the daemon's own ``noveld_stage_duration_seconds`` histogram (an upper bucket
bound). Then lag recovery: the daemon is SIGKILLed, more data is produced while it is down, and
the time from restart until it has caught up is reported. ``--ui on`` serves the web view;
``--ui watched`` also asks its three APIs every ``--ui-every`` seconds (3: as an open page does)
while the topic drains.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import redis
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import ASSIGNMENT_FLAGS, add_assignment_option, add_data_option, machine  # noqa: E402
from servers.kafka_broker import TEST_SESSION_TIMEOUT_MS, KafkaBroker  # noqa: E402
from servers.ports import free_port  # noqa: E402
from servers.redis_server import RedisServer  # noqa: E402


def commit_p99_bound(port: int) -> float:
    """Smallest bucket bound of the commit-stage histogram holding ≥ 99 % of the batches."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    buckets = []
    for line in text.splitlines():
        if line.startswith("noveld_stage_duration_seconds_bucket") and 'stage="commit"' in line:
            le = line.split('le="')[1].split('"')[0]
            buckets.append((float(le), float(line.rsplit(" ", 1)[1])))
    total = max(c for _, c in buckets)
    return min(le for le, c in buckets if c >= 0.99 * total)


def produce(bootstrap: str, lines: list[bytes]) -> float:
    t0 = time.perf_counter()
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=256 * 1024
    )
    for line in lines:
        producer.send("in", value=line)
    producer.flush()
    producer.close()
    return time.perf_counter() - t0


def wait_docs(client: redis.Redis, n: int, pid: int) -> tuple[float, int, float]:
    """Poll the committed document count until it reaches n; (time of first change, count
    then, CPU seconds of process ``pid`` then)."""
    start = int(client.hget("noveld:{bench}:counters", "docs") or 0)
    first: tuple[float, int, float] | None = None
    done = start
    while done < n:
        done = int(client.hget("noveld:{bench}:counters", "docs") or 0)
        if done > start and first is None:
            first = (time.perf_counter(), done, cpu_seconds(pid))
        time.sleep(0.02)
    assert first is not None
    return first


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def watch(url: str, done: threading.Event, every: float) -> None:
    """Ask the daemon's web view for what its page asks every ``every`` seconds until ``done``."""
    while not done.wait(every):
        for api in ("stories?limit=25", "births?limit=100", "status"):
            with contextlib.suppress(OSError):  # not serving yet, or restarting
                urllib.request.urlopen(url + "api/" + api, timeout=5).read()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--times", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument(
        "--likelihood", choices=["multinomial", "edcm", "vmf", "hybrid"], default="multinomial"
    )
    p.add_argument("--featurizer", choices=["words", "semantic", "hybrid"], default="words")
    add_assignment_option(p)
    p.add_argument(
        "--ui",
        choices=["off", "on", "watched"],
        default="off",
        help="serve the web view (on), and ask its APIs as its page does (watched)",
    )
    p.add_argument(
        "--ui-every", type=float, default=3.0, help="--ui watched: seconds between two rounds"
    )
    a = p.parse_args()
    lines = [line for line in a.data.read_bytes().splitlines() if line.strip()] * a.times
    print(f"machine: {machine()}")
    with KafkaBroker() as broker, RedisServer() as server:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(t, 1, 1) for t in ("in", "events", "dlq")])
        admin.close()
        print(f"produced {len(lines):,} docs in {produce(broker.bootstrap, lines):.1f} s")
        client = redis.Redis.from_url(server.url)
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "noveld",  # the console script's entry point, with its environment defaults
            "run",
            "--quiet",
            "--kafka-bootstrap",
            broker.bootstrap,
            "--input-topic",
            "in",
            "--events-topic",
            "events",
            "--dlq-topic",
            "dlq",
            "--redis-url",
            server.url,
            "--namespace",
            "bench",
            "--batch-size",
            str(a.batch_size),
            "--likelihood",
            a.likelihood,
            "--featurizer",
            a.featurizer,
            "--session-timeout-ms",
            str(TEST_SESSION_TIMEOUT_MS),
            "--metrics-port",
            str(port),
            *([ASSIGNMENT_FLAGS[a.emit_assignments]] if a.emit_assignments else []),
        ]
        done = threading.Event()
        if a.ui != "off":
            ui_port = free_port()
            cmd += ["--ui-port", str(ui_port)]
            if a.ui == "watched":
                url = f"http://127.0.0.1:{ui_port}/"
                threading.Thread(target=watch, args=(url, done, a.ui_every), daemon=True).start()
        env = {**os.environ, "NOVELD_BATCH__MAX_WAIT_MS": "100"}
        t_start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env)
        t_first, n_first, cpu_first = wait_docs(client, len(lines), proc.pid)
        t_end, cpu_end = time.perf_counter(), cpu_seconds(proc.pid)
        rate = (len(lines) - n_first) / (t_end - t_first)
        p99 = commit_p99_bound(port)
        print(f"start-up incl. group join: {t_first - t_start:.1f} s")
        print(
            f"drained {len(lines):,} docs; steady state {rate:,.0f} docs/s "
            f"(batch {a.batch_size}, {a.likelihood} likelihood, {a.featurizer} featurizer, "
            f"commit every batch); commit p99 <= {p99 * 1e3:g} ms; "
            f"daemon CPU {cpu_end - cpu_first:.2f} s while draining"
            + (f"; web view {a.ui}" if a.ui != "off" else "")
        )
        # lag recovery: kill the daemon, let a backlog build up, restart, time the catch-up
        proc.kill()
        proc.wait()
        backlog = lines[: len(lines) // 2]
        produce(broker.bootstrap, backlog)
        target = len(lines) + len(backlog)
        t_restart = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env)
        t_resume, _, _ = wait_docs(client, target, proc.pid)
        t_caught_up = time.perf_counter()
        print(
            f"lag recovery after SIGKILL: backlog {len(backlog):,} docs; first commit "
            f"{t_resume - t_restart:.1f} s after restart (process start + group join), "
            f"caught up after {t_caught_up - t_restart:.1f} s"
        )
        done.set()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
