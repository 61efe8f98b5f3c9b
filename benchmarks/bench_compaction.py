"""Vocabulary compaction bounds the vocabulary under forgetting: a stream whose stories keep
bringing words of their own (names), run with compaction off and on.

    python benchmarks/bench_compaction.py [--docs 1000000] [--half-life 20000] [--redis]

The stream (``tests/streams.py``'s fading stories: 100 documents a story, 60 words of its own,
20 shared words) brings ~0.6 new words per document, so the vocabulary never saturates. The
real pipeline runs it in-process (``--redis``: into a private Redis-protocol server, whose
memory is reported too), and every 10 % prints the vocabulary's entries, every word ever
seen, RSS and throughput; at the end the compactions and the longest one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import machine  # noqa: E402
from bench_memory import rss_mib  # noqa: E402
from streams import iter_fading_stories  # noqa: E402

from noveld.connectors.jsonl import Record  # noqa: E402
from noveld.daemon.pipeline import Pipeline  # noqa: E402
from noveld.daemon.settings import load_settings  # noqa: E402
from noveld.daemon.sinks import CollectingEvents  # noqa: E402
from noveld.schema import SourcePosition  # noqa: E402
from noveld.state.base import StateStore  # noqa: E402
from noveld.state.memory import MemoryStore  # noqa: E402


class Discard:
    """Dead-letter sink of a stream that has none."""

    def send(self, *args: object) -> None:
        raise AssertionError("the synthetic stream has no invalid document")

    def flush(self) -> None:
        pass


def run(n_docs: int, compact_at: int, half_life: float, redis_url: str | None,
        batch: int) -> None:  # fmt: skip
    settings = load_settings(
        None,
        {
            "namespace": f"bench{compact_at}",
            "dlq": "/dev/null",
            "model": {"half_life_docs": half_life},
            "state": {"compact_vocabulary_at": compact_at},
        },
    )
    store: StateStore
    client = None
    if redis_url is not None:
        import redis

        from noveld.state.redis.store import RedisStore

        client = redis.Redis.from_url(redis_url)
        store = RedisStore(client, settings.namespace)
        store.claim(["in:0"])
    else:
        store = MemoryStore(None)
    pipe = Pipeline(settings, store, CollectingEvents(), Discard())
    pauses: list[float] = []
    compact = pipe.compact_vocabulary

    def timed(in_use: np.ndarray | None = None) -> bool:
        t = time.perf_counter()
        done = compact(in_use)
        pauses.append(time.perf_counter() - t)
        return done

    pipe.compact_vocabulary = timed  # type: ignore[method-assign]
    every = n_docs // 10
    stream = iter_fading_stories(n_docs, seed=1, story_docs=100, own_words=60)
    t0 = time.perf_counter()
    label = f"compact at {compact_at:,}" if compact_at else "compaction off"
    print(f"-- {label}")
    for i in range(0, n_docs, batch):
        chunk = [
            Record(json.dumps(d).encode(), SourcePosition(topic="in", partition=0, offset=i + j))
            for j, d in zip(range(min(batch, n_docs - i)), stream, strict=False)
        ]
        pipe.step(chunk, {"in:0": i}, {"in:0": i + len(chunk)})
        if pipe.events.events:  # type: ignore[attr-defined]
            pipe.events.events.clear()  # type: ignore[attr-defined]
        done = i + len(chunk)
        if done // every != i // every or done == n_docs:
            v = pipe.vocab
            extra = ""
            if client is not None:
                ns = settings.namespace
                used = sum(int(client.memory_usage(f"noveld:{{{ns}}}:{k}") or 0)
                           for k in ("vocab", "vocab_idx", "vocab_gone"))  # fmt: skip
                extra = f"  Redis vocabulary keys {used / 2**20:6.1f} MiB"
            print(
                f"{done:>10,} docs  vocabulary {len(v):8,}  words ever {len(v) + v.dropped:8,}  "
                f"RSS {rss_mib():7.1f} MiB  {done / (time.perf_counter() - t0):8,.0f} docs/s"
                f"{extra}",
                flush=True,
            )
    if pauses:
        print(
            f"compactions {len(pauses)} (longest {max(pauses) * 1000:.0f} ms, "
            f"all {sum(pauses):.2f} s of {time.perf_counter() - t0:.1f} s)"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--half-life", type=float, default=20_000)
    p.add_argument(
        "--compact-at",
        default="0,100000",
        help="state.compact_vocabulary_at values to compare, each in a fresh process (0 = off)",
    )
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--redis", action="store_true", help="state in a private Redis server")
    p.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if not a.single:
        print(f"machine: {machine()}")
        print(f"stream: {a.docs:,} docs, {a.docs // 100:,} stories; half-life "
              f"{a.half_life:,.0f} docs")  # fmt: skip
        base = [sys.executable, __file__, "--docs", str(a.docs), "--half-life",
                str(a.half_life), "--batch-size", str(a.batch_size),
                *(["--redis"] if a.redis else []), "--single"]  # fmt: skip
        for at in a.compact_at.split(","):
            subprocess.run([*base, "--compact-at", at], check=True)
        return
    at = int(a.compact_at)
    if a.redis:
        from servers.redis_server import RedisServer

        with RedisServer() as server:
            run(a.docs, at, a.half_life, server.url, a.batch_size)
    else:
        run(a.docs, at, a.half_life, None, a.batch_size)


if __name__ == "__main__":
    main()
