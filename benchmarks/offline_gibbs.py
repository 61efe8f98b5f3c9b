"""Offline collapsed Gibbs on a whole labelled file (paper 004, Algorithm 1, with the `dpmm`
predictive and its Pitman–Yor prior): the batch alternative to the streaming pass for
bootstrapping a namespace (noveld fit). Prints NMI and clusters after each number of sweeps.

    python benchmarks/offline_gibbs.py [--data FILE] [--sweeps 0 5 20 50] [--map]

All documents form one batch: sequential CRP seating, then ``sweeps`` Gibbs sweeps that remove
and reseat every document (sampled; ``--map`` takes the most probable cluster instead). The
new-cluster weight is the stream's (α·256), so the model is the one the daemon would continue.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, load_texts, machine

from noveld.eval.metrics import clustering_scores
from noveld.featurize import Featurizer, Tokenizer
from noveld.models.dpmm import DPMMConfig
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument


def gibbs(docs: list[DecodedDocument], sweeps: int, deterministic: bool, seed: int) -> list[int]:
    """Cluster uid of every document after the seating pass and ``sweeps`` sweeps."""
    batch, _ = Featurizer(Tokenizer(), Vocabulary()).featurize(docs)
    cfg = DPMMConfig()
    stats = MultinomialStats()
    nb = len(batch)
    stats.reserve(nb * (1 + sweeps), batch.nnz * (1 + sweeps), batch.vocab_size)
    assign = np.empty(nb, dtype=np.int64)
    kern.seat_batch(
        batch.ptr, batch.words, batch.counts, batch.lengths,
        np.random.default_rng(seed).random(nb * (1 + sweeps)), sweeps, math.log(cfg.alpha * 256),
        cfg.beta, batch.vocab_size * cfg.beta, deterministic, stats.scale, cfg.discount, stats.m,
        stats.ntok, stats.alive, stats.fresh, stats.uid, stats.head, stats.nxt, stats.pk,
        stats.pc, stats.free_stack, stats.ictl, np.empty(stats.m.shape[0]), assign,
        np.empty(nb), np.empty(nb), np.full(nb, -1, dtype=np.int64),
    )  # fmt: skip
    return [int(u) for u in stats.uid[assign]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--sweeps", type=int, nargs="+", default=[0, 5, 20, 50])
    p.add_argument("--map", action="store_true", help="MAP reseating instead of sampling")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rows = load_texts(a.data)
    docs = [DecodedDocument(id=str(r["id"]), text=str(r["text"])) for r in rows]
    labels = [str(r["label"]) for r in rows]
    print(f"machine: {machine()}")
    print(f"data: {a.data} ({len(docs):,} docs), {'MAP' if a.map else 'sampled'} sweeps")
    for sweeps in a.sweeps:
        t0 = time.perf_counter()
        preds = gibbs(docs, sweeps, a.map, a.seed)
        nmi = clustering_scores(labels, preds)["nmi"]
        print(
            f"{sweeps:>4} sweeps: NMI {nmi:.4f}, {len(set(preds))} clusters, "
            f"{time.perf_counter() - t0:.1f} s"
        )


if __name__ == "__main__":
    main()
