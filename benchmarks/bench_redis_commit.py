"""Redis commit latency: the atomic Lua commit of one batch (delta + offsets + outbox).

    python benchmarks/bench_redis_commit.py [--data FILE] [--batch-size 1000] [--times 5]
                                             [--redis-url URL] [--replica [--replicas-to-ack 1]]
                                             [--appendfsync everysec|always]
                                             [--likelihood multinomial|edcm] [--no-refresh]

Without --redis-url a private Redis-protocol server is started (tests/servers/), with
--replica also a replica of it. Runs the real pipeline with the RedisStore and reports the
commit stage per batch (p50/p99), the publish stage (where ``--replicas-to-ack`` waits for the
replica) and throughput. ``--appendfsync always`` runs the private server with an fsync per
write (what docs/operations.md recommends), to measure its cost against ``everysec``.
``--no-refresh`` turns ``batch.refresh`` off, to measure what the pre-seat read costs a lone
writer (it finds nothing to apply).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import add_data_option, machine  # noqa: E402
from servers.redis_server import RedisServer, start_replica  # noqa: E402

from noveld.connectors.file_sinks import DlqFileSink  # noqa: E402
from noveld.connectors.jsonl import JsonlSource  # noqa: E402
from noveld.daemon.pipeline import Pipeline  # noqa: E402
from noveld.daemon.runner import settle_heap  # noqa: E402
from noveld.daemon.settings import load_settings  # noqa: E402
from noveld.daemon.sinks import CollectingEvents, FileDeadLetters  # noqa: E402
from noveld.state.base import NamespaceState  # noqa: E402
from noveld.state.redis.store import RedisStore  # noqa: E402


def run(
    url: str,
    data: Path,
    batch_size: int,
    times: int,
    replicas_to_ack: int = 0,
    likelihood: str = "multinomial",
    refresh: bool = True,
) -> None:
    client = redis.Redis.from_url(url)
    client.flushall()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            None,
            {
                "namespace": "bench",
                "dlq": f"{tmp}/dlq.jsonl",
                "batch": {"max_docs": batch_size, "refresh": refresh},
                "model": {"likelihood": likelihood},
            },
        )
        store = RedisStore(client, "bench", replicas_to_ack=replicas_to_ack)
        refreshes: list[float] = []  # the pre-seat read's time per batch
        take_in = store.refresh

        def timed_refresh(state: NamespaceState) -> dict[int, int]:
            t = time.perf_counter()
            seated = take_in(state)
            refreshes.append(time.perf_counter() - t)
            return seated

        store.refresh = timed_refresh  # type: ignore[method-assign]
        sink = CollectingEvents()
        pipe = Pipeline(
            settings,
            store,
            sink,
            FileDeadLetters(DlqFileSink(Path(tmp) / "dlq.jsonl")),
        )
        key = f"{data}:0"
        commits, publishes, total = [], [], []
        with_events: list[float] = []  # publish stage of the batches that had events to send
        t0 = time.perf_counter()
        first = 0
        n = 0
        for _ in range(times):  # the file again, as later offsets of one input
            src = JsonlSource(str(data))
            while recs := src.read_batch(batch_size):
                nxt = first + len(recs)
                sent = len(sink.events)
                rep = pipe.step(recs, {key: first}, {key: nxt})
                settle_heap()  # as the daemon's loop does after a batch
                if len(sink.events) > sent:
                    with_events.append(rep.stage_seconds["publish"])
                first = nxt
                commits.append(rep.stage_seconds["commit"])
                publishes.append(rep.stage_seconds["publish"])
                total.append(sum(rep.stage_seconds.values()))
                n += rep.valid
        dt = time.perf_counter() - t0
        clusters = rep.clusters_active
    c = np.array(commits[1:]) * 1e3  # the first batch also registers the Lua script
    pub = np.array(publishes[1:]) * 1e3
    ev = np.array(with_events[1:] or [0.0]) * 1e3
    print(
        f"batches: {len(commits)} of {batch_size} docs; {n:,} docs in {dt:.2f} s "
        f"({n / dt:,.0f} docs/s, pipeline + Redis); {likelihood}, {clusters:,} clusters at the end"
    )
    t = np.array(total[1:]) * 1e3
    r = np.array(refreshes[1:] or [0.0]) * 1e3
    print(
        f"batch (all stages): p50 {np.median(t):.2f} ms; refresh "
        + (f"p50 {np.median(r):.3f} ms  p99 {np.percentile(r, 99):.3f} ms" if refresh else "off")
    )
    print(
        f"commit per batch: p50 {np.median(c):.2f} ms  p99 {np.percentile(c, 99):.2f} ms  "
        f"max {c.max():.2f} ms"
    )
    waits = client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0)
    print(
        f"publish per batch (outbox read, replica WAIT, sink, ack): p50 {np.median(pub):.2f} ms  "
        f"p99 {np.percentile(pub, 99):.2f} ms; WAIT calls {waits}"
    )
    print(
        f"publish on the {len(with_events)} batches with events: p50 {np.median(ev):.2f} ms  "
        f"p99 {np.percentile(ev, 99):.2f} ms"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--redis-url")
    p.add_argument("--times", type=int, default=5, help="passes over the file (steady state)")
    p.add_argument("--replica", action="store_true", help="give the private server a replica")
    p.add_argument(
        "--replicas-to-ack", type=int, default=0, help="redis.replicas_to_ack (default 0)"
    )
    p.add_argument("--likelihood", choices=["multinomial", "edcm"], default="multinomial")
    p.add_argument(
        "--appendfsync",
        choices=["everysec", "always"],
        default="everysec",
        help="the private server's AOF fsync policy",
    )
    p.add_argument("--no-refresh", action="store_true", help="batch.refresh off")
    a = p.parse_args()
    print(f"machine: {machine()}")
    if a.redis_url:
        run(a.redis_url, a.data, a.batch_size, a.times, a.replicas_to_ack, a.likelihood,
            not a.no_refresh)  # fmt: skip
        return
    with RedisServer(extra_args=["--appendfsync", a.appendfsync]) as server:
        replica = start_replica(server) if a.replica else None
        try:
            print(
                f"server: private, AOF {a.appendfsync}, {server.url}"
                + (f", one replica; replicas_to_ack {a.replicas_to_ack}" if replica else "")
            )
            run(server.url, a.data, a.batch_size, a.times, a.replicas_to_ack, a.likelihood,
                not a.no_refresh)  # fmt: skip
        finally:
            if replica is not None:
                replica.stop()


if __name__ == "__main__":
    main()
