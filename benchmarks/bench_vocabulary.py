"""The vocabulary is the one part of the state that forgetting does not bound: how fast does it
grow, and what does each word cost?

    python benchmarks/bench_vocabulary.py [--data FILE] [--words 200000]

1. Growth: the distinct words after the first N documents of FILE, fitted to Heaps' law
   ``V = k·N^b`` (least squares on logs), with what the fit projects for longer streams.
2. Cost per word: ``--words`` distinct words (FILE's words, suffixed to make them new, so their
   lengths are FILE's) interned into a :class:`~noveld.models.vocabulary.Vocabulary` (Python
   objects, measured with tracemalloc, plus the 8-byte postings head per word of the statistics) and
   into a private Redis-protocol server through the namespace's interning script (``MEMORY
   USAGE`` of the ``vocab`` list and ``vocab_idx`` hash).
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import add_data_option, load_texts, machine  # noqa: E402
from servers.redis_server import RedisServer  # noqa: E402

from noveld.featurize import Tokenizer  # noqa: E402
from noveld.models.vocabulary import Vocabulary  # noqa: E402
from noveld.state.base import NamespaceState  # noqa: E402
from noveld.state.redis.store import RedisStore  # noqa: E402

POSTINGS_HEAD_BYTES = 8  # MultinomialStats.head: one int64 per word id
PROJECT_DOCS = (1_000_000, 10_000_000, 100_000_000)


def growth(texts: list[str]) -> tuple[list[tuple[int, int]], float, float]:
    """(documents, distinct words) at ~20 points, and Heaps' law's k and b fitted to them."""
    tok, seen = Tokenizer(), set[str]()
    marks = sorted({int(x) for x in np.geomspace(100, len(texts), 20)})
    points = []
    for i, text in enumerate(texts, 1):
        seen.update(tok.tokenize(text))
        if i in marks:
            points.append((i, len(seen)))
    n, v = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    b, log_k = np.polyfit(n, v, 1)
    return points, float(np.exp(log_k)), float(b)


def new_words(texts: list[str], count: int) -> list[str]:
    """``count`` distinct words with the lengths of ``texts``' distinct words (plus a suffix)."""
    tok = Tokenizer()
    pool = sorted({w for t in texts for w in tok.tokenize(t)})  # "_" never occurs in a token
    return [f"{pool[i % len(pool)]}_{i // len(pool)}" for i in range(count)]


def process_bytes(words: list[str]) -> float:
    """Python memory per word of a Vocabulary holding ``words``, plus the postings head."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    fresh = [w.encode().decode() for w in words]  # own copies, as the tokenizer makes them
    vocab = Vocabulary()
    vocab.ids(fresh)
    del fresh
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(vocab) == len(words)
    return (after - before) / len(words) + POSTINGS_HEAD_BYTES


def redis_bytes(words: list[str]) -> float:
    """Redis memory per word of a namespace's vocabulary holding ``words``."""
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        store = RedisStore(client, "vocab")
        state = NamespaceState(fingerprint={}, stats=None)  # type: ignore[arg-type]
        for i in range(0, len(words), 1000):
            store.intern(state, len(state.vocab), words[i : i + 1000])
        assert len(state.vocab) == len(words)
        used = sum(
            int(client.memory_usage(store.keys[k], samples=0) or 0) for k in ("vocab", "vocab_idx")
        )
    return used / len(words)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--words", type=int, default=200_000, help="distinct words for the cost")
    a = p.parse_args()
    texts = [str(r["text"]) for r in load_texts(a.data)]
    print(f"machine: {machine()}")
    points, k, b = growth(texts)
    print(f"{a.data.name}: distinct words after N documents")
    for n, v in [*points[:: max(1, len(points) // 6)], points[-1]]:
        print(f"  N = {n:>7,}  V = {v:>7,}  (Heaps fit {k * n**b:>9,.0f})")
    print(f"Heaps' law fit: V = {k:.1f} · N^{b:.3f}")
    words = new_words(texts, a.words)
    per_process, per_redis = process_bytes(words), redis_bytes(words)
    print(
        f"cost per word ({a.words:,} words): {per_process:.0f} B in each replica's process, "
        f"{per_redis:.0f} B in Redis"
    )
    for n in PROJECT_DOCS:
        v = k * n**b
        print(
            f"  projected at {n:>11,} documents: {v:>12,.0f} words, "
            f"{v * per_process / 2**20:>8,.0f} MiB per replica, {v * per_redis / 2**20:>8,.0f} "
            "MiB in Redis"
        )


if __name__ == "__main__":
    main()
