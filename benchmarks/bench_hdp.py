"""Model-only quality and throughput of the ``hdp`` model (issue #4).

    python benchmarks/bench_hdp.py [--data FILE] [--topics 2000] [--zeta 5e-4] [--gamma 10]
                                   [--discount 0.5] [--table-alpha 1] [--sweeps 2] [--sampled]
                                   [--document-concentration S] [--repeat 3]
                                   [--featurizer words|hybrid] [--encoder-dim 256]

Featurizes the labelled file up front (not timed), runs ``HDP.partial_fit`` over batches of 256
in stream order and prints NMI of the document categories, categories, model-only docs/s (best
of ``--repeat`` runs: this shared machine varies by ±30 %; docs per CPU second alongside) and
batch latency percentiles. ``--featurizer hybrid`` adds each text's vector from the built-in
encoder (encoded up front, not timed) and the vMF term per category.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon's launcher asks, before numpy
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, load_texts, machine

from noveld.eval.metrics import clustering_scores
from noveld.featurize import Featurizer, Tokenizer
from noveld.featurize.encoder import StaticVectors
from noveld.models.hdp import HDP, HDPConfig, topic_token
from noveld.models.hdp.vectors import VECTOR_COUNT_TOKEN
from noveld.models.vmf import dimension_tokens
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--topics", type=int, default=HDPConfig.topics)
    p.add_argument("--zeta", type=float, default=HDPConfig.zeta)
    p.add_argument("--gamma", type=float, default=HDPConfig.gamma)
    p.add_argument("--discount", type=float, default=HDPConfig.discount)
    p.add_argument("--table-alpha", type=float, default=HDPConfig.table_alpha)
    p.add_argument("--sweeps", type=int, default=HDPConfig.sweeps)
    p.add_argument("--sampled", action="store_true", help="sample instead of MAP")
    p.add_argument(
        "--document-concentration",
        type=float,
        default=HDPConfig.document_concentration,
        help="s of the length tempering of a table's words (docs/model.md)",
    )
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--featurizer", choices=("words", "hybrid"), default="words")
    p.add_argument("--encoder-dim", type=int, default=256, help="hybrid: the vectors' p")
    a = p.parse_args()
    rows = load_texts(a.data)
    docs = [DecodedDocument(id=str(r["id"]), text=str(r["text"])) for r in rows]
    vocab = Vocabulary()
    vocab.extend(topic_token(t) for t in range(a.topics))
    dim = a.encoder_dim if a.featurizer == "hybrid" else 0
    dim_ids: list[int] = []
    vectors = np.zeros((len(rows), 0))
    if dim:
        pairs = [t for j in range(dim) for t in dimension_tokens(j)]
        dim_ids = vocab.ids([*pairs, VECTOR_COUNT_TOKEN])
        vectors, has = StaticVectors(dim).encode([str(r["text"]) for r in rows])
        vectors[~has] = 0.0
    feat = Featurizer(Tokenizer(), vocab)
    batches = []
    for i in range(0, len(docs), a.batch_size):
        batch, empty = feat.featurize(docs[i : i + a.batch_size])
        assert not empty
        batches.append(replace(batch, emb=vectors[i : i + a.batch_size]) if dim else batch)
    cfg = HDPConfig(
        topics=a.topics,
        zeta=a.zeta,
        gamma=a.gamma,
        discount=a.discount,
        table_alpha=a.table_alpha,
        sweeps=a.sweeps,
        deterministic=not a.sampled,
        document_concentration=a.document_concentration,
        dimension=dim,
    )
    model = HDP(cfg)
    model.bind_topic_words(list(range(a.topics)))
    if dim:
        model.bind_dimension_words(dim_ids[0:-1:2], dim_ids[1:-1:2], dim_ids[-1])
    model.partial_fit(batches[0], model.new_state(), np.random.default_rng(0))  # JIT warm-up
    best: tuple[float, list[int], np.ndarray] | None = None
    for _ in range(a.repeat):
        stats = model.new_state()
        out: list[int] = []
        lat = []
        c0 = time.process_time()
        t0 = time.perf_counter()
        for i, b in enumerate(batches):
            t = time.perf_counter()
            out += model.partial_fit(b, stats, np.random.default_rng(i)).assignments.tolist()
            lat.append(time.perf_counter() - t)
        rate = len(out) / (time.perf_counter() - t0)
        cpu_rate = len(out) / (time.process_time() - c0)
        if best is None or rate > best[0]:
            best = (rate, out, np.array(lat), cpu_rate)
    assert best is not None
    rate, out, lats, cpu_rate = best
    nmi = clustering_scores([str(r["label"]) for r in rows], out)["nmi"]
    print(f"machine: {machine()}")
    print(
        f"{a.data.name} {a.featurizer} L={cfg.topics} ζ={cfg.zeta} sweeps={cfg.sweeps} "
        f"{'sampled' if a.sampled else 'MAP'}: NMI {nmi:.4f}, categories {len(set(out))}, "
        f"{rate:,.0f} docs/s ({cpu_rate:,.0f} per CPU second), "
        f"batch p50 {np.median(lats) * 1e3:.1f} ms "
        f"p99 {np.percentile(lats, 99) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
