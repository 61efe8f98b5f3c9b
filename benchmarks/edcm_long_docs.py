"""Why the EDCM under- or over-fragments long documents: a direct model-level run with
per-document diagnostics (best cluster's seating weight against the new cluster's).

Drives :class:`~noveld.models.edcm.EDCMMixture` on tokenized documents in batches of 256 with
MAP seating, as ``noveld evaluate --likelihood edcm`` does by default (no Redis, no events; the
same NMI and cluster count on reuters-r8, news and news-t), and prints NMI, homogeneity,
completeness and the largest clusters. ``--diagnose`` adds, per document length band and against
the state before each batch, the best old cluster's log seating weight minus the new cluster's
and how often the new cluster wins. Use it to compare priors and α quickly::

    python benchmarks/edcm_long_docs.py --data ../shared/data/reuters-r8.jsonl --diagnose
    python benchmarks/edcm_long_docs.py --data ../shared/data/reuters-r8.jsonl --long-words 0
    python benchmarks/edcm_long_docs.py --data ../shared/data/news.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np

from noveld.eval.metrics import clustering_scores
from noveld.featurize.words import Tokenizer
from noveld.models.base import DocBatch
from noveld.models.edcm import EDCMConfig, EDCMMixture
from noveld.models.kernels import edcm as ekern


def load(path: Path) -> tuple[list[list[str]], list[str]]:
    """Tokens and labels of a labelled JSONL file, in file order."""
    tok = Tokenizer()
    docs, labels = [], []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        toks = tok.tokenize(obj["text"])
        if toks:
            docs.append(toks)
            labels.append(str(obj["label"]))
    return docs, labels


def run(
    docs: list[list[str]], cfg: EDCMConfig, batch_size: int, diagnose: bool, seed: int = 0
) -> tuple[list[int], list[tuple[int, int, float, float]]]:
    """Stream ``docs``; return each document's cluster uid and, with ``diagnose``, per-document
    (n, u, best existing log weight, new-cluster log weight) before its batch."""
    model = EDCMMixture(cfg)
    nb_ = ekern.N_BINS
    model.bind_length_words(list(range(nb_)))
    stats = model.new_state()
    vocab: dict[str, int] = {}
    rng = np.random.default_rng(seed)
    out: list[int] = []
    diag: list[tuple[int, int, float, float]] = []
    for start in range(0, len(docs), batch_size):
        ids = [
            [vocab.setdefault(w, nb_ + len(vocab)) for w in d]
            for d in docs[start : start + batch_size]
        ]
        batch = DocBatch.from_docs(ids, nb_ + len(vocab))
        batch = DocBatch(batch.ptr, batch.words, batch.counts, batch.lengths, batch.vocab_size, nb_)
        if diagnose and stats.kmax > 0:
            stats.reserve(0, 0, batch.vocab_size)
            sh = model.shapes(stats, batch.n_words)
            for d in range(len(batch)):
                w, _ = batch.doc(d)
                lp, lp_new = model.scores(
                    stats, sh, w, int(batch.lengths[d]), batch.n_words, len(batch)
                )
                best = (
                    float(lp[stats.alive[: stats.kmax]].max())
                    if stats.alive[: stats.kmax].any()
                    else -np.inf
                )
                diag.append((int(batch.lengths[d]), int(w.shape[0]), best, lp_new))
        res = model.partial_fit(batch, stats, rng)
        out.extend(int(u) for u in res.assignments)
    return out, diag


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--alpha", type=float, default=0.03)
    p.add_argument("--prior", type=float, default=0.001)
    p.add_argument("--prior-docs", type=float, default=5.0)
    p.add_argument("--discount", type=float, default=0.5)
    p.add_argument("--long-words", type=float, default=40.0, help="0: symmetric prior only")
    p.add_argument("--long-words-full", type=float, default=50.0)
    p.add_argument("--long-prior", type=float, default=0.003)
    p.add_argument("--long-prior-docs", type=float, default=40.0)
    p.add_argument("--background-docs", type=float, default=40.0)
    p.add_argument("--sampled", action="store_true", help="sampled seating (default: MAP)")
    p.add_argument("--diagnose", action="store_true")
    a = p.parse_args()
    docs, labels = load(a.data)
    cfg = EDCMConfig(
        alpha=a.alpha, prior=a.prior, prior_docs=a.prior_docs, discount=a.discount,
        deterministic=not a.sampled, background_docs=a.background_docs,
        long_words=a.long_words, long_words_full=a.long_words_full, long_prior=a.long_prior,
        long_prior_docs=a.long_prior_docs,
    )  # fmt: skip
    t0 = time.perf_counter()
    preds, diag = run(docs, cfg, a.batch_size, a.diagnose)
    sec = time.perf_counter() - t0
    sc = clustering_scores(labels, preds)
    sizes = Counter(preds).most_common(5)
    print(
        f"nmi {sc['nmi']:.4f} h {sc['homogeneity']:.3f} c {sc['completeness']:.3f} "
        f"clusters {len(set(preds))} top {sizes} {sec:.1f}s"
    )
    if diag:
        arr = np.array(diag)
        gap = arr[:, 2] - arr[:, 3]
        for lo, hi in [(1, 20), (20, 50), (50, 100), (100, 200), (200, 400), (400, 2000)]:
            sel = (arr[:, 0] >= lo) & (arr[:, 0] < hi)
            if sel.any():
                g = gap[sel]
                print(
                    f"n {lo:4d}-{hi:4d}: docs {sel.sum():5d} u {arr[sel, 1].mean():6.1f} "
                    f"best-new median {np.median(g):8.1f} p10 {np.percentile(g, 10):8.1f} "
                    f"p90 {np.percentile(g, 90):8.1f} new-wins {np.mean(g < 0):.3f}"
                )


if __name__ == "__main__":
    main()
