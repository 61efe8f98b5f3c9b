"""Throughput and quality of ``--likelihood vmf`` (``dpmm`` on embeddings) on a synthetic stream.

    python benchmarks/bench_vmf.py [--docs 20000] [--dim 384] [--stories 80] [--cosine 0.5]
                                   [--repeat 3] [--e2e]

Generates a labelled embedding stream (``noveld generate --embeddings DIM``: story directions
uniform on the sphere, documents vMF around them at the given typical cosine), featurizes it up
front (not timed), runs ``VMFMixture.partial_fit`` over batches of 256 in stream order and
prints NMI, clusters, model-only docs/s (best of ``--repeat``) and batch latency percentiles.
With ``--e2e`` it also times ``noveld run`` file → stdout on the same stream.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine

from noveld.eval.metrics import clustering_scores
from noveld.featurize import Featurizer, Tokenizer
from noveld.models.vmf import VMFConfig, VMFMixture, dimension_tokens
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument
from noveld.synth import SynthConfig, generate, write_jsonl


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--docs", type=int, default=20_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--stories", type=int, default=80)
    p.add_argument("--cosine", type=float, default=0.5, help="the stream's and the model's")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--e2e", action="store_true", help="also time `noveld run` end to end")
    a = p.parse_args()
    synth = SynthConfig(
        n_docs=a.docs, n_stories=a.stories, embedding_dim=a.dim, embedding_cosine=a.cosine
    )
    rows = list(generate(synth))
    docs = [
        DecodedDocument(id=str(r["id"]), text=str(r["text"]), embedding=r["embedding"])
        for r in rows
    ]
    labels = [str(r["label"]) for r in rows]
    vocab = Vocabulary()
    ids = vocab.ids([t for j in range(a.dim) for t in dimension_tokens(j)])
    feat = Featurizer(Tokenizer(), vocab, embedding_dim=a.dim)
    batches = [
        feat.featurize(docs[i : i + a.batch_size])[0] for i in range(0, a.docs, a.batch_size)
    ]
    print(f"machine: {machine()}")
    print(f"stream: {a.docs:,} documents, {a.stories} stories, p = {a.dim}, cosine {a.cosine}")
    best = 0.0
    for _ in range(a.repeat):
        model = VMFMixture(VMFConfig(dimension=a.dim, cosine=a.cosine, deterministic=True))
        model.bind_dimension_words(ids[0::2], ids[1::2])
        stats = model.new_state()
        preds: list[int] = []
        lat = []
        t0 = time.perf_counter()
        for i, b in enumerate(batches):
            t = time.perf_counter()
            res = model.partial_fit(b, stats, np.random.default_rng(i))
            lat.append(time.perf_counter() - t)
            preds += res.assignments.tolist()
        rate = a.docs / (time.perf_counter() - t0)
        best = max(best, rate)
    scores = clustering_scores(labels, preds)
    p50, p99 = np.percentile(lat, [50, 99]) * 1000
    print(
        f"model step: {best:,.0f} docs/s (best of {a.repeat}) · batch p50 {p50:.2f} ms "
        f"p99 {p99:.2f} ms · NMI {scores['nmi']:.3f} · {len(set(preds))} clusters "
        f"for {len(set(labels))} stories"
    )
    if a.e2e:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "emb.jsonl"
            write_jsonl(synth, path)
            walls = []
            for _ in range(a.repeat):
                t = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "noveld.daemon.cli", "run", "--input", str(path),
                     "--likelihood", "vmf", "--embedding-dim", str(a.dim), "--vmf-cosine",
                     str(a.cosine), "--quiet"],
                    check=True, stdout=subprocess.DEVNULL,
                )  # fmt: skip
                walls.append(time.perf_counter() - t)
            wall = min(walls)
            print(
                f"end to end (noveld run file → stdout): {wall:.2f} s, {a.docs / wall:,.0f} docs/s"
            )


if __name__ == "__main__":
    main()
