"""Building a batch's :class:`StatsDelta`: what the batch added, in true units by cluster uid
and (cluster, word), followed by its merges and retirements."""

from __future__ import annotations

import numpy as np

from noveld.models.base import DocBatch, StatsDelta
from noveld.models.dpmm.clusters import Move
from noveld.models.suffstats import MultinomialStats


def batch_delta(
    batch: DocBatch,
    uids: np.ndarray,
    f: float,
    born: list[tuple[int, int, float]],
    retired: list[tuple[int, float, str]],
    moves: list[Move],
    stats: MultinomialStats,
) -> StatsDelta:
    """The batch's documents as seated (before merges), then each merge as a move of the
    source cluster's counts into the survivor, then the retirements (merged sources too)."""
    return delta_from_entries(
        batch,
        uids,
        np.ones(len(batch)),
        batch.lengths.astype(np.float64),
        np.repeat(uids, np.diff(batch.ptr)),
        batch.words,
        batch.counts.astype(np.float64),
        f,
        born,
        retired,
        moves,
        stats,
    )


def delta_from_entries(
    batch: DocBatch,
    doc_uids: np.ndarray,
    doc_m: np.ndarray,
    doc_n: np.ndarray,
    e_uids: np.ndarray,
    e_words: np.ndarray,
    e_counts: np.ndarray,
    f: float,
    born: list[tuple[int, int, float]],
    retired: list[tuple[int, float, str]],
    moves: list[Move],
    stats: MultinomialStats,
) -> StatsDelta:
    """Aggregate per-document (``doc_*``) and per-word-entry (``e_*``) additions in true
    units by cluster uid and (cluster, word), append the merges' moves, and build the
    delta."""
    merges = np.array(
        [(int(stats.uid[src]), int(stats.uid[dst])) for src, dst, *_ in moves],
        dtype=np.int64,
    ).reshape(-1, 2)
    retired = retired + [(int(stats.uid[src]), 0.0, "merged") for src, *_ in moves]
    cl, inv = np.unique(doc_uids, return_inverse=True)
    dm = np.bincount(inv, weights=doc_m, minlength=cl.shape[0])
    dntok = np.bincount(inv, weights=doc_n, minlength=cl.shape[0])
    pair_cluster = np.searchsorted(cl, e_uids)
    if e_uids.shape[0] and (
        pair_cluster.max() >= cl.shape[0] or not np.array_equal(cl[pair_cluster], e_uids)
    ):
        raise RuntimeError("delta: word entries of a cluster no document of the batch added")
    key = pair_cluster.astype(np.int64) * (batch.vocab_size + 1) + e_words
    ukey, kinv = np.unique(key, return_inverse=True)
    wc = np.bincount(kinv, weights=e_counts, minlength=ukey.shape[0])
    return StatsDelta(
        decay=f,
        cluster_uids=cl.astype(np.int64),
        dm=dm,
        dntok=dntok,
        word_cluster=(ukey // (batch.vocab_size + 1)).astype(np.int64),
        word_ids=(ukey % (batch.vocab_size + 1)).astype(np.int64),
        word_count=wc,
        born_uids=np.array([b[0] for b in born], dtype=np.int64),
        retired_uids=np.array([r[0] for r in retired], dtype=np.int64),
        merges=merges,
    )


def births_after_merges(
    born: list[tuple[int, int, float]], merged: list[tuple[int, int]]
) -> list[tuple[int, int, float]]:
    """Births after merges: a merged-away birth is no birth, but when two births of this
    batch merge, the survivor is founded by the earlier founding document of the two."""
    by_uid = {u: (d, score) for u, d, score in born}
    for src, dst in merged:
        if src in by_uid and dst in by_uid:
            (ds, ss), (dd, sd) = by_uid[src], by_uid[dst]
            by_uid[dst] = (min(ds, dd), max(ss, sd))
        by_uid.pop(src, None)
    return sorted(((u, d, s) for u, (d, s) in by_uid.items()), key=lambda b: b[1])
