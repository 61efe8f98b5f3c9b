"""Would relabelling by cluster merges close the gap? Run the default ``dpmm`` stream (as
``noveld evaluate`` does), then, at the end of the stream, merge its clusters as a consumer
following ``cluster.merged`` events would, relabelling every earlier document of a merged
cluster, and score the result. Two merge rules, each an upper bound on what such a merge step
could do:

* **likelihood**: greedy rounds of pairwise merges that raise the collapsed posterior (the
  Dirichlet–multinomial marginal of paper 004 eq. 4 over the merged counts, words as distinct
  draws, times the CRP partition prior's ratio with weight ``--alpha``), each cluster in one merge
  per round, best gain first; reported for several gain thresholds, the best one chosen *with*
  the labels;
* **oracle**: every cluster of at least ``--min-size`` documents relabelled by its majority true
  story (what perfect merge decisions would give; smaller clusters stay as they are).

    python benchmarks/ceiling_merge_resolution.py [--data FILE] [--min-size 2] [--alpha 7.68]

Counts are the documents' raw word counts (no forgetting), so the merge test sees every word.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, load_texts, machine

from noveld.daemon.evaluate import run_and_record
from noveld.daemon.settings import Settings
from noveld.eval.metrics import clustering_scores
from noveld.featurize import Tokenizer

lgamma = math.lgamma


class Cluster:
    """Raw word counts and document count of one cluster (sparse)."""

    def __init__(self) -> None:
        self.words: Counter[str] = Counter()
        self.tokens = 0
        self.docs = 0

    def absorb(self, other: Cluster) -> None:
        """Add ``other``'s counts to this cluster."""
        self.words.update(other.words)
        self.tokens += other.tokens
        self.docs += other.docs


def merge_gain(a: Cluster, b: Cluster, beta: float, vbeta: float, log_alpha: float) -> float:
    """Log posterior ratio of merging ``a`` and ``b``: the Dirichlet–multinomial marginals
    (only shared words and the totals differ) plus the CRP prior's ratio."""
    small, large = (a, b) if len(a.words) <= len(b.words) else (b, a)
    shared = sum(
        lgamma(n + large.words[w] + beta)
        - lgamma(n + beta)
        - lgamma(large.words[w] + beta)
        + lgamma(beta)
        for w, n in small.words.items()
        if w in large.words
    )
    both = a.tokens + b.tokens
    totals = lgamma(a.tokens + vbeta) + lgamma(b.tokens + vbeta) - lgamma(both + vbeta)
    prior = lgamma(a.docs + b.docs) - lgamma(a.docs) - lgamma(b.docs) - log_alpha
    return shared + totals - lgamma(vbeta) + prior


def greedy_merges(
    clusters: dict[int, Cluster], threshold: float, beta: float, vbeta: float, log_alpha: float
) -> dict[int, int]:
    """Rounds of best-first pairwise merges with gain above ``threshold``; each cluster's
    survivor."""
    alive = {k: Cluster() for k in clusters}
    for k, c in clusters.items():
        alive[k].absorb(c)
    into = {k: k for k in clusters}
    while True:
        keys = sorted(alive)
        pairs = [
            (merge_gain(alive[a], alive[b], beta, vbeta, log_alpha), a, b)
            for i, a in enumerate(keys)
            for b in keys[i + 1 :]
        ]
        used: set[int] = set()
        merged = 0
        for gain, a, b in sorted(pairs, reverse=True):
            if gain <= threshold:
                break
            if a in used or b in used:
                continue
            used.update((a, b))
            alive[a].absorb(alive.pop(b))
            into[b] = a
            merged += 1
        if not merged:
            break

    def root(k: int) -> int:
        while into[k] != k:
            k = into[k]
        return k

    return {k: root(k) for k in clusters}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--min-size", type=int, default=2, help="clusters smaller stay unmerged")
    p.add_argument("--alpha", type=float, default=0.03 * 256, help="CRP weight of the merge test")
    p.add_argument("--beta", type=float, default=0.01)
    p.add_argument("--thresholds", type=float, nargs="+", default=[20, 10, 5, 0, -5])
    a = p.parse_args()
    print(f"machine: {machine()}")
    rec, _, _, _ = run_and_record(Settings(), str(a.data))
    text_of = {str(r["id"]): str(r["text"]) for r in load_texts(a.data)}
    labels = [str(x) for x in rec.labels]
    tok = Tokenizer()
    clusters: dict[int, Cluster] = defaultdict(Cluster)
    stories: dict[int, Counter[str]] = defaultdict(Counter)
    vocab: set[str] = set()
    for doc_id, k, label in zip(rec.ids, rec.clusters, labels, strict=True):
        words = tok.tokenize(text_of[doc_id])
        vocab.update(words)
        clusters[k].words.update(words)
        clusters[k].tokens += len(words)
        clusters[k].docs += 1
        stories[k][label] += 1
    base = clustering_scores(labels, rec.clusters)["nmi"]
    print(f"{a.data.name}: stream as emitted NMI {base:.4f}, {len(clusters)} clusters")
    big = {k: c for k, c in clusters.items() if c.docs >= a.min_size}
    oracle = [f"story:{stories[k].most_common(1)[0][0]}" if k in big else k for k in rec.clusters]
    print(
        f"  oracle merges of the {len(big)} clusters of ≥ {a.min_size} documents: NMI "
        f"{clustering_scores(labels, oracle)['nmi']:.4f}"
    )
    vbeta, log_alpha = len(vocab) * a.beta, math.log(a.alpha)
    for threshold in a.thresholds:
        root = greedy_merges(big, threshold, a.beta, vbeta, log_alpha)
        pred = [root.get(k, k) for k in rec.clusters]
        kept = len(set(root.values()))
        nmi = clustering_scores(labels, pred)["nmi"]
        print(
            f"  likelihood merges, gain > {threshold:g} nats: NMI {nmi:.4f} "
            f"({len(big)} → {kept} clusters)",
            flush=True,
        )


if __name__ == "__main__":
    main()
