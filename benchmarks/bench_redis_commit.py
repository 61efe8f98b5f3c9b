"""Redis commit latency: the atomic Lua commit of one batch (delta + offsets + outbox).

    python benchmarks/bench_redis_commit.py [--data FILE] [--batch-size 1000] [--times 5]
                                             [--redis-url URL]

Without --redis-url a private Redis-protocol server is started (tests/harness.py). Runs the real
pipeline with the RedisStore and reports the commit stage per batch (p50/p99) and throughput.
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
from _common import DEFAULT_DATA, machine  # noqa: E402
from harness import RedisServer  # noqa: E402

from noveld.connectors.jsonl import DlqFileSink, JsonlSource  # noqa: E402
from noveld.daemon.embedded import CollectingEvents, FileDeadLetters  # noqa: E402
from noveld.daemon.pipeline import Pipeline  # noqa: E402
from noveld.daemon.settings import load_settings  # noqa: E402
from noveld.state.redis_store import RedisStore  # noqa: E402


def run(url: str, data: Path, batch_size: int, times: int) -> None:
    client = redis.Redis.from_url(url)
    client.flushall()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            None,
            {"namespace": "bench", "dlq": f"{tmp}/dlq.jsonl", "batch": {"max_docs": batch_size}},
        )
        store = RedisStore(client, "bench")
        pipe = Pipeline(
            settings,
            store,
            CollectingEvents(),
            FileDeadLetters(DlqFileSink(Path(tmp) / "dlq.jsonl")),
        )
        key = f"{data}:0"
        commits, total = [], []
        t0 = time.perf_counter()
        first = 0
        n = 0
        for _ in range(times):  # the file again, as later offsets of one input
            src = JsonlSource(str(data))
            while recs := src.read_batch(batch_size):
                nxt = first + len(recs)
                rep = pipe.step(recs, {key: first}, {key: nxt})
                first = nxt
                commits.append(rep.stage_seconds["commit"])
                total.append(sum(rep.stage_seconds.values()))
                n += rep.valid
        dt = time.perf_counter() - t0
    c = np.array(commits[1:]) * 1e3  # the first batch also registers the Lua script
    print(
        f"batches: {len(commits)} of {batch_size} docs; {n:,} docs in {dt:.2f} s "
        f"({n / dt:,.0f} docs/s, pipeline + Redis)"
    )
    print(
        f"commit per batch: p50 {np.median(c):.2f} ms  p99 {np.percentile(c, 99):.2f} ms  "
        f"max {c.max():.2f} ms"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--redis-url")
    p.add_argument("--times", type=int, default=5, help="passes over the file (steady state)")
    a = p.parse_args()
    print(f"machine: {machine()}")
    if a.redis_url:
        run(a.redis_url, a.data, a.batch_size, a.times)
        return
    with RedisServer() as server:
        print(f"server: private, AOF everysec, {server.url}")
        run(server.url, a.data, a.batch_size, a.times)


if __name__ == "__main__":
    main()
