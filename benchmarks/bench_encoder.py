"""Throughput of the built-in text encoder (tokenize, mean-pool, normalise) on one core.

    python benchmarks/bench_encoder.py [--data FILE] [--dims 64 128 256] [--batch 256]

Pins itself to one CPU and asks the tokenizer for one thread, encodes the file's texts in
batches of ``--batch`` (the daemon's mini-batch), and prints docs/s and tokens per document for
each dimension (best of ``--repeats`` passes, after one warm-up pass that compiles the kernel).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers starts its thread pool
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, load_texts, machine

from noveld.featurize.encoder import WORDLLAMA_DIMENSIONS, StaticVectors


def run(texts: list[str], dimension: int, batch: int, repeats: int) -> tuple[float, float]:
    """(docs/s, tokens per document) of the best pass."""
    encoder = StaticVectors(dimension)
    encoder.encode(texts[:batch])  # compiles (or loads) the pooling kernel
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(0, len(texts), batch):
            encoder.encode(texts[i : i + batch])
        best = min(best, time.perf_counter() - start)
    tokens = encoder.token_ids(texts).bounds[-1]
    return len(texts) / best, float(tokens) / len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_option(parser)
    parser.add_argument("--dims", type=int, nargs="+", default=list(WORDLLAMA_DIMENSIONS))
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=0, help="first N documents only (0: all)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    texts = [str(r.get("text", "")) for r in load_texts(args.data)]
    if args.limit:
        texts = texts[: args.limit]
    print(f"# {machine()}; {len(texts)} documents of {args.data.name}; one core")
    print("dimension  docs/s  tokens/doc")
    for dim in args.dims:
        rate, per_doc = run(texts, dim, args.batch, args.repeats)
        print(f"{dim:9d}  {rate:6.0f}  {per_doc:10.1f}")


if __name__ == "__main__":
    main()
