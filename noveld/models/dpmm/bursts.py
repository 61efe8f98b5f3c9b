"""Burst splits of the DP mixture: documents of a new story that arrive together, each seated
alone in an old cluster, moved as a group to a cluster of their own when that raises the
collapsed posterior."""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.dpmm.config import DPMMConfig
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats

SPLIT_ROUNDS = 3  # burst-split rounds per batch at most (each stops early when nothing moves)


def split_bursts(
    batch: DocBatch,
    assign: np.ndarray,
    stats: MultinomialStats,
    forced: np.ndarray,
    cfg: DPMMConfig,
    log_alpha: float,
    pinned: Collection[int],
) -> int:
    """Give bursts their own clusters; returns how many groups moved.

    Seated one at a time, each document of a new story that arrives in a burst joins the
    closest old cluster (a lone document rarely outweighs an old cluster's mass); as a group
    they explain each other. Up to :data:`SPLIT_ROUNDS` rounds of: (1) for each older
    cluster holding two or more of the batch's documents, in uid order (so slot layout —
    restarts, replicas — cannot change the outcome), move the best subgroup of them
    (:func:`kern.best_split_group`) to a new cluster when that raises the collapsed
    posterior (:func:`kern.split_gain`, exact); (2) re-seat the batch's other documents
    in older clusters, each moving only if its MAP cluster is one opened in this batch.
    Known categories (``pinned``) and groups holding a labelled document are left alone.
    ``log_alpha`` is the batch's new-cluster weight.
    """
    moved = 0
    for _ in range(SPLIT_ROUNDS):
        n = split_round(batch, assign, stats, forced, cfg, log_alpha, pinned)
        if n == 0:
            break
        moved += n
        reseat_into_new(batch, assign, stats, forced, cfg, log_alpha, pinned)
    return moved


def split_round(
    batch: DocBatch,
    assign: np.ndarray,
    stats: MultinomialStats,
    forced: np.ndarray,
    cfg: DPMMConfig,
    log_alpha: float,
    pinned: Collection[int],
) -> int:
    """Step (1) of :func:`split_bursts`."""
    nb = len(batch)
    theta = math.exp(log_alpha)
    n_live = int(stats.alive[: stats.kmax].sum())
    # each cluster's batch documents, in document order: one stable sort, not a scan per slot
    order = np.argsort(assign, kind="stable")
    sorted_slots = assign[order]
    starts = np.flatnonzero(np.r_[True, sorted_slots[1:] != sorted_slots[:-1]])
    ends = np.r_[starts[1:], nb]
    slots = sorted_slots[starts]
    has_forced = np.maximum.reduceat((forced[order] >= 0).astype(np.int8), starts) > 0
    ok = (ends - starts >= 2) & ~stats.fresh[slots] & ~has_forced
    if pinned:
        ok &= np.array([int(u) not in pinned for u in stats.uid[slots].tolist()])
    cand = np.flatnonzero(ok)
    cand = cand[np.argsort(stats.uid[slots[cand]], kind="stable")]  # uid order
    if cand.shape[0] == 0:
        return 0
    keep = np.empty(nb, dtype=np.bool_)
    gains = kern.best_split_groups(
        slots[cand], starts[cand], ends[cand], order, batch.ptr, batch.words, batch.counts,
        batch.lengths, stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc,
        stats.scale, cfg.beta, batch.n_words * cfg.beta, theta, cfg.discount, n_live, keep,
    )  # fmt: skip
    moved = 0
    for i in np.flatnonzero(gains > 0.0).tolist():
        k, a, b = int(slots[cand[i]]), int(starts[cand[i]]), int(ends[cand[i]])
        group = order[a:b][keep[a:b]]
        stats.reserve(1, int((batch.ptr[group + 1] - batch.ptr[group]).sum()), 0)
        new = kern.open_cluster(stats.alive, stats.uid, stats.fresh, stats.free_stack, stats.ictl)
        for d in group.tolist():
            move_document(batch, d, k, new, stats)
        assign[group] = new
        moved += 1
    return moved


def reseat_into_new(
    batch: DocBatch,
    assign: np.ndarray,
    stats: MultinomialStats,
    forced: np.ndarray,
    cfg: DPMMConfig,
    log_alpha: float,
    pinned: Collection[int],
) -> None:
    """Step (2) of :func:`split_bursts`: one MAP Gibbs step for each batch document in an
    older cluster, taken only when it lands in a cluster opened in this batch."""
    is_pinned = np.zeros(stats.m.shape[0], dtype=np.bool_)
    if pinned:
        uids = stats.uid[: stats.kmax].tolist()
        is_pinned[: stats.kmax] = [int(u) in pinned for u in uids]
    kern.reseat_into_fresh(
        batch.ptr, batch.words, batch.counts, batch.lengths, assign, forced, is_pinned,
        stats.m, stats.ntok, stats.alive, stats.fresh, stats.uid, stats.head, stats.nxt,
        stats.pk, stats.pc, stats.ictl, stats.scale, cfg.beta, batch.n_words * cfg.beta,
        log_alpha, cfg.discount, cfg.document_concentration,
    )  # fmt: skip


def move_document(batch: DocBatch, d: int, src: int, dst: int, stats: MultinomialStats) -> None:
    """Move batch document ``d``'s counts from cluster slot ``src`` to ``dst``."""
    w, c = batch.doc(d)
    nd = int(batch.lengths[d])
    weight = 1.0 / stats.scale
    for slot, sign in ((src, -1.0), (dst, 1.0)):
        kern.add_document(
            slot, w, c, nd, sign * weight, stats.m, stats.ntok, stats.head, stats.nxt,
            stats.pk, stats.pc, stats.ictl,
        )  # fmt: skip
