"""Quality of ``dpmm`` under words, vectors and both (the hybrid likelihood), one pass in stream
order over labelled JSONL files.

    python benchmarks/quality_hybrid.py [--data FILE ...] [--weights 0.25 0.5 1]
                                        [--cosines 0.5 0.6] [--dim 256]

Texts become words through the featurizer (as ``noveld run`` does) and unit vectors through the
built-in encoder (:class:`~noveld.featurize.encoder.StaticVectors`), both up front. Each row is
one pass in batches of 256 with the defaults of the settings; it prints NMI (and ARI, clusters)
for: the words model (its defaults: burst splits and merges on), the hybrid's defaults, the vmf
model on the vectors, and the hybrid at every view weight × typical cosine asked for.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# one BLAS thread: the batch's small products gain nothing from more, and on a shared 2-core
# machine a thread pool per process oversubscribes it (measured: 3.5x slower model steps)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, data_file, load_texts, machine

from noveld.daemon.pipeline import model_config
from noveld.daemon.settings import load_settings
from noveld.eval.metrics import clustering_scores
from noveld.featurize import Featurizer, Tokenizer
from noveld.featurize.encoder import StaticVectors
from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM
from noveld.models.hybrid import HybridConfig, HybridMixture
from noveld.models.vmf import VMFConfig, VMFMixture, dimension_tokens
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument

BATCH = 256


def featurized(path: Path, dim: int) -> tuple[list[DocBatch], list[str], list[int], list[int], int]:
    """Batches (words, and unit vectors in ``emb``, zero rows where a text has none), the
    labels of the documents kept, the dimensions' reserved ids (+ then −) and how many texts
    had no words."""
    rows = load_texts(path)
    vectors, has = StaticVectors(dim).encode([str(r["text"]) for r in rows])
    vectors[~has] = 0.0
    vocab = Vocabulary()
    ids = vocab.ids([t for j in range(dim) for t in dimension_tokens(j)])
    feat = Featurizer(Tokenizer(), vocab)
    batches: list[DocBatch] = []
    labels: list[str] = []
    dropped = 0
    for i in range(0, len(rows), BATCH):
        chunk = rows[i : i + BATCH]
        docs = [DecodedDocument(id=str(r["id"]), text=str(r["text"])) for r in chunk]
        batch, empty = feat.featurize(docs)
        keep = [j for j in range(len(chunk)) if j not in set(empty)]
        dropped += len(empty)
        batches.append(replace(batch, emb=vectors[i : i + len(chunk)][keep]))
        labels += [str(chunk[j]["label"]) for j in keep]
    return batches, labels, ids[0::2], ids[1::2], dropped


def one_pass(
    model: DPMM, batches: list[DocBatch], labels: list[str]
) -> tuple[dict[str, float], int, float]:
    """NMI/ARI of one pass, the clusters it ended with, docs/s."""
    stats = model.new_state()
    preds: list[int] = []
    t0 = time.perf_counter()
    for i, b in enumerate(batches):
        preds += model.partial_fit(b, stats, np.random.default_rng(i)).assignments.tolist()
    rate = len(labels) / (time.perf_counter() - t0)
    return clustering_scores(labels, preds), int(stats.alive.sum()), rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    news_t = DEFAULT_DATA.with_name("news-t.jsonl")
    p.add_argument("--data", type=data_file, nargs="+", default=[str(news_t), str(DEFAULT_DATA)])
    p.add_argument("--weights", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    p.add_argument("--cosines", type=float, nargs="+", default=[0.5, 0.6])
    p.add_argument("--dim", type=int, default=256)
    a = p.parse_args()
    base = model_config(load_settings(None, {}))
    moveless = replace(base, merge=False, split=False)
    print(f"machine: {machine()}")
    for path in a.data:
        batches, labels, pos, neg, dropped = featurized(Path(path), a.dim)
        print(f"\n{Path(path).name}: {len(labels):,} documents ({dropped} without words left "
              f"out), {len(set(labels))} stories, vectors p = {a.dim}")  # fmt: skip
        runs: list[tuple[str, DPMM]] = [("words (defaults)", DPMM(base))]
        default = HybridConfig(**moveless.__dict__, dimension=a.dim)
        runs.append((f"hybrid defaults (w {default.weight:g} cos {default.cosine})",
                     HybridMixture(default)))  # fmt: skip
        for c in a.cosines:
            vmf = VMFMixture(VMFConfig(**moveless.__dict__, dimension=a.dim, cosine=c))
            runs.append((f"vectors (vmf) cos {c}", vmf))
            for w in a.weights:
                cfg = HybridConfig(**moveless.__dict__, dimension=a.dim, cosine=c, view_weight=w)
                runs.append((f"hybrid w {w} cos {c}", HybridMixture(cfg)))
        for name, model in runs:
            if isinstance(model, VMFMixture):
                model.bind_dimension_words(pos, neg)
            scores, k, rate = one_pass(model, batches, labels)
            print(f"  {name:>24}: NMI {scores['nmi']:.3f}  ARI {scores['ari']:.3f}  "
                  f"clusters {k:5d}  {rate:8,.0f} docs/s")  # fmt: skip


if __name__ == "__main__":
    main()
